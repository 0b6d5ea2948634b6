// Tests of the BERT builder: the program's types with a dynamic and a static
// sequence length, the weights it declares, its option checks; the VM's
// logits against the reference evaluator's on several lengths, and against
// an independent PyTorch BERT (tests/models/torch_reference.py) given the
// same weights, on a tiny configuration and once at BERT-base size.
#include "models/bert/bert.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "nimble/compiler/ir/type.h"
#include "nimble/vm/npy.h"
#include "tests/error_of.h"
#include "tests/models/model_test_util.h"
#include "tests/opcode_count.h"

namespace nimble::models {
namespace {

using ::testing::HasSubstr;

// Small enough for the reference evaluator; two heads of 8, so attention
// really is split into heads.
BertOptions Tiny() {
  BertOptions options;
  options.vocab_size = 50;
  options.hidden_size = 16;
  options.layers = 2;
  options.heads = 2;
  options.ffn_size = 32;
  options.max_positions = 32;
  return options;
}

bool IsLayerNormGamma(const std::string& name) {
  return name == "ln.weight" || name.ends_with(".ln1.weight") || name.ends_with(".ln2.weight");
}

// The tiny model with its weights (all but the layer-norm gammas) ten times
// BERT's scale. At BERT's own scale a 16-wide model barely mixes tokens (the
// residuals carry almost everything), so a wrong attention layout would hide
// within the tolerances; here every token moves the logits.
Model TinySharpened() {
  Model model = BuildBert(Tiny());
  for (auto& [name, tensor] : model.weights) {
    if (IsLayerNormGamma(name)) continue;
    float* values = tensor->data<float>();
    for (int64_t i = 0; i < tensor->numel(); ++i) values[i] *= 10;
  }
  return model;
}

Tensor Ids(const std::vector<int32_t>& values) {
  return TensorNode::FromVector<int32_t>({1, static_cast<int64_t>(values.size())},
                                         DataType::Int32(), values);
}

// A sentence pair of `length` tokens: ids spread over the vocabulary, token
// type 0 for the first half and 1 for the rest.
std::vector<Ref<Object>> SentencePair(int64_t length, int64_t vocab_size) {
  std::vector<int32_t> ids;
  std::vector<int32_t> token_types;
  for (int64_t i = 0; i < length; ++i) {
    ids.push_back(static_cast<int32_t>((7 * i + 3) % vocab_size));
    token_types.push_back(2 * i < length ? 0 : 1);
  }
  return {Ids(ids), Ids(token_types)};
}

std::string MainType(const Model& model) {
  return ir::TypeToString(model.Module()->Lookup("main")->checked_type);
}

// The length is bounded by the position table unless asked otherwise.
TEST(BertTest, DynamicProgramTakesAnyLengthUpToThePositions) {
  const Model model = BuildBert(Tiny());
  EXPECT_EQ(model.name, "bert");
  EXPECT_EQ(MainType(model),
            "fn (Tensor[(1, ?<=32), int32], Tensor[(1, ?<=32), int32]) -> Tensor[(1, 2), float32]");
  BertOptions unbounded = Tiny();
  unbounded.bounded_length = false;
  EXPECT_EQ(MainType(BuildBert(unbounded)),
            "fn (Tensor[(1, ?), int32], Tensor[(1, ?), int32]) -> Tensor[(1, 2), float32]");
}

// With the bound, every intermediate lives in one region of the bound's
// size: two storage allocations per inference (the region and the
// result), whatever the length; the same logits as without the bound.
TEST(BertTest, TheBoundedProgramAllocatesOnce) {
  BertOptions unbounded_options = Tiny();
  unbounded_options.bounded_length = false;
  const Model bounded = BuildBert(Tiny());
  const Model unbounded = BuildBert(unbounded_options);
  const auto storage_allocations = [](const vm::Executable& executable) {
    return OpcodeCount(executable, "main", vm::Opcode::kAllocStorage);
  };
  const vm::Executable bounded_executable =
      backend::Compile(bounded.Module(), {.kernels = "builtin"});
  const vm::Executable unbounded_executable =
      backend::Compile(unbounded.Module(), {.kernels = "builtin"});
  EXPECT_EQ(storage_allocations(bounded_executable), 2);
  EXPECT_GT(storage_allocations(unbounded_executable), 20);
  vm::VirtualMachine bounded_vm(bounded_executable);
  vm::VirtualMachine unbounded_vm(unbounded_executable);
  for (int64_t length : {1, 7, 32}) {
    const std::vector<Ref<Object>> pair = SentencePair(length, Tiny().vocab_size);
    const Tensor want = TensorResult(unbounded_vm.Invoke("main", pair));
    const Tensor got = TensorResult(bounded_vm.Invoke("main", pair));
    for (int64_t i = 0; i < want->numel(); ++i) {
      EXPECT_EQ(got->GetAsDouble(i), want->GetAsDouble(i)) << "length " << length;
    }
  }
}

TEST(BertTest, StaticProgramTakesItsLength) {
  BertOptions options = Tiny();
  options.seq_len = 5;
  options.classes = 3;
  EXPECT_EQ(MainType(BuildBert(options)),
            "fn (Tensor[(1, 5), int32], Tensor[(1, 5), int32]) -> Tensor[(1, 3), float32]");
}

TEST(BertTest, WeightsAreThePeersStateDict) {
  const std::vector<WeightSpec> specs = BertWeightSpecs(Tiny());
  // 5 embedding tensors, 16 per layer, pooler and classifier.
  ASSERT_EQ(specs.size(), 5u + 2 * 16 + 4);
  const Model model = BuildBert(Tiny());
  ASSERT_EQ(model.weights.size(), specs.size());
  for (const WeightSpec& spec : specs) {
    ASSERT_TRUE(model.weights.contains(spec.name)) << spec.name;
    EXPECT_EQ(model.weights.at(spec.name)->shape(), spec.shape) << spec.name;
  }
  EXPECT_EQ(model.weights.at("word.weight")->shape(), (Shape{50, 16}));
  EXPECT_EQ(model.weights.at("pos.weight")->shape(), (Shape{32, 16}));
  EXPECT_EQ(model.weights.at("tok_type.weight")->shape(), (Shape{2, 16}));
  EXPECT_EQ(model.weights.at("layers.1.inter.weight")->shape(), (Shape{32, 16}));
  EXPECT_EQ(model.weights.at("layers.1.out.weight")->shape(), (Shape{16, 32}));
  EXPECT_EQ(model.weights.at("cls.weight")->shape(), (Shape{2, 16}));
  // Layer-norm gammas near 1, everything else within BERT's small scale.
  for (const auto& [name, tensor] : model.weights) {
    const bool gamma =
        name == "ln.weight" || name.ends_with(".ln1.weight") || name.ends_with(".ln2.weight");
    for (int64_t i = 0; i < tensor->numel(); ++i) {
      ASSERT_LE(std::abs(tensor->GetAsDouble(i) - (gamma ? 1.0 : 0.0)), 0.035) << name;
    }
  }
}

TEST(BertTest, RejectsBadOptions) {
  const auto error = [](auto change) {
    BertOptions options = Tiny();
    change(options);
    return ErrorOf([&] { BuildBert(options); });
  };
  EXPECT_EQ(error([](BertOptions& o) { o.heads = 3; }),
            "bert: hidden_size 16 is not a multiple of heads 3");
  EXPECT_EQ(error([](BertOptions& o) { o.vocab_size = 0; }),
            "bert: vocab_size must be between 1 and 16777216, got 0");
  EXPECT_EQ(error([](BertOptions& o) { o.heads = -2; }),
            "bert: heads must be between 1 and 16777216, got -2");
  EXPECT_EQ(error([](BertOptions& o) { o.ffn_size = int64_t{1} << 40; }),
            "bert: ffn_size must be between 1 and 16777216, got 1099511627776");
  // Checked before anything is allocated.
  EXPECT_EQ(error([](BertOptions& o) {
              o.vocab_size = 1 << 24;
              o.hidden_size = 256;
            }),
            "bert: the weights would hold 4295604546 floats, more than 2147483648");
  EXPECT_EQ(error([](BertOptions& o) { o.layers = 0; }),
            "bert: layers must be between 1 and 48, got 0");
  EXPECT_EQ(error([](BertOptions& o) { o.seq_len = 33; }),
            "bert: seq_len must be -1 (dynamic) or between 1 and max_positions 32, got 33");
  EXPECT_EQ(error([](BertOptions& o) { o.seq_len = 0; }),
            "bert: seq_len must be -1 (dynamic) or between 1 and max_positions 32, got 0");
}

TEST(BertTest, VmMatchesEvaluatorOnSeveralLengths) {
  const ir::IRModule module = TinySharpened().Module();
  CompiledModel compiled(module);
  for (const int64_t length : {1, 2, 5, 13}) {
    const std::vector<Ref<Object>> args = SentencePair(length, 50);
    const Tensor logits = compiled.Run(args);
    EXPECT_EQ(logits->shape(), (Shape{1, 2}));
    ExpectAllClose(logits, Evaluate(module, args), kVmVsEvaluatorTolerance,
                   "length " + std::to_string(length));
  }
}

// Products on cuBLAS, then from the GPU's matrix-product template.
TEST(BertTest, GpuMatchesEvaluator) {
  const ir::IRModule module = TinySharpened().Module();
  std::string missing;
  for (const char* kernels : {"auto", "generated"}) {
    std::optional<vm::Executable> executable = CompileForGpu(module, "main", &missing, kernels);
    if (!executable) continue;
    CompiledModel compiled(std::move(*executable), "main");
    for (const int64_t length : {1, 5, 13, 31}) {
      const std::vector<Ref<Object>> args = SentencePair(length, 50);
      ExpectAllClose(compiled.Run(args), Evaluate(module, args), kVmVsEvaluatorTolerance,
                     std::string(kernels) + " kernels, length " + std::to_string(length));
    }
  }
  if (!missing.empty()) GTEST_SKIP() << missing;
}

TEST(BertTest, StaticProgramMatchesDynamic) {
  BertOptions options = Tiny();
  options.seq_len = 5;
  const Model dynamic = TinySharpened();
  const Model fixed{dynamic.name, BuildBert(options).program, dynamic.weights};
  const std::vector<Ref<Object>> args = SentencePair(5, 50);
  ExpectAllClose(CompiledModel(fixed.Module()).Run(args), CompiledModel(dynamic.Module()).Run(args),
                 1e-5, "static vs dynamic");
}

// Self-attention reaches [CLS]: changing the last token changes the logits.
TEST(BertTest, LogitsDependOnTheWholeSequence) {
  CompiledModel compiled(TinySharpened().Module());
  const Tensor first = compiled.Run({Ids({3, 10, 17}), Ids({0, 0, 1})});
  const Tensor second = compiled.Run({Ids({3, 10, 18}), Ids({0, 0, 1})});
  EXPECT_GT(std::abs(first->GetAsDouble(0) - second->GetAsDouble(0)), 1e-3);
}

TEST(BertTest, BadInputsAreErrors) {
  CompiledModel compiled(BuildBert(Tiny()).Module());
  EXPECT_THAT(ErrorOf([&] {
                compiled.Run({Ids({1, 50}), Ids({0, 0})});
              }),
              HasSubstr("take: index 50 is out of range for axis 0 of (50, 16)"));
  EXPECT_THAT(ErrorOf([&] {
                compiled.Run({Ids({1, 2}), Ids({0, 2})});
              }),
              HasSubstr("take: index 2 is out of range for axis 0 of (2, 16)"));
  // Past max_positions: the signature's bound refuses it; without the
  // bound, the position table runs out.
  const std::vector<Ref<Object>> too_long = SentencePair(33, 50);
  EXPECT_THAT(ErrorOf([&] { compiled.Run(too_long); }),
              HasSubstr("@main: argument 0 (%input_ids): expected Tensor[(1, ?<=32), int32], got "
                        "Tensor[(1, 33), int32]"));
  BertOptions unbounded = Tiny();
  unbounded.bounded_length = false;
  CompiledModel unbounded_compiled(BuildBert(unbounded).Module());
  EXPECT_THAT(ErrorOf([&] { unbounded_compiled.Run(too_long); }),
              HasSubstr("add: cannot broadcast dimension 1"));
  EXPECT_THAT(ErrorOf([&] {
                compiled.Run({Ids({}), Ids({})});
              }),
              HasSubstr("take: index 0 is out of range"));
}

TEST(BertTest, LoadsSavedWeights) {
  ScratchDir scratch;
  BertOptions options = Tiny();
  options.seed = 7;
  const Model seeded = BuildBert(options);
  SaveWeights(seeded, scratch.File("bert.npz"));
  options.seed = 1;
  options.weights_path = scratch.File("bert.npz");
  const std::vector<Ref<Object>> args = SentencePair(4, 50);
  ExpectAllClose(CompiledModel(BuildBert(options).Module()).Run(args),
                 CompiledModel(seeded.Module()).Run(args), 0, "loaded weights");
}

// Runs `model` on the VM and the PyTorch reference on each length; `heads`
// goes to the reference with the ids, since the weights do not show it.
// Without torch only the VM runs.
void ExpectMatchesPyTorch(const Model& model, int heads, int64_t vocab_size,
                          const std::vector<int64_t>& lengths) {
  CompiledModel compiled(model.Module());
  std::vector<Tensor> logits;
  for (const int64_t length : lengths) {
    logits.push_back(compiled.Run(SentencePair(length, vocab_size)));
    ASSERT_EQ(logits.back()->shape(), (Shape{1, 2}));
  }
  if (!TorchAvailable()) GTEST_SKIP() << "no torch for " << kTorchPython;
  ScratchDir scratch;
  const std::string weights = scratch.File("weights.npz");
  SaveWeights(model, weights);
  std::vector<TorchCase> cases;
  for (const int64_t length : lengths) {
    const std::vector<Ref<Object>> args = SentencePair(length, vocab_size);
    const std::string stem = scratch.File("length" + std::to_string(length));
    WriteNpz(stem + ".npz", {{"input_ids", args[0].as<TensorNode>()},
                             {"token_type_ids", args[1].as<TensorNode>()},
                             {"heads", TensorNode::Scalar<int32_t>(DataType::Int32(), heads)}});
    cases.push_back({weights, stem + ".npz", stem + ".npy"});
  }
  RunTorchReference("bert", cases);
  for (size_t i = 0; i < lengths.size(); ++i) {
    ExpectAllClose(logits[i], ReadNpy(cases[i].output), 1e-4,
                   "length " + std::to_string(lengths[i]));
  }
}

TEST(BertTest, MatchesPyTorch) {
  ExpectMatchesPyTorch(TinySharpened(), Tiny().heads, Tiny().vocab_size, {1, 2, 5, 13});
}

// The real size: 110M weights, compiled, run once on 8 tokens, and checked
// against PyTorch (the run alone when torch is absent).
TEST(BertTest, BertBaseMatchesPyTorch) {
  const BertOptions base;
  const Model model = BuildBert(base);
  EXPECT_EQ(MainType(model),
            "fn (Tensor[(1, ?<=512), int32], Tensor[(1, ?<=512), int32]) -> Tensor[(1, 2), "
            "float32]");
  ExpectMatchesPyTorch(model, base.heads, base.vocab_size, {8});
}

}  // namespace
}  // namespace nimble::models
