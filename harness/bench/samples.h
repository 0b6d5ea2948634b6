// The inputs a model runs on in a benchmark, made from a dataset: the real
// files' formats (harness/datasets) or, by default, seeded synthetic files in
// those formats written to a temporary directory and read back by the same
// loaders. Words become seeded 300-d vectors (models::SeededEmbeddings) keyed
// by a hash of the lower-cased word, since no trained table can be had.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/module.h"
#include "nimble/vm/object.h"
#include "nimble/vm/tensor.h"

namespace nimble::bench {

struct Sample {
  std::vector<Ref<Object>> args;  // @main's arguments
  int64_t tokens = 0;             // what µs/token divides by
  // The same input as named tensors, as a peer framework reads it
  // (harness/baselines/peer_bench.py): lstm x; treelstm left, right,
  // leaves; bert input_ids, token_type_ids.
  std::vector<std::pair<std::string, Tensor>> named_inputs;
};

struct DatasetSpec {
  std::string path = "synthetic";  // "synthetic", an MRPC TSV, an SST directory or a PTB file
  std::string vocab;               // BERT's vocab.txt for a real MRPC file
  std::string split = "test";
  int count = 0;  // samples wanted (fewer if the data has fewer)
  uint64_t seed = 1;
};

// MRPC sentences one at a time, word-level (BERT's basic tokenizer): an
// (L, input_size) float32 tensor of word vectors each.
std::vector<Sample> LstmSamples(const DatasetSpec& spec, int64_t input_size);

// SST parse trees: the Tree ADT of `module` (models/treelstm) with a word
// vector per leaf; tokens = leaves.
std::vector<Sample> TreeLstmSamples(const DatasetSpec& spec, const ir::IRModule& module,
                                    int64_t input_size);

// MRPC pairs as [CLS] s1 [SEP] s2 [SEP] WordPiece ids and token types, each
// (1, L) int32; a pair longer than `max_positions` is an error naming it.
std::vector<Sample> BertSamples(const DatasetSpec& spec, int64_t max_positions);

// Inputs for an imported model's @main (nimble/compiler/onnx), chosen by
// its parameters: integer token ids of shape (1, ?) are BERT's MRPC pairs
// (BertSamples), a parameter named like `*mask*` all ones and one like
// `*type*` the token types, each in the parameter's dtype; float word
// vectors of shape (?, F) or (?, 1, F) are the LSTM's MRPC sentences.
// Throws nimble::Error naming a parameter it cannot feed.
std::vector<Sample> OnnxSamples(const DatasetSpec& spec, const ir::IRModule& module);

}  // namespace nimble::bench
