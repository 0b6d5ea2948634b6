// What every model builder (models/lstm, models/treelstm, models/bert)
// produces: a Relay program (docs/text-format.md) whose weights are
// `meta[relay.Constant][NAME]` references, and those weights by name. The
// program text is the model's single definition: `nimble export-model`
// writes it out as it is, and Module() parses it with the weights bound, so
// the builder, the CLI and the tests all run the same program.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nimble/compiler/ir/module.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/vm/object.h"
#include "nimble/vm/tensor.h"

namespace nimble::models {

struct Model {
  std::string name;       // "lstm", "treelstm", "bert"
  std::string program;    // Relay text; @main is the entry
  text::ParamMap weights;  // every meta[relay.Constant][NAME] of `program`

  // The program parsed and type-checked, weights bound as constants.
  // Throws nimble::Error naming the model on a program that does not type.
  ir::IRModule Module() const;
};

// A weight's expected name and shape, as a builder declares it.
struct WeightSpec {
  std::string name;
  Shape shape;
};

// Seeded weights: each tensor float32, uniform in [-scale, scale) from a
// generator seeded by `seed` and the weight's name (so adding a weight does
// not change the others).
text::ParamMap SeededWeights(const std::vector<WeightSpec>& specs, uint64_t seed, double scale);

// Weights from an .npz file (vm/npy.h), checked against `specs`: every name
// present with its shape and float32, no extra tensor. Errors name the file,
// the weight and both shapes.
text::ParamMap LoadWeights(const std::string& path, const std::vector<WeightSpec>& specs);

// Writes `model.weights` as an .npz, in name order.
void SaveWeights(const Model& model, const std::string& path);

// Word embeddings where no trained table can be had (GloVe cannot be
// downloaded here): row i of the result is token ids[i]'s vector, float32
// uniform in [-1, 1), a pure function of (seed, id), so no vocabulary-sized
// table is stored. Shape (ids.size(), dim).
Tensor SeededEmbeddings(const std::vector<int32_t>& ids, int64_t dim, uint64_t seed);

}  // namespace nimble::models
