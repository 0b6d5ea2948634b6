// `nimble-bench microbench dispatch`: what a symbolic row count costs the
// generated matrix products (the paper's Figure 3, §4.5 and §6.3).
//
// Each dense shape is compiled once per length with the length in its type
// (static codegen, the baseline) and once per dispatch degree k with the
// length symbolic (`?`), the kernel split k ways on length mod k
// (te/matmul_schedule.h). Every program runs on the VM, as in a model, so
// a call includes its dispatch and output allocation. The variants take
// turns: each round times every (shape, length, variant) once, in an order
// that rotates between rounds, and a variant's time at a length is its
// median over the rounds, so a burst of load on a shared host lands on one
// round of all of them rather than on one variant. A variant's relative
// latency is its time over the static program's at the same length,
// averaged over the lengths (by default 121..128: every residue mod 8).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/bench/model_runner.h"
#include "harness/bench/results_db.h"

namespace nimble::bench {

struct DenseShape {
  int64_t in = 0;   // features in (the reduction)
  int64_t out = 0;  // features out
};

struct DispatchBenchOptions {
  std::string target = "intel";  // intel or arm, the host's own
  // BERT-base's three dense layers: attention and FFN output, FFN input.
  std::vector<DenseShape> shapes = {{768, 768}, {768, 3072}, {3072, 768}};
  std::vector<int64_t> lengths = {121, 122, 123, 124, 125, 126, 127, 128};
  std::vector<int> degrees = {8, 4, 2, 1};  // dispatch/k; 1 is one kernel with checks
  int rounds = 5;
  // Each timing repeats the call until it has run this long.
  double min_seconds = 0.01;
};

// Throws nimble::Error naming the first option out of range.
void CheckDispatchBenchOptions(const DispatchBenchOptions& options);

// Compiles and times every variant; returns, per shape and variant, the
// figures dispatch_figures.h names (static: us only). Progress phases:
// "compile", "time".
std::vector<Measurement> RunDispatchBench(const DispatchBenchOptions& options,
                                          const Progress& progress);

// The options as JSON (results.db's runs.configuration): shapes, lengths,
// degrees, rounds, min_seconds, and the matrix-product tile.
std::string DispatchConfigurationJson(const DispatchBenchOptions& options);

}  // namespace nimble::bench
