// The LSTM of the paper's evaluation [6.1]: input 300, hidden 512, 1 or 2
// layers, batch 1, one token at a time through each layer's recurrence. The
// layers run one after the other (layer-major), so that a layer's input
// projection is one GEMM over the whole sequence (docs/models.md). The
// recurrence over a sequence of dynamic length is recursion in the IR (a
// tail-recursive global over the token index), so the VM runs it in
// constant stack.
//
//   def @main(%xs: Tensor[(?, INPUT), float32]) -> Tensor[(1, HIDDEN), float32]
//
// returns the last layer's final hidden state, as PyTorch's nn.LSTM h_n[-1].
// Weights are named as nn.LSTM's state_dict (weight_ih_l0 (4H, I),
// weight_hh_l0 (4H, H), bias_ih_l0 (4H), bias_hh_l0 (4H), then _l1 ...),
// gates in PyTorch's order i, f, g, o, so a PyTorch model's weights saved as
// .npz load as they are.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"

namespace nimble::models {

struct LstmOptions {
  int64_t input_size = 300;
  int64_t hidden_size = 512;
  int layers = 1;
  uint64_t seed = 1;        // for seeded weights
  std::string weights_path = {};  // an .npz to load instead (LoadWeights)
};

std::vector<WeightSpec> LstmWeightSpecs(const LstmOptions& options);

// Throws nimble::Error for sizes < 1 or layers outside 1..8.
Model BuildLstm(const LstmOptions& options);

}  // namespace nimble::models
