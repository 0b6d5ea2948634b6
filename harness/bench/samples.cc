#include "harness/bench/samples.h"

#include <filesystem>

#include "harness/bench/scratch_dir.h"
#include "harness/datasets/mrpc.h"
#include "harness/datasets/sst.h"
#include "harness/datasets/synthetic.h"
#include "harness/datasets/wordpiece.h"
#include "models/model.h"
#include "models/treelstm/treelstm.h"
#include "nimble/vm/error.h"
#include "nimble/vm/tensor.h"

namespace nimble::bench {

namespace {

namespace fs = std::filesystem;

bool IsSynthetic(const DatasetSpec& spec) {
  return spec.path == "synthetic";
}

// Synthetic data files of this process, removed at exit.
const ScratchDir& Scratch() {
  static const ScratchDir dir("nimble_bench_");
  return dir;
}

// A stable id for a word (FNV-1a, 31 bits): the key of its seeded vector.
int32_t WordId(const std::string& word) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : word) hash = (hash ^ c) * 16777619u;
  return static_cast<int32_t>(hash & 0x7fffffffu);
}

Tensor WordVectors(const std::vector<std::string>& words, int64_t dim, uint64_t seed) {
  std::vector<int32_t> ids;
  for (const std::string& word : words) ids.push_back(WordId(word));
  return models::SeededEmbeddings(ids, dim, seed);
}

void RequireTestSplit(const DatasetSpec& spec) {
  if (spec.split != "test") {
    throw Error("MRPC: only the test split is distributed (msr_paraphrase_test.txt), not '" +
                spec.split + "'");
  }
}

struct MrpcData {
  std::vector<datasets::MrpcPair> pairs;
  std::string vocab;
};

MrpcData LoadMrpc(const DatasetSpec& spec) {
  RequireTestSplit(spec);
  if (IsSynthetic(spec)) {
    // Sentences come two per pair; enough pairs for `count` of either kind.
    const datasets::SyntheticMrpcFiles files =
        datasets::WriteSyntheticMrpc(Scratch().File("mrpc"), std::max(spec.count, 1), spec.seed);
    return {datasets::ReadMrpc(files.pairs), files.vocab};
  }
  return {datasets::ReadMrpc(spec.path), spec.vocab};
}

// The first `count` of `items` (all of them for count 0).
template <typename T>
void Truncate(std::vector<T>& items, int count) {
  if (count > 0 && items.size() > static_cast<size_t>(count)) items.resize(count);
}

}  // namespace

std::vector<Sample> LstmSamples(const DatasetSpec& spec, int64_t input_size) {
  const MrpcData data = LoadMrpc(spec);
  std::vector<Sample> samples;
  for (const datasets::MrpcPair& pair : data.pairs) {
    for (const std::string* sentence : {&pair.sentence1, &pair.sentence2}) {
      const std::vector<std::string> words = datasets::BasicTokenize(*sentence);
      if (words.empty()) continue;
      const Tensor x = WordVectors(words, input_size, spec.seed);
      samples.push_back({{x}, static_cast<int64_t>(words.size()), {{"x", x}}});
    }
  }
  Truncate(samples, spec.count);
  return samples;
}

std::vector<Sample> TreeLstmSamples(const DatasetSpec& spec, const ir::IRModule& module,
                                    int64_t input_size) {
  std::vector<datasets::SstSentence> sentences;
  if (IsSynthetic(spec)) {
    datasets::WriteSyntheticSst(Scratch().File("sst"), std::max(spec.count, 1), spec.seed);
    sentences = datasets::ReadSst(Scratch().File("sst"), datasets::SstSplit::kTest);
  } else if (fs::is_directory(spec.path)) {
    const datasets::SstSplit split =
        spec.split == "train" ? datasets::SstSplit::kTrain
        : spec.split == "dev" ? datasets::SstSplit::kDev
        : spec.split == "test"
            ? datasets::SstSplit::kTest
            : throw Error("SST: unknown split '" + spec.split + "' (train, dev or test)");
    sentences = datasets::ReadSst(spec.path, split);
  } else {
    sentences = datasets::ReadPtbTrees(spec.path);
  }
  Truncate(sentences, spec.count);
  std::vector<Sample> samples;
  for (const datasets::SstSentence& sentence : sentences) {
    const Tensor leaves = WordVectors(sentence.tokens, input_size, spec.seed);
    const auto indices = [](const std::vector<int32_t>& values) {
      return TensorNode::FromVector<int32_t>({static_cast<int64_t>(values.size())},
                                             DataType::Int32(), values);
    };
    samples.push_back({models::TreeArguments(module, sentence.tree, leaves),
                       static_cast<int64_t>(sentence.tokens.size()),
                       {{"left", indices(sentence.tree.left)},
                        {"right", indices(sentence.tree.right)},
                        {"leaves", leaves}}});
  }
  return samples;
}

std::vector<Sample> BertSamples(const DatasetSpec& spec, int64_t max_positions) {
  const MrpcData data = LoadMrpc(spec);
  if (data.vocab.empty()) {
    throw Error("BERT on " + spec.path + " needs its WordPiece vocabulary: --vocab vocab.txt");
  }
  const datasets::WordPieceTokenizer tokenizer =
      datasets::WordPieceTokenizer::FromVocabFile(data.vocab);
  std::vector<Sample> samples;
  for (const datasets::MrpcPair& pair : data.pairs) {
    const datasets::WordPieceTokenizer::Encoded encoded =
        tokenizer.EncodePair(pair.sentence1, pair.sentence2);
    const int64_t length = static_cast<int64_t>(encoded.ids.size());
    if (length > max_positions) {
      throw Error("MRPC pair " + pair.id1 + "/" + pair.id2 + " has " + std::to_string(length) +
                  " tokens, more than the model's " + std::to_string(max_positions) + " positions");
    }
    const Tensor ids = TensorNode::FromVector<int32_t>({1, length}, DataType::Int32(), encoded.ids);
    const Tensor types =
        TensorNode::FromVector<int32_t>({1, length}, DataType::Int32(), encoded.type_ids);
    samples.push_back({{ids, types}, length, {{"input_ids", ids}, {"token_type_ids", types}}});
  }
  Truncate(samples, spec.count);
  return samples;
}

}  // namespace nimble::bench
