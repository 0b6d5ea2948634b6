// BERT-base of the paper's evaluation [6.1], as the peer's `Bert`
// (../shared/peers/torch_models.py): vocab 30522, hidden 768, 12 layers, 12
// heads, FFN 3072, 512 positions, 2 token types, post-LayerNorm (eps 1e-12),
// GELU (erf), a tanh pooler on [CLS] and a 2-class head. One sequence at its
// true length, no padding:
//
//   def @main(%input_ids: Tensor[(1, ?), int32], %token_type_ids: Tensor[(1, ?), int32])
//       -> Tensor[(1, 2), float32]
//
// (with `seq_len` set, `?` is that static length: the static program the
// paper's Table 4 compares the dynamic one with). Weights are named as the
// peer's state_dict (word.weight, pos.weight, tok_type.weight, ln.weight,
// ln.bias, layers.0.attn.query.weight, ..., layers.0.ln2.bias,
// pooler.weight, pooler.bias, cls.weight, cls.bias; Linear weights (out, in)).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"

namespace nimble::models {

struct BertOptions {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int layers = 12;
  int heads = 12;
  int64_t ffn_size = 3072;
  int64_t max_positions = 512;
  int64_t classes = 2;
  int64_t seq_len = -1;  // -1: dynamic (`?`)
  // Dynamic: the length's type says it is at most max_positions
  // (`?<=512`), so memory planning allocates once, for that bound.
  bool bounded_length = true;
  uint64_t seed = 1;
  std::string weights_path = {};
};

std::vector<WeightSpec> BertWeightSpecs(const BertOptions& options);

// Throws nimble::Error when hidden_size is not a multiple of heads or a size
// is out of range (each size at most 2^24, layers at most 48, seq_len -1 or
// 1..max_positions, all the weights together at most 2^31 floats).
Model BuildBert(const BertOptions& options);

}  // namespace nimble::models
