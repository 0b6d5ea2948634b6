#include "harness/bench/samples.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>

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

namespace {

// `tensor` (int32 ids) in `dtype`.
Tensor AsIntegers(const Tensor& tensor, DataType dtype) {
  if (dtype == tensor->dtype()) return tensor;
  if (dtype != DataType::Int64())
    throw Error("token ids as " + dtype.name() + " are not supported");
  std::vector<int64_t> values(tensor->data<int32_t>(), tensor->data<int32_t>() + tensor->numel());
  return TensorNode::FromVector<int64_t>(tensor->shape(), dtype, values);
}

bool Contains(const std::string& name, const char* part) {
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find(part) != std::string::npos;
}

}  // namespace

std::vector<Sample> OnnxSamples(const DatasetSpec& spec, const ir::IRModule& module) {
  const ir::Function main = module->Lookup("main");
  std::vector<ir::TensorType> types;
  for (const ir::Var& param : main->params) {
    const ir::Type& type = param->checked_type ? param->checked_type : param->type_annotation;
    if (!type || type->kind != ir::TypeKind::kTensor) {
      throw Error("input " + param->name_hint + " is not a tensor");
    }
    types.push_back(type.as<ir::TensorTypeNode>());
  }
  if (types.empty()) throw Error("the model has no inputs to feed");
  const ir::TensorType& first = types.front();
  // BERT-like: token ids, and a mask and token types beside them.
  if (first->dtype.is_int() && first->ndim() == 2) {
    std::vector<Sample> samples = BertSamples(spec, std::numeric_limits<int64_t>::max());
    for (Sample& sample : samples) {
      const Tensor ids = sample.args[0].as<TensorNode>();
      const Tensor token_types = sample.args[1].as<TensorNode>();
      sample.args.clear();
      sample.named_inputs.clear();
      for (size_t i = 0; i < types.size(); ++i) {
        const std::string& name = main->params[i]->name_hint;
        Tensor input;
        if (i == 0) {
          input = AsIntegers(ids, types[i]->dtype);
        } else if (Contains(name, "mask")) {
          input = AsIntegers(TensorNode::FromVector<int32_t>(
                                 ids->shape(), DataType::Int32(),
                                 std::vector<int32_t>(static_cast<size_t>(ids->numel()), 1)),
                             types[i]->dtype);
        } else if (Contains(name, "type")) {
          input = AsIntegers(token_types, types[i]->dtype);
        } else {
          throw Error("input " + name + " of a model fed token ids is not a mask or token types");
        }
        sample.args.push_back(input);
        sample.named_inputs.emplace_back(name, input);
      }
    }
    return samples;
  }
  // LSTM-like: a sentence's word vectors, (L, F) or (L, 1, F).
  const int64_t rank = static_cast<int64_t>(first->ndim());
  if (types.size() == 1 && first->dtype == DataType::Float32() && (rank == 2 || rank == 3) &&
      first->shape.back().is_static()) {
    std::vector<Sample> samples = LstmSamples(spec, first->shape.back().value());
    if (rank == 3) {
      for (Sample& sample : samples) {
        const Tensor x = sample.args[0].as<TensorNode>();
        const Tensor x3 = TensorNode::Empty({x->shape()[0], 1, x->shape()[1]}, x->dtype());
        std::copy_n(x->data<float>(), x->numel(), x3->data<float>());
        sample.args = {x3};
        sample.named_inputs = {{main->params[0]->name_hint, x3}};
      }
    }
    return samples;
  }
  throw Error("input " + main->params[0]->name_hint + " (" + ir::TypeToString(first) +
              ") is neither token ids (1, ?) nor word vectors (?, F) or (?, 1, F)");
}

}  // namespace nimble::bench
