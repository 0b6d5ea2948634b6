// The code every model builder shares: parsing a model's program with its
// weights, and making, loading and saving those weights. Seeded values come
// from our own splitmix64 stream (not std::uniform_real_distribution, whose
// output differs between standard libraries), so a seed gives the same
// weights and embeddings on every platform.
#include "models/model.h"

#include <set>
#include <utility>

#include "models/splitmix64.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"
#include "nimble/vm/npy.h"

namespace nimble::models {

namespace {

// The seed of one stream: `seed` mixed with `key`, so that nearby seeds and
// keys give unrelated streams.
uint64_t StreamSeed(uint64_t seed, uint64_t key) {
  SplitMix64 mixer(seed ^ SplitMix64(key).Next());
  return mixer.Next();
}

// FNV-1a: a fixed, platform-independent hash of a weight's name.
uint64_t NameHash(const std::string& name) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : name) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  }
  return hash;
}

void FillSymmetric(float* data, int64_t count, uint64_t stream_seed, float scale) {
  SplitMix64 generator(stream_seed);
  for (int64_t i = 0; i < count; ++i) data[i] = generator.Symmetric(scale);
}

}  // namespace

ir::IRModule Model::Module() const {
  try {
    ir::IRModule module = text::ParseModule(program, name + ".relay", &weights);
    typing::InferTypes(module);
    return module;
  } catch (const Error& error) {
    throw Error("model " + name + ": " + error.what());
  }
}

text::ParamMap SeededWeights(const std::vector<WeightSpec>& specs, uint64_t seed, double scale) {
  text::ParamMap weights;
  for (const WeightSpec& spec : specs) {
    Tensor tensor = TensorNode::Empty(spec.shape, DataType::Float32());
    FillSymmetric(tensor->data<float>(), tensor->numel(), StreamSeed(seed, NameHash(spec.name)),
                  static_cast<float>(scale));
    weights.emplace(spec.name, std::move(tensor));
  }
  return weights;
}

text::ParamMap LoadWeights(const std::string& path, const std::vector<WeightSpec>& specs) {
  text::ParamMap found;
  for (auto& [name, tensor] : ReadNpz(path)) {
    if (!found.emplace(name, tensor).second) {
      throw Error(path + ": tensor '" + name + "' appears twice");
    }
  }
  text::ParamMap weights;
  std::set<std::string> expected;
  for (const WeightSpec& spec : specs) {
    expected.insert(spec.name);
    const auto it = found.find(spec.name);
    if (it == found.end()) {
      throw Error(path + ": missing weight '" + spec.name + "' (expected float32 of shape " +
                  ShapeToString(spec.shape) + ")");
    }
    const Tensor& tensor = it->second;
    if (tensor->shape() != spec.shape) {
      throw Error(path + ": weight '" + spec.name + "' has shape " +
                  ShapeToString(tensor->shape()) + ", the model expects " +
                  ShapeToString(spec.shape));
    }
    if (tensor->dtype() != DataType::Float32()) {
      throw Error(path + ": weight '" + spec.name + "' is " + tensor->TypeString() +
                  ", the model expects float32");
    }
    weights.emplace(spec.name, tensor);
  }
  for (const auto& [name, tensor] : found) {
    if (!expected.contains(name)) {
      throw Error(path + ": unexpected tensor '" + name + "' " + tensor->TypeString() +
                  " (the model has no weight of that name)");
    }
  }
  return weights;
}

void SaveWeights(const Model& model, const std::string& path) {
  WriteNpz(path, {model.weights.begin(), model.weights.end()});
}

Tensor SeededEmbeddings(const std::vector<int32_t>& ids, int64_t dim, uint64_t seed) {
  if (dim < 1) throw Error("embedding dimension must be at least 1, got " + std::to_string(dim));
  Tensor table = TensorNode::Empty({static_cast<int64_t>(ids.size()), dim}, DataType::Float32());
  float* rows = table->data<float>();
  for (size_t i = 0; i < ids.size(); ++i) {
    // The id is reinterpreted as unsigned so that every id, negative ones
    // included, names its own stream.
    FillSymmetric(rows + static_cast<int64_t>(i) * dim, dim,
                  StreamSeed(seed, static_cast<uint32_t>(ids[i])), 1.0f);
  }
  return table;
}

}  // namespace nimble::models
