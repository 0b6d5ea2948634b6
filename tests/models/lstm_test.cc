// The LSTM builder (models/lstm) and the weight handling every builder shares
// (models/model.cc): the program's type, the weights' names and shapes,
// seeded and loaded weights, the VM against the reference evaluator, and
// against PyTorch's own nn.LSTM on the same weights.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "models/lstm/lstm.h"
#include "nimble/compiler/ir/type.h"
#include "nimble/vm/npy.h"
#include "tests/error_of.h"
#include "tests/models/model_test_util.h"

namespace nimble::models {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// The paper's sizes, with `layers`.
LstmOptions FullSize(int layers) {
  LstmOptions options;
  options.layers = layers;
  return options;
}

// Small enough that every test stays fast.
LstmOptions Small(int layers) {
  LstmOptions options = FullSize(layers);
  options.input_size = 8;
  options.hidden_size = 6;
  return options;
}

// A (tokens, input) sequence of seeded values.
Tensor Sequence(int64_t tokens, int64_t input_size, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  std::iota(ids.begin(), ids.end(), 0);
  return SeededEmbeddings(ids, input_size, seed);
}

std::vector<float> Values(const Tensor& tensor) {
  return {tensor->data<float>(), tensor->data<float>() + tensor->numel()};
}

std::string MainType(const Model& model) {
  return ir::TypeToString(model.Module()->Lookup("main")->checked_type);
}

// ---- The program and its weights ----------------------------------------------

TEST(Lstm, ProgramTypeForEveryLayerCount) {
  for (int layers : {1, 2, 3, 8}) {
    EXPECT_EQ(MainType(BuildLstm(Small(layers))),
              "fn (Tensor[(?, 8), float32]) -> Tensor[(1, 6), float32]")
        << layers << " layers";
  }
}

TEST(Lstm, WeightSpecsFollowNnLstm) {
  const std::vector<WeightSpec> specs = LstmWeightSpecs(Small(2));
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const WeightSpec& spec : specs) {
    names.push_back(spec.name);
    shapes.push_back(spec.shape);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                      "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"}));
  EXPECT_EQ(shapes,
            (std::vector<Shape>{{24, 8}, {24, 6}, {24}, {24}, {24, 6}, {24, 6}, {24}, {24}}));
  const Model model = BuildLstm(Small(2));
  ASSERT_EQ(model.weights.size(), specs.size());
  for (const WeightSpec& spec : specs) {
    EXPECT_EQ(model.weights.at(spec.name)->shape(), spec.shape) << spec.name;
  }
}

TEST(Lstm, FullSizeShapes) {
  const Model model = BuildLstm(FullSize(2));
  EXPECT_EQ(MainType(model), "fn (Tensor[(?, 300), float32]) -> Tensor[(1, 512), float32]");
  EXPECT_EQ(model.weights.at("weight_ih_l0")->shape(), (Shape{2048, 300}));
  EXPECT_EQ(model.weights.at("weight_hh_l1")->shape(), (Shape{2048, 512}));
  EXPECT_EQ(model.weights.at("weight_ih_l1")->shape(), (Shape{2048, 512}));
  CompiledModel compiled(model.Module());
  EXPECT_EQ(compiled.Run({Sequence(3, 300, 1)})->shape(), (Shape{1, 512}));
}

TEST(Lstm, RejectsBadOptions) {
  EXPECT_THAT(ErrorOf([] { BuildLstm(Small(0)); }),
              HasSubstr("layers must be between 1 and 8, got 0"));
  EXPECT_THAT(ErrorOf([] { BuildLstm(Small(9)); }), HasSubstr("got 9"));
  LstmOptions no_hidden = Small(1);
  no_hidden.hidden_size = 0;
  EXPECT_THAT(ErrorOf([&] { BuildLstm(no_hidden); }), HasSubstr("hidden 0"));
}

// ---- Seeded weights and embeddings (models/model.cc) --------------------------

TEST(ModelWeights, SeededWeightsAreDeterministicPerName) {
  const std::vector<WeightSpec> one{{"a", {3, 4}}};
  const std::vector<WeightSpec> two{{"b", {5}}, {"a", {3, 4}}};
  const text::ParamMap first = SeededWeights(one, 7, 0.5);
  // Another weight beside it does not change it; another seed does.
  EXPECT_EQ(Values(first.at("a")), Values(SeededWeights(two, 7, 0.5).at("a")));
  EXPECT_NE(Values(first.at("a")), Values(SeededWeights(one, 8, 0.5).at("a")));
  for (float value : Values(first.at("a"))) {
    EXPECT_GE(value, -0.5f);
    EXPECT_LT(value, 0.5f);
  }
  EXPECT_EQ(first.at("a")->dtype(), DataType::Float32());
  // Our own generator, so these exact values hold on every platform.
  const std::vector<float> values = Values(first.at("a"));
  EXPECT_FLOAT_EQ(values[0], 0.101667941f);
  EXPECT_FLOAT_EQ(values[11], 0.229671061f);
}

TEST(ModelWeights, SameOptionsSameModel) {
  const Model a = BuildLstm(Small(2));
  const Model b = BuildLstm(Small(2));
  EXPECT_EQ(a.program, b.program);
  for (const auto& [name, tensor] : a.weights) {
    EXPECT_EQ(Values(tensor), Values(b.weights.at(name))) << name;
  }
  LstmOptions other_seed = Small(2);
  other_seed.seed = 2;
  EXPECT_NE(Values(a.weights.at("weight_hh_l0")),
            Values(BuildLstm(other_seed).weights.at("weight_hh_l0")));
}

TEST(ModelWeights, SeededEmbeddingsArePerId) {
  const Tensor pair = SeededEmbeddings({5, 7}, 4, 3);
  EXPECT_EQ(pair->shape(), (Shape{2, 4}));
  const Tensor seven = SeededEmbeddings({7}, 4, 3);
  EXPECT_EQ(Values(pair->SliceRows(1, 2)), Values(seven));
  EXPECT_NE(Values(pair->SliceRows(0, 1)), Values(seven));
  EXPECT_NE(Values(SeededEmbeddings({7}, 4, 4)), Values(seven));
  for (float value : Values(SeededEmbeddings({0, -1, 30521}, 300, 1))) {
    EXPECT_GE(value, -1.0f);
    EXPECT_LT(value, 1.0f);
  }
  EXPECT_EQ(SeededEmbeddings({}, 4, 1)->shape(), (Shape{0, 4}));
  EXPECT_THAT(ErrorOf([] { SeededEmbeddings({1}, 0, 1); }), HasSubstr("dimension"));
}

TEST(ModelWeights, SaveThenLoadGivesTheSameModel) {
  ScratchDir dir;
  const Model saved = BuildLstm(Small(2));
  SaveWeights(saved, dir.File("w.npz"));
  LstmOptions options = Small(2);
  options.weights_path = dir.File("w.npz");
  options.seed = 99;  // ignored: the file wins
  const Model loaded = BuildLstm(options);
  ASSERT_EQ(loaded.weights.size(), saved.weights.size());
  for (const auto& [name, tensor] : saved.weights) {
    EXPECT_EQ(Values(loaded.weights.at(name)), Values(tensor)) << name;
  }
}

TEST(ModelWeights, LoadErrorsNameFileWeightAndShapes) {
  ScratchDir dir;
  const std::vector<WeightSpec> specs{{"w", {2, 3}}, {"b", {2}}};
  const Tensor w = TensorNode::Empty({2, 3}, DataType::Float32());
  const Tensor b = TensorNode::Empty({2}, DataType::Float32());
  auto load = [&](const std::string& name, std::vector<std::pair<std::string, Tensor>> tensors) {
    const std::string path = dir.File(name);
    WriteNpz(path, tensors);
    return ErrorOf([&] { LoadWeights(path, specs); });
  };
  EXPECT_THAT(load("missing.npz", {{"w", w}}),
              AllOf(HasSubstr("missing.npz"), HasSubstr("missing weight 'b'"), HasSubstr("(2,)")));
  EXPECT_THAT(load("shape.npz", {{"w", TensorNode::Empty({3, 2}, DataType::Float32())}, {"b", b}}),
              AllOf(HasSubstr("shape.npz"), HasSubstr("'w' has shape (3, 2)"),
                    HasSubstr("expects (2, 3)")));
  EXPECT_THAT(load("dtype.npz", {{"w", w}, {"b", TensorNode::Empty({2}, DataType::Float64())}}),
              AllOf(HasSubstr("dtype.npz"), HasSubstr("'b' is Tensor[(2,), float64]"),
                    HasSubstr("expects float32")));
  EXPECT_THAT(load("extra.npz", {{"w", w}, {"b", b}, {"bias_hh_l9", b}}),
              AllOf(HasSubstr("extra.npz"), HasSubstr("unexpected tensor 'bias_hh_l9'")));
  EXPECT_THAT(ErrorOf([&] { LoadWeights(dir.File("absent.npz"), specs); }),
              HasSubstr("absent.npz"));
  EXPECT_NO_THROW(
      LoadWeights(dir.File("extra.npz"), {{"w", {2, 3}}, {"b", {2}}, {"bias_hh_l9", {2}}}));
}

// ---- Running it -----------------------------------------------------------------

TEST(Lstm, VmMatchesEvaluator) {
  for (int layers : {1, 2, 3}) {
    const ir::IRModule module = BuildLstm(Small(layers)).Module();
    CompiledModel compiled(module);
    for (int64_t tokens : {0, 1, 2, 7}) {
      const std::vector<Ref<Object>> args{Sequence(tokens, 8, tokens + 10)};
      ExpectAllClose(compiled.Run(args), Evaluate(module, args), kVmVsEvaluatorTolerance,
                     std::to_string(layers) + " layers, " + std::to_string(tokens) + " tokens");
    }
  }
}

// Products on cuBLAS, then generated.
TEST(Lstm, GpuMatchesEvaluator) {
  std::string missing;
  for (const char* kernels : {"auto", "generated"}) {
    for (int layers : {1, 2}) {
      const ir::IRModule module = BuildLstm(Small(layers)).Module();
      std::optional<vm::Executable> executable = CompileForGpu(module, "main", &missing, kernels);
      if (!executable) continue;
      CompiledModel compiled(std::move(*executable), "main");
      for (int64_t tokens : {0, 1, 7}) {
        const std::vector<Ref<Object>> args{Sequence(tokens, 8, tokens + 10)};
        ExpectAllClose(compiled.Run(args), Evaluate(module, args), kVmVsEvaluatorTolerance,
                       std::string(kernels) + " kernels, " + std::to_string(layers) + " layers, " +
                           std::to_string(tokens) + " tokens");
      }
    }
  }
  if (!missing.empty()) GTEST_SKIP() << missing;
}

// The same weights in torch.nn.LSTM itself give the same final hidden state.
TEST(Lstm, MatchesPyTorch) {
  if (!TorchAvailable())
    GTEST_SKIP() << kTorchPython << " has no torch (apt install python3-torch)";
  ScratchDir dir;
  struct Check {
    Model model;
    Tensor input;
    TorchCase files;
  };
  std::vector<Check> checks;
  for (const LstmOptions& options : {Small(1), Small(3), FullSize(2)}) {
    const Model model = BuildLstm(options);
    const std::string config =
        std::to_string(options.layers) + "x" + std::to_string(options.hidden_size);
    SaveWeights(model, dir.File(config + ".npz"));
    for (int64_t tokens : {1, 2, 7}) {
      const std::string run = config + "_" + std::to_string(tokens);
      Check check{
          model,
          Sequence(tokens, options.input_size, tokens),
          {dir.File(config + ".npz"), dir.File(run + ".npy"), dir.File(run + "_torch.npy")}};
      WriteNpy(check.files.input, check.input);
      checks.push_back(std::move(check));
    }
  }
  std::vector<TorchCase> cases;
  for (const Check& check : checks) cases.push_back(check.files);
  RunTorchReference("lstm", cases);
  for (const Check& check : checks) {
    CompiledModel compiled(check.model.Module());
    ExpectAllClose(compiled.Run({check.input}), ReadNpy(check.files.output), 1e-4,
                   check.files.input);
  }
}

}  // namespace
}  // namespace nimble::models
