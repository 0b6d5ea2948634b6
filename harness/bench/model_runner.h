// `nimble-bench run`: compiles a model (models/), runs it over a dataset's
// samples on the VM and measures it the way the paper does [6.1]: µs per
// token (total time / total tokens), per-sentence latency percentiles, the
// kernel vs "other" split of Table 4 (a separate profiled pass, so the timed
// passes pay nothing for profiling), allocations and bytes with and without
// memory planning (as written, and executed per sentence), and the pooled
// allocator's peak. docs/results.md names every figure.
//
// Protocol: `warmup` untimed runs (cycling over the samples), then `repeat`
// timed passes over all samples; a sample's latency is its median over the
// passes, and µs/token is the median pass's total time over its tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "harness/bench/results_db.h"
#include "harness/bench/samples.h"
#include "models/bert/bert.h"
#include "models/lstm/lstm.h"
#include "models/treelstm/treelstm.h"
#include "nimble/compiler/backend/vm_compiler.h"
#include "nimble/vm/vm.h"

namespace nimble::bench {

struct BenchOptions {
  std::string model;  // lstm, treelstm or bert; "onnx" with `onnx`
  // An ONNX model to import and run instead of a builder's (inputs from the
  // dataset by the graph's input names and types: OnnxSamples).
  std::string onnx;
  // Bounds of the ONNX model's named input dimensions
  // (onnx_import::ImportOptions::dim_bounds).
  std::map<std::string, int64_t> onnx_dim_bounds;
  std::string target = "intel";
  DatasetSpec dataset;
  int warmup = 8;
  int repeat = 3;
  // BERT: also compile the program at this static sequence length and time
  // it on samples padded/cut to it (0: not).
  int64_t static_seq_len = 0;
  // An ONNX BERT: also time the native builder's BERT (`bert`) on the same
  // sentences, pass by pass in turn, for the import's cost (onnx_over_native).
  bool against_native = false;
  // How the program is compiled (backend::CompileOptions); a configuration
  // other than auto with fusion is recorded in the run's configuration.
  std::string kernels = "auto";
  bool fuse_ops = true;
  std::string tuning_database;  // empty: measure kernel choices afresh
  // fp32, or bf16 (backend::CompileOptions::precision): a bf16 run also runs
  // the fp32 program on every sample and records the largest difference of
  // their outputs and, for BERT, the share of pairs whose class differs.
  std::string precision = "fp32";
  // backend::CompileOptions::batch_trees; recorded in the configuration.
  bool batch_trees = false;
  models::LstmOptions lstm;
  models::TreeLstmOptions treelstm;
  models::BertOptions bert;
};

// Called as work advances: `done` of `total` units in `phase`.
using Progress = std::function<void(const std::string& phase, size_t done, size_t total)>;

struct BenchResult {
  std::vector<Measurement> measurements;
  int64_t sentences = 0;
};

// Throws nimble::Error for an unknown model or target, or a dataset or
// model error (naming it).
BenchResult RunBenchmark(const BenchOptions& options, const Progress& progress);

// What `nimble-bench run --count-instructions` runs under callgrind: the
// model compiled as RunBenchmark compiles it (under callgrind, for the CPU
// that Valgrind presents, whatever the host), the warm-up runs, then one
// untimed pass over the samples, the only code callgrind instruments (its
// client requests start and stop instrumentation around it). Its figures
// are the sentences and tokens only: a time taken under callgrind would be
// the emulator's. Throws nimble::Error in a build without Valgrind's headers.
BenchResult RunCountedPass(const BenchOptions& options);

// How `options` compiles its model.
backend::CompileOptions CompileOptionsOf(const BenchOptions& options);

// The program `options` names: the builder's model with its weights, or
// the imported ONNX model.
ir::IRModule ModelModule(const BenchOptions& options);

// The model `options` name, with its weights (seeded or from a file).
models::Model BuildModel(const BenchOptions& options);

// The model's samples from `options.dataset`; `module` is BuildModel's
// Module() (a Tree-LSTM sample is built with its constructors).
std::vector<Sample> MakeSamples(const BenchOptions& options, const ir::IRModule& module);

// The model's options as JSON (results.db's runs.configuration).
std::string ConfigurationJson(const BenchOptions& options);

}  // namespace nimble::bench
