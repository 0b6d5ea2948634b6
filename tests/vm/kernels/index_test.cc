// The indexing family's runtime half: each built-in kernel (through the
// kernel ABI, outputs from its shape function) against the reference kernel
// on random shapes with negative indices, the built-in kernels' error texts,
// and programs with `?` dims through the compiler and the VM at two sizes,
// where gather_elements and gather_nd fuse into generated kernels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/executable.h"
#include "nimble/vm/vm.h"
#include "tests/error_of.h"
#include "tests/vm/kernels/kernel_test_util.h"

namespace nimble::vm::testing {
namespace {

using ::testing::HasSubstr;

constexpr DataType kI32 = DataType::Int32();
constexpr DataType kI64 = DataType::Int64();
constexpr DataType kF32 = DataType::Float32();
constexpr DataType kF64 = DataType::Float64();

Attrs AttrsOf(std::vector<std::pair<std::string, ir::AttrValue>> entries) {
  Attrs attrs;
  for (auto& [name, value] : entries) attrs.Set(name, std::move(value));
  return attrs;
}

Shape RandomShape(std::mt19937& rng, size_t rank, int64_t max_dim = 5) {
  Shape shape(rank);
  for (int64_t& d : shape) d = std::uniform_int_distribution<int64_t>(1, max_dim)(rng);
  return shape;
}

// Indices in [-extent(k), extent(k)).
Tensor Indices(const Shape& shape, DataType dtype, std::mt19937& rng,
               const std::function<int64_t(int64_t)>& extent) {
  Tensor tensor = TensorNode::Empty(shape, dtype);
  for (int64_t k = 0; k < tensor->numel(); ++k) {
    const int64_t n = extent(k);
    tensor->SetFromDouble(
        k, static_cast<double>(std::uniform_int_distribution<int64_t>(-n, n - 1)(rng)));
  }
  return tensor;
}

Tensor I64(const Shape& shape, const std::vector<int64_t>& values) {
  return TensorNode::FromVector<int64_t>(shape, kI64, values);
}

std::string BuiltinError(const std::string& op, const Attrs& attrs,
                         const std::vector<Tensor>& inputs, const std::vector<Tensor>& like) {
  const nimble::op::OpDef* def = nimble::op::OpRegistry::Global().Find(op);
  return ErrorOf([&] { RunBuiltin(op, nimble::op::NormalizeAttrs(*def, attrs), inputs, like); });
}

TEST(IndexKernelsTest, RuntimeHalves) {
  ExpectRuntimeHalves({{"gather_elements", ShapeFuncMode::kDataIndependent},
                       {"gather_nd", ShapeFuncMode::kDataIndependent},
                       {"scatter_nd", ShapeFuncMode::kDataIndependent},
                       {"cumsum", ShapeFuncMode::kDataIndependent},
                       {"topk", ShapeFuncMode::kDataDependent}});
}

TEST(IndexKernelsTest, GatherElementsMatchesReference) {
  std::mt19937 rng(21);
  for (int trial = 0; trial < 30; ++trial) {
    const size_t rank = 1 + trial % 3;
    const Shape shape = RandomShape(rng, rank);
    const size_t axis = static_cast<size_t>(trial) % rank;
    Shape index_shape = shape;
    for (size_t d = 0; d < rank; ++d) {
      index_shape[d] =
          d == axis ? 1 + trial % 4 : std::uniform_int_distribution<int64_t>(1, shape[d])(rng);
    }
    const DataType dtype = std::vector<DataType>{kF32, kI64, DataType::Bool(), kF64}[trial % 4];
    ExpectBuiltinMatchesReference(
        "gather_elements",
        {RandomTensor(shape, dtype, rng),
         Indices(index_shape, trial % 2 ? kI32 : kI64, rng, [&](int64_t) { return shape[axis]; })},
        AttrsOf({{"axis", static_cast<int64_t>(axis)}}));
  }
  EXPECT_THAT(BuiltinError("gather_elements", AttrsOf({{"axis", int64_t{1}}}),
                           {RandomTensor({2, 3}, kF32, rng), I64({2, 1}, {0, -4})},
                           {TensorNode::Empty({2, 1}, kF32)}),
              HasSubstr("gather_elements: index -4 is out of range for axis 1 of data (2, 3), "
                        "of size 3"));
}

TEST(IndexKernelsTest, GatherNdMatchesReference) {
  std::mt19937 rng(22);
  for (int trial = 0; trial < 30; ++trial) {
    const size_t batch_dims = trial % 2;
    const size_t rank = batch_dims + 1 + trial % 3;
    const Shape shape = RandomShape(rng, rank);
    const int64_t depth =
        std::uniform_int_distribution<int64_t>(1, static_cast<int64_t>(rank - batch_dims))(rng);
    Shape index_shape(shape.begin(), shape.begin() + batch_dims);
    const Shape rows = RandomShape(rng, trial % 3, 4);
    index_shape.insert(index_shape.end(), rows.begin(), rows.end());
    index_shape.push_back(depth);
    ExpectBuiltinMatchesReference(
        "gather_nd",
        {RandomTensor(shape, trial % 3 ? kF32 : kI32, rng),
         Indices(index_shape, kI64, rng,
                 [&](int64_t k) { return shape[batch_dims + static_cast<size_t>(k % depth)]; })},
        AttrsOf({{"batch_dims", static_cast<int64_t>(batch_dims)}}));
  }
  EXPECT_THAT(BuiltinError("gather_nd", {}, {RandomTensor({2, 3}, kF32, rng), I64({1, 2}, {2, 0})},
                           {TensorNode::Empty({1}, kF32)}),
              HasSubstr("gather_nd: index 2 is out of range for axis 0 of data (2, 3), of size 2"));
  EXPECT_THAT(
      BuiltinError("gather_nd", {}, {RandomTensor({2, 3}, kF32, rng), I64({1, 3}, {0, 0, 0})},
                   {TensorNode::Empty({1}, kF32)}),
      HasSubstr("gather_nd: indices (1, 3) address 3 dims of data (2, 3)"));
}

TEST(IndexKernelsTest, ScatterNdEveryReductionMatchesReference) {
  std::mt19937 rng(23);
  for (const std::string reduction : {"none", "add", "mul", "max", "min"}) {
    for (int trial = 0; trial < 10; ++trial) {
      const size_t rank = 1 + trial % 3;
      const Shape shape = RandomShape(rng, rank);
      const int64_t depth =
          std::uniform_int_distribution<int64_t>(1, static_cast<int64_t>(rank))(rng);
      Shape index_shape = RandomShape(rng, trial % 2, 4);
      index_shape.push_back(depth);
      Shape update_shape(index_shape.begin(), index_shape.end() - 1);
      update_shape.insert(update_shape.end(), shape.begin() + depth, shape.end());
      const DataType dtype = std::vector<DataType>{kF32, kI64, kF64, kI32}[trial % 4];
      // Repeated rows apply in order in both kernels, so "none" compares too.
      ExpectBuiltinMatchesReference(
          "scatter_nd",
          {RandomTensor(shape, dtype, rng, -3, 3),
           Indices(index_shape, trial % 2 ? kI32 : kI64, rng,
                   [&](int64_t k) { return shape[static_cast<size_t>(k % depth)]; }),
           RandomTensor(update_shape, dtype, rng, -3, 3)},
          AttrsOf({{"reduction", reduction}}));
    }
  }
  EXPECT_THAT(
      BuiltinError("scatter_nd", {},
                   {RandomTensor({4}, kF32, rng), I64({1, 1}, {-5}), RandomTensor({1}, kF32, rng)},
                   {TensorNode::Empty({4}, kF32)}),
      HasSubstr("scatter_nd: index -5 is out of range for axis 0 of data (4,), of size 4"));
  EXPECT_THAT(BuiltinError(
                  "scatter_nd", {},
                  {RandomTensor({4}, kF32, rng), I64({2, 1}, {0, 1}), RandomTensor({3}, kF32, rng)},
                  {TensorNode::Empty({4}, kF32)}),
              HasSubstr("scatter_nd: updates (3,) must have the shape (2,)"));
}

TEST(IndexKernelsTest, CumsumMatchesReference) {
  std::mt19937 rng(24);
  for (int trial = 0; trial < 12; ++trial) {
    const Shape shape = RandomShape(rng, 1 + trial % 3, 6);
    const DataType dtype = std::vector<DataType>{kI32, kI64, kF32, kF64}[trial % 4];
    const Tensor data = RandomTensor(shape, dtype, rng, -10, 10);
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      for (bool exclusive : {false, true}) {
        for (bool reverse : {false, true}) {
          ExpectBuiltinMatchesReference("cumsum", {data},
                                        AttrsOf({{"axis", static_cast<int64_t>(axis) - 1},
                                                 {"exclusive", exclusive},
                                                 {"reverse", reverse}}));
        }
      }
    }
  }
}

TEST(IndexKernelsTest, TopKMatchesReferenceWithTies) {
  std::mt19937 rng(25);
  for (int trial = 0; trial < 30; ++trial) {
    const Shape shape = RandomShape(rng, 1 + trial % 3, 7);
    const size_t axis = static_cast<size_t>(trial) % shape.size();
    const int64_t k = std::uniform_int_distribution<int64_t>(0, shape[axis])(rng);
    const DataType dtype = std::vector<DataType>{kF32, kI64, kF64, kI32}[trial % 4];
    Tensor data = RandomTensor(shape, dtype, rng, -3, 3);
    if (dtype.is_float()) {
      for (int64_t i = 0; i < data->numel(); ++i) {
        data->SetFromDouble(i, std::floor(data->GetAsDouble(i)));  // ties
      }
    }
    ExpectBuiltinMatchesReference(
        "topk", {data, trial % 2 ? TensorNode::Scalar(kI64, k) : I64({1}, {k})},
        AttrsOf({{"axis", static_cast<int64_t>(axis)}, {"largest", trial % 3 != 0}}));
  }
  EXPECT_THAT(BuiltinError("topk", {}, {RandomTensor({2, 3}, kF32, rng), I64({}, {4})},
                           {TensorNode::Empty({2, 3}, kF32), TensorNode::Empty({2, 3}, kI64)}),
              HasSubstr("topk: k 4 is larger than axis 1 of data (2, 3), of size 3"));
}

// ---------------------------------------------------------------------------
// Through the compiler and the VM.

vm::Executable CompileText(const std::string& text, const std::string& kernels) {
  ir::IRModule module = text::ParseModule(text, "test.relay");
  typing::InferTypes(module);
  return backend::Compile(module, {.kernels = kernels});
}

std::vector<Tensor> RunMain(const vm::Executable& executable, const std::vector<Tensor>& args) {
  vm::VirtualMachine machine(executable);
  const Ref<Object> result =
      machine.Invoke("main", std::vector<Ref<Object>>(args.begin(), args.end()));
  return Flatten({result});
}

Tensor Reference(const std::string& op, const std::vector<Tensor>& args,
                 const std::vector<std::pair<std::string, ir::AttrValue>>& attrs,
                 size_t field = 0) {
  const nimble::op::OpDef* def = nimble::op::OpRegistry::Global().Find(op);
  const std::vector<Ref<Object>> values(args.begin(), args.end());
  return Flatten({nimble::op::InvokeOp(*def, values,
                                       nimble::op::NormalizeAttrs(*def, AttrsOf(attrs)))})[field];
}

Tensor AddScalar(const Tensor& x, double value) {
  Tensor out = TensorNode::Empty(x->shape(), x->dtype());
  for (int64_t i = 0; i < x->numel(); ++i) out->SetFromDouble(i, x->GetAsDouble(i) + value);
  return out;
}

constexpr const char* kGathers = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(?, 6), float32], %i: Tensor[(?, 3), int64], %j: Tensor[(?, 1), int64]) {
  let %a = add(%x, 1f);
  let %g = gather_elements(%a, %i, axis=1);
  let %n = gather_nd(%x, %j, batch_dims=1);
  (multiply(%g, 2f), %n)
}
)";

TEST(IndexKernelsTest, GathersFuseAndRunOnSymbolicRows) {
  const vm::Executable generated = CompileText(kGathers, "generated");
  const std::string table = vm::KernelTableToString(generated);
  EXPECT_THAT(table, HasSubstr("fuses add+gather_elements+multiply"));
  EXPECT_THAT(table, HasSubstr("] fused_gather_nd_"));
  const vm::Executable builtin = CompileText(kGathers, "builtin");
  std::mt19937 rng(26);
  for (int64_t rows : {2, 5}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    const Tensor x = RandomTensor({rows, 6}, kF32, rng);
    const Tensor i = Indices({rows, 3}, kI64, rng, [](int64_t) { return 6; });
    const Tensor j = Indices({rows, 1}, kI64, rng, [](int64_t) { return 6; });
    const Tensor a = AddScalar(x, 1);
    const Tensor g = Reference("gather_elements", {a, i}, {{"axis", int64_t{1}}});
    const Tensor n = Reference("gather_nd", {x, j}, {{"batch_dims", int64_t{1}}});
    for (const vm::Executable* executable : {&generated, &builtin}) {
      const std::vector<Tensor> out = RunMain(*executable, {x, i, j});
      ASSERT_EQ(out.size(), 2u);
      EXPECT_EQ(out[0]->shape(), (Shape{rows, 3}));
      for (int64_t e = 0; e < g->numel(); ++e) {
        EXPECT_FLOAT_EQ(out[0]->GetAsDouble(e), 2 * g->GetAsDouble(e)) << "element " << e;
      }
      EXPECT_EQ(Difference(out[1], n, {}), "");
    }
  }
  // Out-of-range indices fail the generated kernel (named after its ops) and
  // the built-in one (naming the index).
  const Tensor x = RandomTensor({2, 6}, kF32, rng);
  const Tensor bad = I64({2, 3}, {0, 1, 6, 0, 0, 0});
  const Tensor j = I64({2, 1}, {0, -6});
  EXPECT_THAT(ErrorOf([&] { RunMain(generated, {x, bad, j}); }), HasSubstr("gather_elements"));
  EXPECT_THAT(ErrorOf([&] {
                RunMain(generated, {x, bad, j});
              }),
              HasSubstr("an index is out of range"));
  EXPECT_THAT(ErrorOf([&] {
                RunMain(builtin, {x, bad, j});
              }),
              HasSubstr("gather_elements: index 6 is out of range for axis 1 of data (2, 6), "
                        "of size 6"));
}

constexpr const char* kOpaque = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(?, 8), float32], %j: Tensor[(?, 1), int64], %u: Tensor[(?, 8), float32]) {
  let %k = take(shape_of(%x, dtype="int64"), 0);
  let %t = topk(%x, %k, axis=1, largest=False);
  let %c = cumsum(%x, axis=0, exclusive=True, reverse=True);
  let %s = scatter_nd(%x, %j, %u, reduction="add");
  (%t.0, %t.1, %c, %s)
}
)";

TEST(IndexKernelsTest, TopKWithRunTimeKCumsumAndScatterOnSymbolicRows) {
  std::mt19937 rng(27);
  for (const std::string kernels : {"generated", "builtin"}) {
    const vm::Executable executable = CompileText(kOpaque, kernels);
    for (int64_t rows : {2, 5}) {
      SCOPED_TRACE(kernels + " rows " + std::to_string(rows));
      Tensor x = RandomTensor({rows, 8}, kF32, rng, -3, 3);
      for (int64_t e = 0; e < x->numel(); ++e) x->SetFromDouble(e, std::floor(x->GetAsDouble(e)));
      const Tensor j = Indices({rows, 1}, kI64, rng, [&](int64_t) { return rows; });
      const Tensor u = RandomTensor({rows, 8}, kF32, rng);
      const std::vector<Tensor> out = RunMain(executable, {x, j, u});
      ASSERT_EQ(out.size(), 4u);
      EXPECT_EQ(out[0]->shape(), (Shape{rows, rows}));  // k = the number of rows
      const std::vector<std::pair<std::string, ir::AttrValue>> topk_attrs = {{"axis", int64_t{1}},
                                                                             {"largest", false}};
      const Tensor k = TensorNode::Scalar(kI64, rows);
      EXPECT_EQ(Difference(out[0], Reference("topk", {x, k}, topk_attrs, 0), {}), "");
      EXPECT_EQ(Difference(out[1], Reference("topk", {x, k}, topk_attrs, 1), {}), "");
      EXPECT_EQ(
          Difference(out[2],
                     Reference("cumsum", {x},
                               {{"axis", int64_t{0}}, {"exclusive", true}, {"reverse", true}}),
                     {}),
          "");
      EXPECT_EQ(
          Difference(out[3],
                     Reference("scatter_nd", {x, j, u}, {{"reduction", std::string("add")}}), {}),
          "");
    }
  }
  // k past the axis: 9 rows for 8 columns.
  const vm::Executable executable = CompileText(kOpaque, "builtin");
  EXPECT_THAT(ErrorOf([&] {
                RunMain(executable,
                        {RandomTensor({9, 8}, kF32, rng), I64({9, 1}, std::vector<int64_t>(9, 0)),
                         RandomTensor({9, 8}, kF32, rng)});
              }),
              HasSubstr("topk: k 9 is larger than axis 1 of data (9, 8), of size 8"));
}

}  // namespace
}  // namespace nimble::vm::testing
