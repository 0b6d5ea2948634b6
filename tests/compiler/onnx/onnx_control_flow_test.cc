// ONNX Loop, Scan and If on graphs built here: scan outputs stacked on a
// new axis (zero iterations too), a Scan in both directions, a loop nested in a loop reading the
// values of both enclosing graphs, a condition known at import time, and malformed subgraphs
// refused with errors that name the node. (PyTorch's exports of loops and branches are in
// onnx_import_test.cc.)
#include "nimble/compiler/onnx/onnx_control_flow.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/onnx/onnx_import.h"
#include "nimble/compiler/text/printer.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/vm.h"
#include "tests/compiler/onnx/onnx_graph_builder.h"
#include "tests/error_of.h"

namespace nimble::onnx_import {
namespace {

using onnx::TensorProto;
using ::testing::HasSubstr;

onnx::ModelProto ModelOf(const onnx::GraphProto& graph) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(14);
  *model.mutable_graph() = graph;
  return model;
}

// A Loop body's graph of inputs (iteration `i`, condition `cond`, then
// `carried`, float32 scalars).
onnx::GraphProto Body(const std::vector<std::string>& carried) {
  onnx::GraphProto body;
  body.set_name("body");
  AddInput(body, "i", TensorProto::INT64, {});
  AddInput(body, "cond", TensorProto::BOOL, {});
  for (const std::string& name : carried) AddInput(body, name, TensorProto::FLOAT, {});
  return body;
}

void AddOutputs(onnx::GraphProto& graph, const std::vector<std::string>& names) {
  for (const std::string& name : names) graph.add_output()->set_name(name);
}

vm::VirtualMachine Compiled(const onnx::ModelProto& model) {
  backend::CompileOptions options;
  options.tuning_database.clear();
  return vm::VirtualMachine(
      backend::Compile(ImportOnnx(model.SerializeAsString(), "model.onnx"), options));
}

std::vector<Tensor> Fields(const Ref<Object>& value) {
  std::vector<Tensor> fields;
  for (const Ref<Object>& field : value.as<ADTNode>()->fields()) {
    fields.push_back(field.as<TensorNode>());
  }
  return fields;
}

std::string ImportError(const onnx::GraphProto& graph) {
  return ErrorOf([&] { ImportOnnx(ModelOf(graph).SerializeAsString(), "model.onnx"); });
}

// A graph `name` of input X (float32, n) with initializers zero (0.0) and
// first (int64 0), and X's `length`.
onnx::GraphProto GraphOfX(const std::string& name) {
  onnx::GraphProto graph;
  graph.set_name(name);
  AddInput(graph, "X", TensorProto::FLOAT, {-1});
  AddScalar(graph, "zero", TensorProto::FLOAT, 0.0);
  AddScalar(graph, "first", TensorProto::INT64, 0);
  AddNode(graph, "Shape", {"X"}, "shape");
  AddNode(graph, "Gather", {"shape", "first"}, "length");
  return graph;
}

// for i < len(X): sum += X[i]; scan X[i]^2 and (i, 2i). Returns the graph.
onnx::GraphProto SumAndScans() {
  onnx::GraphProto graph = GraphOfX("scans");
  AddScalar(graph, "yes", TensorProto::BOOL, 1);
  onnx::GraphProto body = Body({"sum_in"});
  AddNode(body, "Gather", {"X", "i"}, "x");
  AddNode(body, "Add", {"sum_in", "x"}, "sum_out");
  AddNode(body, "Mul", {"x", "x"}, "square");
  onnx::TensorProto& pair = *body.add_initializer();
  pair.set_name("one_two");
  pair.set_data_type(TensorProto::FLOAT);
  pair.add_dims(2);
  pair.add_float_data(1);
  pair.add_float_data(2);
  onnx::NodeProto& cast = AddNode(body, "Cast", {"i"}, "i_float");
  SetInt(cast, "to", TensorProto::FLOAT);
  AddNode(body, "Mul", {"i_float", "one_two"}, "row");
  AddNode(body, "Identity", {"cond"}, "cond_out");
  AddOutputs(body, {"cond_out", "sum_out", "square", "row"});
  onnx::NodeProto& loop = AddNode(graph, "Loop", {"length", "yes", "zero"}, "sum");
  loop.add_output("squares");
  loop.add_output("rows");
  SetGraph(loop, "body", body);
  AddOutputs(graph, {"sum", "squares", "rows"});
  return graph;
}

TEST(OnnxControlFlow, ScanOutputsAreStackedOnANewAxisEvenForNoIterations) {
  vm::VirtualMachine machine = Compiled(ModelOf(SumAndScans()));
  for (int64_t n : {0, 1, 4}) {
    std::vector<float> x;
    for (int64_t k = 0; k < n; ++k) x.push_back(0.5f * static_cast<float>(k) - 1.0f);
    const std::vector<Tensor> out = Fields(
        machine.Invoke("main", {TensorNode::FromVector<float>({n}, DataType::Float32(), x)}));
    ASSERT_EQ(out.size(), 3u);
    ASSERT_EQ(out[0]->shape(), Shape{});
    ASSERT_EQ(out[1]->shape(), Shape{n}) << "n = " << n;
    ASSERT_EQ(out[2]->shape(), (Shape{n, 2})) << "n = " << n;
    float sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      sum += x[k];
      EXPECT_FLOAT_EQ(out[1]->data<float>()[k], x[k] * x[k]);
      EXPECT_FLOAT_EQ(out[2]->data<float>()[2 * k], static_cast<float>(k));
      EXPECT_FLOAT_EQ(out[2]->data<float>()[2 * k + 1], 2.0f * static_cast<float>(k));
    }
    EXPECT_FLOAT_EQ(out[0]->data<float>()[0], sum) << "n = " << n;
  }
}

void SetInts(onnx::NodeProto& node, const std::string& name, const std::vector<int64_t>& values) {
  onnx::AttributeProto& attribute = *node.add_attribute();
  attribute.set_name(name);
  attribute.set_type(onnx::AttributeProto::INTS);
  for (int64_t value : values) attribute.add_ints(value);
}

// Scan over the columns of X (2, n): the running sum of the columns, as the
// last state and stacked along axis 1; with `reversed`, from the last column,
// stacked in that direction too, which gives each column's suffix sum.
onnx::ModelProto RunningSums(bool reversed) {
  onnx::GraphProto graph;
  graph.set_name("scan");
  AddInput(graph, "X", TensorProto::FLOAT, {2, -1});
  onnx::TensorProto& zeros = *graph.add_initializer();
  zeros.set_name("zeros");
  zeros.set_data_type(TensorProto::FLOAT);
  zeros.add_dims(2);
  zeros.add_float_data(0);
  zeros.add_float_data(0);
  onnx::GraphProto body;
  body.set_name("body");
  AddInput(body, "sum_in", TensorProto::FLOAT, {2});
  AddInput(body, "column", TensorProto::FLOAT, {2});
  AddNode(body, "Add", {"sum_in", "column"}, "sum_out");
  AddNode(body, "Identity", {"sum_out"}, "running");
  AddOutputs(body, {"sum_out", "running"});
  onnx::NodeProto& scan = AddNode(graph, "Scan", {"zeros", "X"}, "total");
  scan.add_output("sums");
  SetGraph(scan, "body", body);
  SetInt(scan, "num_scan_inputs", 1);
  SetInts(scan, "scan_input_axes", {1});
  SetInts(scan, "scan_output_axes", {-1});
  SetInts(scan, "scan_input_directions", {reversed ? 1 : 0});
  SetInts(scan, "scan_output_directions", {reversed ? 1 : 0});
  AddOutputs(graph, {"total", "sums"});
  return ModelOf(graph);
}

TEST(OnnxControlFlow, AScanReadsItsInputsAlongAnAxisInEitherDirection) {
  for (bool reversed : {false, true}) {
    vm::VirtualMachine machine = Compiled(RunningSums(reversed));
    for (int64_t n : {0, 1, 5}) {
      std::vector<float> x(static_cast<size_t>(2 * n));
      for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k % 7) - 2.5f;
      const std::vector<Tensor> out = Fields(
          machine.Invoke("main", {TensorNode::FromVector<float>({2, n}, DataType::Float32(), x)}));
      const std::string what = (reversed ? "reversed, n = " : "n = ") + std::to_string(n);
      ASSERT_EQ(out[0]->shape(), Shape{2}) << what;
      ASSERT_EQ(out[1]->shape(), (Shape{2, n})) << what;
      for (int64_t row = 0; row < 2; ++row) {
        float total = 0;
        for (int64_t column = 0; column < n; ++column) total += x[row * n + column];
        EXPECT_FLOAT_EQ(out[0]->data<float>()[row], total) << what;
        for (int64_t column = 0; column < n; ++column) {
          float expected = 0;
          for (int64_t other = 0; other < n; ++other) {
            if (reversed ? other >= column : other <= column) expected += x[row * n + other];
          }
          EXPECT_FLOAT_EQ(out[1]->data<float>()[row * n + column], expected)
              << what << ", row " << row << ", column " << column;
        }
      }
    }
  }
}

// A scan output of the graph's `?` size: X * i stacked, (n, n), from no
// iterations to five.
TEST(OnnxControlFlow, ScanOutputsOfARunTimeSizeAreStacked) {
  onnx::GraphProto graph = SumAndScans();
  onnx::GraphProto& body = *graph.mutable_node(2)->mutable_attribute(0)->mutable_g();
  AddNode(body, "Mul", {"X", "i_float"}, "scaled");
  body.mutable_output(3)->set_name("scaled");
  vm::VirtualMachine machine = Compiled(ModelOf(graph));
  for (int64_t n : {0, 1, 5}) {
    std::vector<float> x;
    for (int64_t k = 0; k < n; ++k) x.push_back(1.5f - static_cast<float>(k));
    const std::vector<Tensor> out = Fields(
        machine.Invoke("main", {TensorNode::FromVector<float>({n}, DataType::Float32(), x)}));
    ASSERT_EQ(out[2]->shape(), (Shape{n, n})) << "n = " << n;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_FLOAT_EQ(out[2]->data<float>()[i * n + j], x[j] * static_cast<float>(i))
            << "n = " << n << ", row " << i;
      }
    }
  }
}

// for i < len(X): total += (for j <= i: s += X[j] * i): the inner body reads
// the graph's input X and the outer body's i.
TEST(OnnxControlFlow, ANestedLoopReadsTheValuesOfBothEnclosingGraphs) {
  onnx::GraphProto graph = GraphOfX("nested");
  AddScalar(graph, "one", TensorProto::INT64, 1);
  onnx::GraphProto inner = Body({"s_in"});
  inner.set_name("inner");
  inner.mutable_input(0)->set_name("j");
  inner.mutable_input(1)->set_name("inner_cond");
  AddNode(inner, "Gather", {"X", "j"}, "xj");
  AddNode(inner, "Mul", {"xj", "i_float"}, "term");
  AddNode(inner, "Add", {"s_in", "term"}, "s_out");
  AddNode(inner, "Identity", {"inner_cond"}, "inner_cond_out");
  AddOutputs(inner, {"inner_cond_out", "s_out"});
  onnx::GraphProto outer = Body({"total_in"});
  onnx::NodeProto& cast = AddNode(outer, "Cast", {"i"}, "i_float");
  SetInt(cast, "to", TensorProto::FLOAT);
  AddNode(outer, "Add", {"i", "one"}, "count");
  SetGraph(AddNode(outer, "Loop", {"count", "", "zero"}, "inner_sum"), "body", inner);
  AddNode(outer, "Add", {"total_in", "inner_sum"}, "total_out");
  AddNode(outer, "Identity", {"cond"}, "cond_out");
  AddOutputs(outer, {"cond_out", "total_out"});
  SetGraph(AddNode(graph, "Loop", {"length", "", "zero"}, "total"), "body", outer);
  AddOutputs(graph, {"total"});
  vm::VirtualMachine machine = Compiled(ModelOf(graph));
  const std::vector<float> x{1.0f, -2.0f, 0.5f, 3.0f, 4.0f};
  for (int64_t n = 0; n <= 5; ++n) {
    const Tensor total =
        machine
            .Invoke("main",
                    {TensorNode::FromVector<float>({n}, DataType::Float32(),
                                                   std::vector<float>(x.begin(), x.begin() + n))})
            .as<TensorNode>();
    float expected = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j <= i; ++j) expected += x[j] * static_cast<float>(i);
    }
    EXPECT_FLOAT_EQ(total->data<float>()[0], expected) << "n = " << n;
  }
}

// An If whose condition is an initializer: the taken branch's nodes join the
// graph, and the other is not imported (its operator is one Nimble lacks).
TEST(OnnxControlFlow, AConditionKnownAtImportTimeImportsOnlyTheTakenBranch) {
  onnx::GraphProto graph;
  graph.set_name("known");
  AddInput(graph, "X", TensorProto::FLOAT, {-1});
  AddScalar(graph, "yes", TensorProto::BOOL, 1);
  onnx::GraphProto taken, other;
  AddNode(taken, "Relu", {"X"}, "relu");
  AddOutputs(taken, {"relu"});
  AddNode(other, "NonMaxSuppression", {"X"}, "boxes");
  AddOutputs(other, {"boxes"});
  onnx::NodeProto& branch = AddNode(graph, "If", {"yes"}, "Y");
  SetGraph(branch, "then_branch", taken);
  SetGraph(branch, "else_branch", other);
  AddOutputs(graph, {"Y"});
  const std::string text = text::PrintModule(ImportOnnx(ModelOf(graph).SerializeAsString(), "m"));
  EXPECT_THAT(text, HasSubstr("nn.relu(%X)"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("if (")));
}

// If(X > 0) of `then_graph` and `else_graph`, with outputs `outputs`.
onnx::GraphProto Branching(const onnx::GraphProto& then_graph, const onnx::GraphProto& else_graph,
                           const std::vector<std::string>& outputs = {"Y"}) {
  onnx::GraphProto graph;
  graph.set_name("branching");
  AddInput(graph, "X", TensorProto::FLOAT, {-1});
  AddScalar(graph, "zero", TensorProto::FLOAT, 0.0);
  SetInt(AddNode(graph, "ReduceSum", {"X"}, "sum"), "keepdims", 0);
  AddNode(graph, "Greater", {"sum", "zero"}, "positive");
  onnx::NodeProto& branch = AddNode(graph, "If", {"positive"}, outputs[0]);
  for (size_t k = 1; k < outputs.size(); ++k) branch.add_output(outputs[k]);
  SetGraph(branch, "then_branch", then_graph);
  SetGraph(branch, "else_branch", else_graph);
  AddOutputs(graph, outputs);
  return graph;
}

TEST(OnnxControlFlow, MalformedBranchesAreNamed) {
  onnx::GraphProto floats, ints, two;
  AddNode(floats, "Relu", {"X"}, "relu");
  AddOutputs(floats, {"relu"});
  onnx::NodeProto& cast = AddNode(ints, "Cast", {"X"}, "int");
  SetInt(cast, "to", TensorProto::INT64);
  AddOutputs(ints, {"int"});
  AddNode(two, "Relu", {"X"}, "a");
  AddNode(two, "Neg", {"X"}, "b");
  AddOutputs(two, {"a", "b"});
  EXPECT_THAT(ImportError(Branching(floats, ints)),
              ::testing::AllOf(HasSubstr("node Y (If)"), HasSubstr("different types"),
                               HasSubstr("float32"), HasSubstr("int64")));
  EXPECT_THAT(ImportError(Branching(floats, two)),
              HasSubstr("node Y (If): else_branch has 2 outputs; the node has 1"));
  onnx::GraphProto missing = Branching(floats, floats);
  missing.mutable_node(2)->mutable_attribute()->RemoveLast();
  EXPECT_THAT(ImportError(missing),
              HasSubstr("node Y (If): attribute 'else_branch' (a graph) is required"));
  onnx::GraphProto nowhere;
  AddNode(nowhere, "Relu", {"nowhere"}, "r");
  AddOutputs(nowhere, {"r"});
  EXPECT_THAT(ImportError(Branching(floats, nowhere)),
              HasSubstr("node Y (If): else_branch: node r (Relu) refers to 'nowhere', which no "
                        "input, initializer or node defines"));
  onnx::GraphProto undefined;
  AddOutputs(undefined, {"never"});
  EXPECT_THAT(ImportError(Branching(undefined, floats)),
              HasSubstr("node Y (If): then_branch output 'never' is never defined"));
}

TEST(OnnxControlFlow, MalformedLoopsAreNamed) {
  const auto with_body = [](const std::function<void(onnx::GraphProto&)>& edit) {
    onnx::GraphProto graph = SumAndScans();
    edit(*graph.mutable_node(2)->mutable_attribute(0)->mutable_g());
    return graph;
  };
  EXPECT_THAT(
      ImportError(with_body([](onnx::GraphProto& body) { body.mutable_input()->RemoveLast(); })),
      HasSubstr("node sum (Loop): the body takes 2 inputs; with 1 loop-carried values it "
                "takes 3"));
  EXPECT_THAT(ImportError(with_body(
                  [](onnx::GraphProto& body) { body.mutable_output()->DeleteSubrange(1, 3); })),
              HasSubstr("node sum (Loop): the body returns 1 outputs; with 1 loop-carried values "
                        "it returns at least 2"));
  EXPECT_THAT(ImportError(with_body([](onnx::GraphProto& body) {
                onnx::NodeProto& cast = AddNode(body, "Cast", {"sum_out"}, "sum_int");
                SetInt(cast, "to", TensorProto::INT64);
                body.mutable_output(1)->set_name("sum_int");
              })),
              HasSubstr("node sum (Loop): loop-carried value 0 is Tensor[(), float32] going into "
                        "the body and Tensor[(), int64] coming out of it"));
  EXPECT_THAT(
      ImportError(with_body([](onnx::GraphProto& body) { body.mutable_output(0)->set_name("x"); })),
      HasSubstr("node sum (Loop): the body's condition output must be bool"));
  onnx::GraphProto outputs = SumAndScans();
  outputs.mutable_node(2)->add_output("extra");
  EXPECT_THAT(ImportError(outputs),
              HasSubstr("node sum (Loop): the node has 4 outputs; its body gives 1 loop-carried "
                        "values and 2 scan outputs"));
}

}  // namespace
}  // namespace nimble::onnx_import
