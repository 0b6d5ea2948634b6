// `nimble random`: seeded random tensors, so that example inputs and weights
// can be made (and remade bit for bit) without numpy.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nimble/vm/tensor.h"

namespace nimble::cli {

struct TensorSpec {
  std::string name;
  Shape shape;
  DataType dtype = DataType::Float32();
};

// Parses "NAME:SHAPE[:DTYPE]": SHAPE is dimensions joined by 'x' ("5x8", "16"),
// or "scalar" for a rank-0 tensor; DTYPE defaults to float32. Throws
// nimble::Error naming the spec when it is malformed.
TensorSpec ParseTensorSpec(const std::string& spec);

// One tensor per spec, drawn in order from a std::mt19937_64 seeded with
// `seed`. Floats are uniform in [-1, 1); signed ints uniform in [-4, 4];
// uint8 in [0, 8]; bools 0 or 1.
std::vector<std::pair<std::string, Tensor>> RandomTensors(const std::vector<TensorSpec>& specs,
                                                          uint64_t seed);

}  // namespace nimble::cli
