// ONNX import: models exported by PyTorch's exporter in the test itself
// (export_models.py: a two-layer BERT encoder with a dynamic sequence axis at
// opsets 14 and 17, the operators BERT-like graphs use, a Gemm, 1- and
// 2-layer nn.LSTM and nn.GRU over a dynamic sequence), run on the
// VM at several lengths and compared with PyTorch's outputs (and ONNX
// Runtime's, where it is installed); and malformed
// models (truncated, not a protobuf, a missing tensor, a cycle, an
// unsupported operator or opset) refused with errors that name the cause.
#include "nimble/compiler/onnx/onnx_import.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/text/printer.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/npy.h"
#include "nimble/vm/vm.h"
#include "tests/compiler/onnx/onnx_graph_builder.h"
#include "tests/error_of.h"

namespace nimble::onnx_import {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr const char* kPython = "/usr/bin/python3";

// The exported cases, made once for the suite (empty when PyTorch is missing).
class Exported {
 public:
  static const Exported& Get() {
    static const Exported exported;
    return exported;
  }
  const fs::path& dir() const { return dir_; }
  bool ok() const { return ok_; }
  const std::string& why_not() const { return why_not_; }
  // Whether NAME.L.ort.npz hold ONNX Runtime's outputs.
  bool with_onnxruntime() const { return with_onnxruntime_; }
  // NAME -> its sequence lengths.
  const std::map<std::string, std::vector<int>>& cases() const { return cases_; }

 private:
  Exported() {
    dir_ = fs::temp_directory_path() / ("nimble_onnx_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    if (std::system((std::string(kPython) + " -c 'import torch, onnx' 2>/dev/null").c_str()) != 0) {
      why_not_ =
          std::string(kPython) + " has no torch and onnx (apt install python3-torch python3-onnx)";
      return;
    }
    const std::string command = std::string(kPython) + " " + NIMBLE_SOURCE_DIR +
                                "/tests/compiler/onnx/export_models.py " + dir_.string() + " > " +
                                (dir_.string() + ".log") + " 2>&1";
    if (std::system(command.c_str()) != 0) {
      std::ifstream log(dir_.string() + ".log");
      std::stringstream text;
      text << log.rdbuf();
      why_not_ = "export_models.py failed: " + text.str();
      return;
    }
    std::ifstream list(dir_ / "cases.txt");
    for (std::string name, lengths; list >> name >> lengths;) {
      std::stringstream split(lengths);
      for (std::string length; std::getline(split, length, ',');) {
        cases_[name].push_back(std::stoi(length));
      }
    }
    ok_ = !cases_.empty();
    // ONNX Runtime's outputs too, from its scripts/install-peers.sh
    // environment where there is one (scripts/test.sh installs it), else
    // from the python3 on the PATH, where it has onnxruntime.
    const std::string ort =
        "p=\"${NIMBLE_PEERS_DIR:-$HOME/.local/share/nimble/peers}/onnxruntime/bin/python\"; "
        "[ -x \"$p\" ] || p=python3; \"$p\" " +
        std::string(NIMBLE_SOURCE_DIR) + "/tests/compiler/onnx/onnxruntime_outputs.py " +
        dir_.string() + " > /dev/null 2>&1";
    with_onnxruntime_ = ok_ && std::system(ort.c_str()) == 0;
  }
  ~Exported() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
    fs::remove(dir_.string() + ".log", ignored);
  }

  fs::path dir_;
  bool ok_ = false;
  bool with_onnxruntime_ = false;
  std::string why_not_;
  std::map<std::string, std::vector<int>> cases_;
};

void Flatten(const Ref<Object>& value, std::vector<Tensor>* out) {
  if (const ADT adt = value.as<ADTNode>()) {
    for (const Ref<Object>& field : adt->fields()) Flatten(field, out);
    return;
  }
  out->push_back(value.as<TensorNode>());
}

// Fails unless `actual` equals `expected` within 1e-4 relative.
void ExpectClose(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected,
                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    const std::string where = what + ", output " + std::to_string(i);
    ASSERT_EQ(actual[i]->shape(), expected[i]->shape()) << where;
    ASSERT_EQ(actual[i]->dtype(), expected[i]->dtype()) << where;
    for (int64_t k = 0; k < actual[i]->numel(); ++k) {
      const double a = LoadElementAsDouble(actual[i]->raw_data(), actual[i]->dtype(), k);
      const double e = LoadElementAsDouble(expected[i]->raw_data(), expected[i]->dtype(), k);
      ASSERT_LE(std::abs(a - e), 1e-4 * std::max(1.0, std::abs(e)))
          << where << ", element " << k << ": " << a << " vs " << e;
    }
  }
}

std::vector<Tensor> Outputs(const fs::path& npz) {
  std::vector<Tensor> outputs;
  for (auto& [key, tensor] : ReadNpz(npz.string())) {
    if (key.starts_with("out")) outputs.push_back(tensor);
  }
  return outputs;
}

// Runs `name` (imported with `import_options`) on the VM at each of its
// lengths against PyTorch's outputs (and ONNX Runtime's, where it is
// installed).
void ExpectMatchesPyTorch(const std::string& name, const ImportOptions& import_options = {}) {
  const Exported& exported = Exported::Get();
  if (!exported.ok()) GTEST_SKIP() << exported.why_not();
  ASSERT_TRUE(exported.cases().contains(name)) << name;
  const ir::IRModule module =
      ImportOnnxFile((exported.dir() / (name + ".onnx")).string(), import_options);
  backend::CompileOptions options;
  options.tuning_database.clear();
  vm::VirtualMachine machine(backend::Compile(module, options));
  for (int length : exported.cases().at(name)) {
    const std::string stem = name + "." + std::to_string(length);
    std::vector<Ref<Object>> inputs;
    for (auto& [key, tensor] : ReadNpz((exported.dir() / (stem + ".npz")).string())) {
      if (key.starts_with("in")) inputs.push_back(tensor);
    }
    std::vector<Tensor> actual;
    Flatten(machine.Invoke("main", inputs), &actual);
    ExpectClose(actual, Outputs(exported.dir() / (stem + ".npz")), stem + " against PyTorch");
    if (exported.with_onnxruntime()) {
      ExpectClose(actual, Outputs(exported.dir() / (stem + ".ort.npz")),
                  stem + " against ONNX Runtime");
    }
  }
}

TEST(OnnxImport, BertEncoderOpset14MatchesPyTorchAtEveryLength) {
  ExpectMatchesPyTorch("bert_opset14");
}

TEST(OnnxImport, BertEncoderOpset17MatchesPyTorchAtEveryLength) {
  ExpectMatchesPyTorch("bert_opset17");
}

TEST(OnnxImport, OperatorsMatchPyTorch) {
  ExpectMatchesPyTorch("ops");
}

TEST(OnnxImport, OperatorsOfOpset11MatchPyTorch) {
  ExpectMatchesPyTorch("ops_opset11");
}

TEST(OnnxImport, NormalizationPoolingAndIndexOperatorsMatchPyTorch) {
  ExpectMatchesPyTorch("nn_ops");
}

TEST(OnnxImport, EinsumContractionsMatchPyTorch) {
  ExpectMatchesPyTorch("einsum");
}

TEST(OnnxImport, ResizeNearestAndLinearMatchPyTorch) {
  ExpectMatchesPyTorch("resize");
}

TEST(OnnxImport, ATextCnnOverADynamicLengthMatchesPyTorch) {
  ExpectMatchesPyTorch("text_cnn");
}

TEST(OnnxImport, ConvolutionsTransposedConvolutionsAndPoolsMatchPyTorch) {
  ExpectMatchesPyTorch("images");
}

TEST(OnnxImport, TopKCumSumGatherAndScatterMatchPyTorch) {
  ExpectMatchesPyTorch("index");
  ExpectMatchesPyTorch("gather_nd");
}

// Opset 20's operators and a Scan, built with onnx.helper: against numpy's
// definitions and ONNX Runtime.
TEST(OnnxImport, OperatorsPyTorchDoesNotExportMatchTheirDefinitionsAndOnnxRuntime) {
  ExpectMatchesPyTorch("helper_ops");
}

TEST(OnnxImport, GemmWithADynamicBatchMatchesPyTorch) {
  ExpectMatchesPyTorch("linear");
}

TEST(OnnxImport, OneLayerLstmMatchesPyTorchAtEveryLength) {
  ExpectMatchesPyTorch("lstm1");
}

TEST(OnnxImport, TwoLayerLstmMatchesPyTorchAtEveryLength) {
  ExpectMatchesPyTorch("lstm2");
}

TEST(OnnxImport, GruLayersMatchPyTorchAtEveryLength) {
  ExpectMatchesPyTorch("gru1");
  ExpectMatchesPyTorch("gru2");
}

// TorchScript exports: Loop and If become a tail-recursive function and a
// Relay `if`.
TEST(OnnxImport, ALoopOverTheInputsLengthMatchesPyTorch) {
  ExpectMatchesPyTorch("loop_counted");
}

TEST(OnnxImport, ALoopWhoseTripCountDependsOnTheValuesMatchesPyTorch) {
  ExpectMatchesPyTorch("loop_while");
}

// A loop with an early break (an If in its body) whose output grows each
// step: the tokens are typed `?` and the steps taken differ by input.
TEST(OnnxImport, AGreedyDecoderWithAnEarlyBreakMatchesPyTorch) {
  ExpectMatchesPyTorch("greedy_decoder");
  const Exported& exported = Exported::Get();
  const std::string text = text::PrintModule(
      ImportOnnxFile((exported.dir() / "greedy_decoder.onnx").string()), {.show_types = true});
  EXPECT_THAT(text, HasSubstr("def @onnx_loop("));
  EXPECT_THAT(text, HasSubstr("%tokens_11: Tensor[(?,), int64]"));
}

TEST(OnnxImport, ABranchOnAReducedValueWithShapesThatDifferMatchesPyTorch) {
  ExpectMatchesPyTorch("branch");
  const Exported& exported = Exported::Get();
  const std::string text = text::PrintModule(
      ImportOnnxFile((exported.dir() / "branch.onnx").string()), {.show_types = true});
  EXPECT_THAT(text, HasSubstr("-> Tensor[(?, 2), float32]"));
  EXPECT_THAT(text, HasSubstr("if ("));
}

TEST(OnnxImport, BidirectionalLstmAndGruLayersMatchPyTorch) {
  ExpectMatchesPyTorch("lstm_bidirectional");
  ExpectMatchesPyTorch("gru_bidirectional");
}

// sequence_lens: each row of the batch stops at its own length, in both
// directions (PyTorch's packed sequences).
TEST(OnnxImport, RecurrentLayersWithSequenceLengthsMatchPyTorchsPackedSequences) {
  ExpectMatchesPyTorch("lstm_lengths");
  ExpectMatchesPyTorch("gru_lengths");
}

TEST(OnnxImport, TheSequenceAxisIsAnyAndShapesFoldWhereStatic) {
  const Exported& exported = Exported::Get();
  if (!exported.ok()) GTEST_SKIP() << exported.why_not();
  const ir::IRModule module = ImportOnnxFile((exported.dir() / "bert_opset14.onnx").string());
  const std::string text = text::PrintModule(module, {.show_types = true});
  EXPECT_THAT(text, HasSubstr("%in0: Tensor[(1, ?), int64]"));
  EXPECT_THAT(text, HasSubstr("-> (Tensor[(1, ?, 32), float32], Tensor[(1, 32), float32])"));
  // The heads' reshapes take the data's own sizes (`x.size()[:-1] + (4,
  // 8)`): static reshapes that copy the sequence axis, no run-time shape
  // tensors.
  EXPECT_THAT(text, ::testing::Not(HasSubstr("dyn.reshape")));
  EXPECT_THAT(text, HasSubstr("newshape=[1, 0, 4, 8]"));
}

// With the sequence bounded, the positions' `torch.arange(length)` keeps the
// bound too (a slice of the whole range, not a run-time range), so no
// dimension of the program is left unbounded.
TEST(OnnxImport, ABoundedSequenceReachesThroughThePositionsRange) {
  const Exported& exported = Exported::Get();
  if (!exported.ok()) GTEST_SKIP() << exported.why_not();
  const ImportOptions bounded{.dim_bounds = {{"sequence", 33}}};
  const ir::IRModule module =
      ImportOnnxFile((exported.dir() / "bert_opset14.onnx").string(), bounded);
  const std::string text = text::PrintModule(module, {.show_types = true});
  EXPECT_THAT(text, HasSubstr("%in0: Tensor[(1, ?<=33), int64]"));
  EXPECT_THAT(text, HasSubstr("-> (Tensor[(1, ?<=33, 32), float32], Tensor[(1, 32), float32])"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("arange")));
  EXPECT_THAT(text, ::testing::Not(::testing::ContainsRegex("\\?[^<]")));
  ExpectMatchesPyTorch("bert_opset14", bounded);
}

// Range(2, n, 3) over a dimension n <= 10, built here: the slice of the
// constant [2, 5, 8] that Range would give, at every n up to the bound.
TEST(OnnxImport, ARangeUpToABoundedSizeIsItsBoundsRangeSliced) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(14);
  onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name("range");
  onnx::ValueInfoProto& input = *graph.add_input();
  input.set_name("x");
  input.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  input.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("n");
  const auto scalar = [&](const std::string& name, int64_t value) {
    onnx::TensorProto& tensor = *graph.add_initializer();
    tensor.set_name(name);
    tensor.set_data_type(onnx::TensorProto::INT64);
    tensor.add_int64_data(value);
  };
  scalar("zero", 0);
  scalar("start", 2);
  scalar("step", 3);
  const auto node = [&](const std::string& op, std::vector<std::string> inputs,
                        const std::string& output) {
    onnx::NodeProto& added = *graph.add_node();
    added.set_op_type(op);
    added.set_name(output + "_node");
    for (const std::string& name : inputs) added.add_input(name);
    added.add_output(output);
  };
  node("Shape", {"x"}, "shape");
  node("Gather", {"shape", "zero"}, "n");
  node("Range", {"start", "n", "step"}, "range");
  graph.add_output()->set_name("range");
  const ir::IRModule module =
      ImportOnnx(model.SerializeAsString(), "range.onnx", {.dim_bounds = {{"n", 10}}});
  EXPECT_THAT(text::PrintModule(module, {.show_types = true}),
              HasSubstr("-> Tensor[(?<=3,), int64]"));
  backend::CompileOptions options;
  options.tuning_database.clear();
  vm::VirtualMachine machine(backend::Compile(module, options));
  for (int64_t n = 0; n <= 10; ++n) {
    const Tensor x = TensorNode::Empty({n}, DataType::Float32());
    const Tensor range = machine.Invoke("main", {x}).as<TensorNode>();
    std::vector<int64_t> expected;
    for (int64_t value = 2; value < n; value += 3) expected.push_back(value);
    ASSERT_EQ(range->shape(), Shape{static_cast<int64_t>(expected.size())}) << "n = " << n;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(LoadElementAsInt64(range->raw_data(), range->dtype(), static_cast<int64_t>(i)),
                expected[i])
          << "n = " << n;
    }
  }
}

TEST(OnnxImport, AnImportedProgramPrintsAndParsesBack) {
  const Exported& exported = Exported::Get();
  if (!exported.ok()) GTEST_SKIP() << exported.why_not();
  const ir::IRModule module = ImportOnnxFile((exported.dir() / "bert_opset17.onnx").string());
  text::ParamMap weights;
  const std::string text = text::PrintModule(module, {.constants_out = &weights});
  EXPECT_THAT(text, HasSubstr("meta[relay.Constant][words_weight]"));
  const ir::IRModule again = text::ParseModule(text, "imported.relay", &weights);
  typing::InferTypes(again);
  EXPECT_EQ(text::PrintModule(again), text::PrintModule(module));
}

// ---- malformed models ----

onnx::ModelProto LinearModel() {
  const Exported& exported = Exported::Get();
  std::ifstream file(exported.dir() / "linear.onnx", std::ios::binary);
  onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromIstream(&file));
  return model;
}

std::string ImportError(const onnx::ModelProto& model) {
  return ErrorOf([&] { ImportOnnx(model.SerializeAsString(), "model.onnx"); });
}

TEST(OnnxImport, TruncatedAndForeignFilesAreRefused) {
  const Exported& exported = Exported::Get();
  if (!exported.ok()) GTEST_SKIP() << exported.why_not();
  const std::string bytes = LinearModel().SerializeAsString();
  EXPECT_THAT(ErrorOf([&] { ImportOnnx(bytes.substr(0, bytes.size() / 2), "half.onnx"); }),
              HasSubstr("half.onnx: not an ONNX model"));
  EXPECT_THAT(ErrorOf([&] { ImportOnnx("def @main() { 0 }", "text.onnx"); }),
              HasSubstr("text.onnx: not an ONNX model"));
  EXPECT_THAT(ErrorOf([&] { ImportOnnxFile("/nonexistent/model.onnx"); }),
              HasSubstr("/nonexistent/model.onnx: cannot open it"));
}

TEST(OnnxImport, AMissingTensorAndACycleAreNamed) {
  const Exported& exported = Exported::Get();
  if (!exported.ok()) GTEST_SKIP() << exported.why_not();
  onnx::ModelProto missing = LinearModel();
  missing.mutable_graph()->mutable_node(0)->set_input(0, "nowhere");
  EXPECT_THAT(ImportError(missing), HasSubstr("refers to 'nowhere', which no input, initializer "
                                              "or node defines"));
  onnx::ModelProto cycle = LinearModel();
  onnx::GraphProto& graph = *cycle.mutable_graph();
  ASSERT_GE(graph.node_size(), 2);
  graph.mutable_node(0)->set_input(0, graph.node(graph.node_size() - 1).output(0));
  EXPECT_THAT(ImportError(cycle), HasSubstr("the graph has a cycle through node"));
}

TEST(OnnxImport, UnsupportedOperatorsAttributesAndOpsetsAreNamed) {
  const Exported& exported = Exported::Get();
  if (!exported.ok()) GTEST_SKIP() << exported.why_not();
  onnx::ModelProto op = LinearModel();
  onnx::NodeProto& node = *op.mutable_graph()->mutable_node(0);
  const std::string name = node.name();
  node.set_op_type("NonMaxSuppression");
  EXPECT_THAT(ImportError(op), HasSubstr("node " + name +
                                         " (NonMaxSuppression): operator NonMaxSuppression "
                                         "is not supported"));
  onnx::ModelProto attribute = LinearModel();
  onnx::AttributeProto* extra = attribute.mutable_graph()->mutable_node(0)->add_attribute();
  extra->set_name("fancy");
  extra->set_type(onnx::AttributeProto::INT);
  extra->set_i(1);
  EXPECT_THAT(ImportError(attribute), HasSubstr("attribute 'fancy' is not supported"));
  onnx::ModelProto opset = LinearModel();
  opset.mutable_opset_import(0)->set_version(22);
  EXPECT_THAT(ImportError(opset), HasSubstr("opset 22 is not supported (11 to 21)"));
}

// A model of X (2, 4) float32 at `opset`, without nodes or outputs yet.
onnx::ModelProto ModelOfX(int64_t opset) {
  onnx::ModelProto model;
  model.set_ir_version(7);
  onnx::OperatorSetIdProto* import = model.add_opset_import();
  import->set_domain("");
  import->set_version(opset);
  onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name("chain");
  onnx::ValueInfoProto& input = *graph.add_input();
  input.set_name("X");
  onnx::TypeProto::Tensor& type = *input.mutable_type()->mutable_tensor_type();
  type.set_elem_type(onnx::TensorProto::FLOAT);
  type.mutable_shape()->add_dim()->set_dim_value(2);
  type.mutable_shape()->add_dim()->set_dim_value(4);
  return model;
}

// X through a chain of `length` unnamed Relu nodes to Y, at opset 13.
onnx::ModelProto ReluChain(int length) {
  onnx::ModelProto model = ModelOfX(13);
  onnx::GraphProto& graph = *model.mutable_graph();
  for (int i = 0; i < length; ++i) {
    onnx::NodeProto& node = *graph.add_node();
    node.set_op_type("Relu");
    node.add_input(i == 0 ? "X" : "t" + std::to_string(i - 1));
    node.add_output(i + 1 == length ? "Y" : "t" + std::to_string(i));
  }
  graph.add_output()->set_name("Y");
  return model;
}

// Each node's type is inferred over what the node adds, so that a long graph
// imports in time linear in its nodes: 20,000 chained nodes take a quarter of
// a second (inferring each node's whole expression, 4,000 took 9.6 s).
TEST(OnnxImport, ALongChainOfNodesImports) {
  constexpr int kNodes = 20000;
  const ir::IRModule module = ImportOnnx(ReluChain(kNodes).SerializeAsString(), "chain.onnx");
  const std::string text = text::PrintModule(module);
  size_t relus = 0;
  for (size_t at = text.find("nn.relu("); at != std::string::npos;
       at = text.find("nn.relu(", at + 1)) {
    ++relus;
  }
  EXPECT_EQ(relus, static_cast<size_t>(kNodes));
  typing::InferTypes(module);
  EXPECT_EQ(ir::TypeToString(module->Lookup("main")->body->checked_type),
            "Tensor[(2, 4), float32]");
}

// A converter's error names an unnamed node by its index.
TEST(OnnxImport, AnUnnamedNodeIsNamedByItsIndex) {
  onnx::ModelProto model = ReluChain(3);
  onnx::AttributeProto& extra = *model.mutable_graph()->mutable_node(1)->add_attribute();
  extra.set_name("fancy");
  extra.set_type(onnx::AttributeProto::INT);
  EXPECT_THAT(ImportError(model), HasSubstr("node #1 (Relu): attribute 'fancy' is not supported"));
}

// ---- the element-wise operators, on a graph built here ----

// Each of the ONNX element-wise operators of issue 49 on X, compiled
// (fused, generated kernels) and run on the VM, against numpy's definitions
// computed here.
TEST(OnnxImport, ElementwiseOperatorsMatchTheirDefinitions) {
  onnx::ModelProto model = ModelOfX(13);
  onnx::GraphProto& graph = *model.mutable_graph();
  AddScalar(graph, "lo", onnx::TensorProto::FLOAT, -1.0);
  AddScalar(graph, "hi", onnx::TensorProto::FLOAT, 2.0);
  AddScalar(graph, "d", onnx::TensorProto::FLOAT, 1.5);
  AddScalar(graph, "k", onnx::TensorProto::INT32, -3);
  AddScalar(graph, "zero", onnx::TensorProto::FLOAT, 0.0);
  for (const std::string op : {"Sign", "Floor", "Ceil", "Round", "Softplus", "IsNaN"}) {
    AddNode(graph, op, {"X"}, op);
  }
  SetFloat(AddNode(graph, "LeakyRelu", {"X"}, "LeakyRelu"), "alpha", 0.1f);
  SetFloat(AddNode(graph, "Elu", {"X"}, "Elu"), "alpha", 0.5f);
  onnx::NodeProto& hard = AddNode(graph, "HardSigmoid", {"X"}, "HardSigmoid");
  SetFloat(hard, "alpha", 0.25f);
  SetFloat(hard, "beta", 0.4f);
  AddNode(graph, "Clip", {"X", "lo", "hi"}, "Clip");
  AddNode(graph, "Clip", {"X", "", "hi"}, "ClipMax");
  SetInt(AddNode(graph, "Mod", {"X", "d"}, "Fmod"), "fmod", 1);
  SetInt(AddNode(graph, "Cast", {"X"}, "Xi"), "to", onnx::TensorProto::INT32);
  AddNode(graph, "Mod", {"Xi", "k"}, "Mod");
  AddNode(graph, "Greater", {"X", "zero"}, "positive");
  AddNode(graph, "Less", {"X", "hi"}, "small");
  AddNode(graph, "Xor", {"positive", "small"}, "Xor");
  const std::vector<std::string> outputs = {
      "Sign", "Floor",       "Ceil", "Round",   "Softplus", "IsNaN", "LeakyRelu",
      "Elu",  "HardSigmoid", "Clip", "ClipMax", "Fmod",     "Mod",   "Xor"};
  for (const std::string& output : outputs) graph.add_output()->set_name(output);

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> x = {-2.5, -1.5, -0.5, 0.5, 2.5, 7.25, -4.0, nan};
  backend::CompileOptions options;
  options.tuning_database.clear();
  vm::VirtualMachine machine(
      backend::Compile(ImportOnnx(model.SerializeAsString(), "elementwise.onnx"), options));
  std::vector<Tensor> actual;
  Flatten(machine.Invoke("main", {TensorNode::FromVector<double>({2, 4}, DataType::Float32(), x)}),
          &actual);
  ASSERT_EQ(actual.size(), outputs.size());

  const auto floor_mod = [](int64_t a, int64_t b) {
    const int64_t r = a % b;
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
  };
  const std::map<std::string, std::function<double(double)>> expected = {
      {"Sign", [](double v) { return std::isnan(v) ? v : (v > 0) - (v < 0); }},
      {"Floor", [](double v) { return std::floor(v); }},
      {"Ceil", [](double v) { return std::ceil(v); }},
      {"Round", [](double v) { return std::nearbyint(v); }},  // halves to even
      {"Softplus", [](double v) { return std::log1p(std::exp(v)); }},
      {"IsNaN", [](double v) { return std::isnan(v) ? 1.0 : 0.0; }},
      {"LeakyRelu", [](double v) { return v < 0 ? 0.1 * v : v; }},
      {"Elu", [](double v) { return v < 0 ? 0.5 * std::expm1(v) : v; }},
      {"HardSigmoid", [](double v) { return std::clamp(0.25 * v + 0.4, 0.0, 1.0); }},
      {"Clip", [](double v) { return std::isnan(v) ? v : std::clamp(v, -1.0, 2.0); }},
      {"ClipMax", [](double v) { return std::isnan(v) ? v : std::min(v, 2.0); }},
      {"Fmod", [](double v) { return std::fmod(v, 1.5); }},
      // Cast to int32 truncates (NaN is 0); the remainder takes -3's sign.
      {"Mod",
       [&](double v) {
         return static_cast<double>(floor_mod(std::isnan(v) ? 0 : static_cast<int64_t>(v), -3));
       }},
      {"Xor", [](double v) { return (v > 0) != (v < 2) ? 1.0 : 0.0; }},
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string& name = outputs[i];
    ASSERT_EQ(actual[i]->shape(), Shape({2, 4})) << name;
    for (int64_t k = 0; k < 8; ++k) {
      const double got = actual[i]->GetAsDouble(k);
      const double want = expected.at(name)(x[k]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << name << " element " << k << ": " << got;
      } else {
        EXPECT_NEAR(got, want, 1e-6 * std::max(1.0, std::abs(want)))
            << name << " element " << k << " (x = " << x[k] << ")";
      }
    }
  }
  EXPECT_EQ(actual[5]->dtype(), DataType::Bool());    // IsNaN
  EXPECT_EQ(actual[12]->dtype(), DataType::Int32());  // Mod of integers
}

// Opset 20's Gelu (erf and tanh), opset 18's reductions with axes as an
// input and Split into num_outputs (uneven: the last part smaller), and
// Size, on X (2, 4), against their definitions.
TEST(OnnxImport, OperatorsOfOpsets18To20MatchTheirDefinitions) {
  onnx::ModelProto model = ModelOfX(20);
  onnx::GraphProto& graph = *model.mutable_graph();
  onnx::TensorProto& axes = *graph.add_initializer();
  axes.set_name("last");
  axes.set_data_type(onnx::TensorProto::INT64);
  axes.add_dims(1);
  axes.add_int64_data(-1);
  AddNode(graph, "Gelu", {"X"}, "Gelu");
  onnx::NodeProto& tanh = AddNode(graph, "Gelu", {"X"}, "GeluTanh");
  onnx::AttributeProto& approximate = *tanh.add_attribute();
  approximate.set_name("approximate");
  approximate.set_type(onnx::AttributeProto::STRING);
  approximate.set_s("tanh");
  SetInt(AddNode(graph, "ReduceL2", {"X", "last"}, "ReduceL2"), "keepdims", 0);
  SetInt(AddNode(graph, "ReduceSumSquare", {"X", "last"}, "ReduceSumSquare"), "keepdims", 0);
  SetInt(AddNode(graph, "ReduceLogSumExp", {"X", "last"}, "ReduceLogSumExp"), "keepdims", 0);
  AddNode(graph, "Size", {"X"}, "Size");
  onnx::NodeProto& split = AddNode(graph, "Split", {"X"}, "Split0");
  split.add_output("Split1");
  split.add_output("Split2");
  SetInt(split, "axis", 1);
  SetInt(split, "num_outputs", 3);
  for (const std::string output : {"Gelu", "GeluTanh", "ReduceL2", "ReduceSumSquare",
                                   "ReduceLogSumExp", "Size", "Split0", "Split1", "Split2"}) {
    graph.add_output()->set_name(output);
  }
  const std::vector<double> x = {-2.5, -1.5, -0.5, 0.5, 2.5, 7.25, -4.0, 30.0};
  backend::CompileOptions options;
  options.tuning_database.clear();
  vm::VirtualMachine machine(
      backend::Compile(ImportOnnx(model.SerializeAsString(), "opset20.onnx"), options));
  std::vector<Tensor> actual;
  Flatten(machine.Invoke("main", {TensorNode::FromVector<double>({2, 4}, DataType::Float32(), x)}),
          &actual);
  ASSERT_EQ(actual.size(), 9u);
  const auto near = [](double got, double want, const std::string& what) {
    EXPECT_NEAR(got, want, 1e-5 * std::max(1.0, std::abs(want))) << what;
  };
  for (int64_t k = 0; k < 8; ++k) {
    const double v = x[k];
    near(actual[0]->GetAsDouble(k), 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), "Gelu");
    near(actual[1]->GetAsDouble(k),
         0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))), "Gelu tanh");
  }
  for (int64_t row = 0; row < 2; ++row) {
    double squares = 0, exps = 0;
    for (int64_t k = 0; k < 4; ++k) {
      squares += x[4 * row + k] * x[4 * row + k];
      exps += std::exp(x[4 * row + k]);
    }
    near(actual[2]->GetAsDouble(row), std::sqrt(squares), "ReduceL2");
    near(actual[3]->GetAsDouble(row), squares, "ReduceSumSquare");
    near(actual[4]->GetAsDouble(row), std::log(exps), "ReduceLogSumExp");
  }
  EXPECT_EQ(actual[5]->dtype(), DataType::Int64());
  EXPECT_EQ(actual[5]->GetAsDouble(0), 8);
  EXPECT_EQ(actual[6]->shape(), Shape({2, 2}));
  EXPECT_EQ(actual[7]->shape(), Shape({2, 2}));
  EXPECT_EQ(actual[8]->shape(), Shape({2, 0}));
  EXPECT_EQ(actual[7]->GetAsDouble(0), x[2]);
}

// A Clip bound computed at run time, a float Mod with fmod=0 and a Clip
// with opset 6's attributes are refused, naming the node.
TEST(OnnxImport, ElementwiseOperatorsRefuseWhatTheyCannotDo) {
  onnx::ModelProto clip = ModelOfX(13);
  AddNode(*clip.mutable_graph(), "ReduceMax", {"X"}, "m");
  AddNode(*clip.mutable_graph(), "Clip", {"X", "m"}, "Y");
  clip.mutable_graph()->add_output()->set_name("Y");
  EXPECT_THAT(ImportError(clip),
              HasSubstr("node Y (Clip): min (input 1) must be known at import time"));

  onnx::ModelProto mod = ModelOfX(13);
  AddNode(*mod.mutable_graph(), "Mod", {"X", "X"}, "Y");
  mod.mutable_graph()->add_output()->set_name("Y");
  EXPECT_THAT(ImportError(mod), HasSubstr("node Y (Mod): fmod=0 is not defined for "
                                          "floating-point inputs (the spec requires fmod=1)"));

  onnx::ModelProto attrs = ModelOfX(11);
  SetFloat(AddNode(*attrs.mutable_graph(), "Clip", {"X"}, "Y"), "min", 0.0f);
  attrs.mutable_graph()->add_output()->set_name("Y");
  EXPECT_THAT(ImportError(attrs), HasSubstr("node Y (Clip): attribute 'min' is not supported"));
}

// Split's sizes are its attribute at opset 11 and its input from opset 13,
// where the attribute is refused rather than ignored (it split X in halves).
TEST(OnnxImport, SplitTakesItsSizesWhereItsOpsetHasThem) {
  for (const int64_t opset : {11, 13}) {
    onnx::ModelProto model = ModelOfX(opset);
    onnx::NodeProto& node = *model.mutable_graph()->add_node();
    node.set_op_type("Split");
    node.add_input("X");
    node.add_output("A");
    node.add_output("B");
    onnx::AttributeProto& axis = *node.add_attribute();
    axis.set_name("axis");
    axis.set_type(onnx::AttributeProto::INT);
    axis.set_i(1);
    onnx::AttributeProto& split = *node.add_attribute();
    split.set_name("split");
    split.set_type(onnx::AttributeProto::INTS);
    split.add_ints(1);
    split.add_ints(3);
    model.mutable_graph()->add_output()->set_name("A");
    model.mutable_graph()->add_output()->set_name("B");
    if (opset == 13) {
      EXPECT_THAT(ImportError(model),
                  HasSubstr("node #0 (Split): the sizes are input 1 from opset 13, not the "
                            "attribute 'split' (opset 13)"));
      continue;
    }
    const ir::IRModule module = ImportOnnx(model.SerializeAsString(), "split.onnx");
    typing::InferTypes(module);
    EXPECT_EQ(ir::TypeToString(module->Lookup("main")->body->checked_type),
              "(Tensor[(2, 1), float32], Tensor[(2, 3), float32])");
  }
}

// An int64 initializer named `name` holding `values`, of shape (values.size()).
void AddInt64Initializer(onnx::GraphProto& graph, const std::string& name,
                         const std::vector<int64_t>& values) {
  onnx::TensorProto& tensor = *graph.add_initializer();
  tensor.set_name(name);
  tensor.set_data_type(onnx::TensorProto::INT64);
  tensor.add_dims(static_cast<int64_t>(values.size()));
  for (int64_t value : values) tensor.add_int64_data(value);
}

// ConstantOfShape of (1, 1, 2^62): its float32 bytes wrap past 2^64 (to 0),
// and a fill of them overran a tiny buffer (SIGSEGV). As a GRU's initial
// state it is folded at import (the fuzzer's case: PyTorch's export with its
// hidden size made 2^62); as an output, too large to fold, it is refused
// where it is compiled.
TEST(OnnxImport, AConstantWhoseBytesOverflowIsAnError) {
  const std::string overflow = "storage for shape (1, 1, 4611686018427387904) of float32 overflows";
  const Exported& exported = Exported::Get();
  if (exported.ok()) {
    onnx::ModelProto gru;
    std::ifstream file(exported.dir() / "gru1.onnx", std::ios::binary);
    ASSERT_TRUE(gru.ParseFromIstream(&file));
    int hidden_sizes = 0;
    for (onnx::NodeProto& node : *gru.mutable_graph()->mutable_node()) {
      if (node.output(0) != "/rnn/Constant_2_output_0") continue;
      onnx::TensorProto& value = *node.mutable_attribute(0)->mutable_t();
      value.clear_raw_data();
      value.add_int64_data(int64_t{1} << 62);
      ++hidden_sizes;
    }
    ASSERT_EQ(hidden_sizes, 1);
    EXPECT_THAT(ImportError(gru), HasSubstr("node /rnn/GRU (GRU): " + overflow));
  }
  onnx::ModelProto model = ModelOfX(13);
  onnx::GraphProto& graph = *model.mutable_graph();
  AddInt64Initializer(graph, "shape", {1, 1, int64_t{1} << 62});
  onnx::NodeProto& node = *graph.add_node();
  node.set_op_type("ConstantOfShape");
  node.add_input("shape");
  node.add_output("Y");
  graph.add_output()->set_name("Y");
  const ir::IRModule module = ImportOnnx(model.SerializeAsString(), "model.onnx");
  backend::CompileOptions options;
  options.tuning_database.clear();
  EXPECT_THAT(ErrorOf([&] { backend::Compile(module, options); }), HasSubstr(overflow));
}

// A small result of a large value is not folded, since folding would
// compute the large one first: the sum of a ConstantOfShape of 2^31 floats
// (left to run time for its size) allocated and filled 8 GiB at import.
TEST(OnnxImport, ASmallResultOfALargeValueIsLeftToRunTime) {
  onnx::ModelProto model = ModelOfX(13);
  onnx::GraphProto& graph = *model.mutable_graph();
  AddInt64Initializer(graph, "shape", {int64_t{1} << 31});
  onnx::NodeProto& fill = *graph.add_node();
  fill.set_op_type("ConstantOfShape");
  fill.add_input("shape");
  fill.add_output("C");
  onnx::NodeProto& sum = *graph.add_node();
  sum.set_op_type("ReduceSum");
  sum.add_input("C");
  sum.add_output("Y");
  graph.add_output()->set_name("Y");
  const ir::IRModule module = ImportOnnx(model.SerializeAsString(), "model.onnx");
  const ir::Expr& body = module->Lookup("main")->body;
  EXPECT_NE(body->kind, ir::ExprKind::kConstant) << text::PrintModule(module);
  EXPECT_THAT(text::PrintModule(module), HasSubstr("sum("));
}

// Errors name the file: an initializer's too, and a node without an
// operator type says so (it printed "operator  is not supported").
TEST(OnnxImport, InitializerAndOperatorTypeErrorsNameTheFile) {
  onnx::ModelProto initializer = ReluChain(1);
  onnx::TensorProto& weight = *initializer.mutable_graph()->add_initializer();
  weight.set_name("W");
  weight.set_data_type(onnx::TensorProto::FLOAT);
  weight.add_dims(-3);
  EXPECT_EQ(ImportError(initializer), "model.onnx: initializer 'W': bad dimension -3");
  onnx::ModelProto untyped = ReluChain(2);
  untyped.mutable_graph()->mutable_node(1)->clear_op_type();
  EXPECT_EQ(ImportError(untyped), "model.onnx: node #1 has no operator type");
}

}  // namespace
}  // namespace nimble::onnx_import
