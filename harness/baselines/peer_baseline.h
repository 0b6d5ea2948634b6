// `nimble-bench baseline`: the same model, weights and samples as a Nimble
// run, measured in a peer framework on this host (PyTorch's eager model and
// its fastest variant, or ONNX Runtime; for --target nvidia, PyTorch on the
// GPU, each call copying its inputs in and its output out as Nimble's
// @main does). Nimble compiles and runs the first
// samples for their outputs; a work directory carries the weights, samples
// and those outputs to peer_bench.py (embedded in this binary), which runs
// as a child process in the framework's interpreter, checks its outputs
// against Nimble's before timing, and prints the figures (the file's
// docstring is the contract).
#pragma once

#include <string>
#include <vector>

#include "harness/bench/model_runner.h"

namespace nimble::baselines {

struct PeerOptions {
  std::string framework;  // pytorch or onnxruntime
  // The interpreter with the framework; empty: /usr/bin/python3 for
  // PyTorch (Debian's python3-torch), else the first of python3 on PATH and
  // /usr/bin/python3 that imports onnxruntime.
  std::string python;
  int threads = 1;
  int check_samples = 4;  // outputs compared with Nimble's before timing
  // The variants to time, from PeerVariants; empty: all of them.
  std::vector<std::string> variants;
};

// The variants a baseline of `framework` times for `model`, in the order it
// times them (PyTorch's eager model first, then its fastest form); empty
// when the framework has no baseline for the model. A coordinator queues a
// job for each, so that each job records one run.
std::vector<std::string> PeerVariants(const std::string& framework, const std::string& model);

// One timed variant: its name, the framework's version, its threading, its figures (the
// names of a Nimble run's: us_per_token, latency_*, sentences, tokens, and
// max_abs_error against Nimble's outputs).
struct PeerResult {
  std::string variant;
  std::string version;
  // OMP_WAIT_POLICY the peer ran under (PASSIVE unless the caller's
  // environment set it): PyTorch's Tree-LSTM at 2 threads took 268 us a
  // token with it PASSIVE and 65 ACTIVE on a 2-core Zen 4. Empty when the
  // peer did not say.
  std::string omp_wait_policy;
  std::vector<bench::Measurement> measurements;
};

// Throws nimble::Error naming the cause: an unknown framework or variant, a
// model or target the framework cannot run (Tree-LSTM or the GPU in ONNX
// Runtime), a missing interpreter
// or framework, outputs that differ from Nimble's, or a child that failed
// (its last stderr line).
std::vector<PeerResult> RunPeerBaseline(const bench::BenchOptions& bench,
                                        const PeerOptions& options,
                                        const bench::Progress& progress);

}  // namespace nimble::baselines
