// `nimble-bench baseline`: the same model, weights and samples as a Nimble
// run, measured in a peer framework on this host (PyTorch, ONNX Runtime,
// OpenVINO, TensorFlow, MXNet or TVM, each in its own variants; for --target
// nvidia, PyTorch on the GPU, each call copying its inputs in and its output
// out as Nimble's @main does). Nimble compiles and runs the first samples for
// their outputs; a work directory carries the weights, samples and those
// outputs to peer_bench.py and its plug-ins peer_FRAMEWORK.py (embedded in
// this binary), which run as a child process in the framework's interpreter,
// check its outputs against Nimble's before timing, and print the figures
// (peer_bench.py's docstring is the contract).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/bench/model_runner.h"

namespace nimble::baselines {

// The --framework values, in the order the paper's tables name them after
// PyTorch.
std::vector<std::string> PeerFrameworks();

// Where scripts/install-peers.sh puts each framework's virtual environment:
// $NIMBLE_PEERS_DIR, else $HOME/.local/share/nimble/peers; FRAMEWORK/ under it.
std::string PeersDir();

// The frameworks this host can run a baseline of without --python: those
// with an environment under PeersDir(), or whose module an interpreter
// `nimble-bench baseline` would try imports (PyTorch: Debian's python3-torch).
// An agent reports them, and a coordinator gives it only their baseline jobs.
std::vector<std::string> InstalledPeers();

struct PeerOptions {
  std::string framework;  // one of PeerFrameworks()
  // The interpreter with the framework; empty: the framework's environment
  // under PeersDir() where there is one, else /usr/bin/python3 for PyTorch
  // (Debian's python3-torch), else the first of python3 on PATH and
  // /usr/bin/python3 that imports the framework.
  std::string python;
  int threads = 1;
  int check_samples = 4;  // outputs compared with Nimble's before timing
  // A run whose timed passes would end later than this after the peer
  // started fails after its first pass, measuring nothing; the child is
  // killed at it.
  double time_limit_s = 4 * 3600;
  // The variants to time, from PeerVariants; empty: all of them.
  std::vector<std::string> variants;
};

// The variants a baseline of `framework` times for `model`, in the order it
// times them (PyTorch's eager model first, then its fastest form); empty
// when the framework has no baseline for the model. A coordinator queues a
// job for each, so that each job records one run.
std::vector<std::string> PeerVariants(const std::string& framework, const std::string& model);

// One timed variant: its name, the framework's version, its threading, what
// else its run's configuration records (precision: f32, or bf16 where the
// framework chose it; a looser rtol and atol where it was checked with them),
// its figures (the names of a Nimble run's: us_per_token, latency_*,
// sentences, tokens; max_abs_error against Nimble's outputs; compile_s where
// the framework compiles ahead of the first run).
struct PeerResult {
  std::string variant;
  std::string version;
  // OMP_WAIT_POLICY the peer ran under (PASSIVE unless the caller's
  // environment set it): PyTorch's Tree-LSTM at 2 threads took 268 us a
  // token with it PASSIVE and 65 ACTIVE on a 2-core Zen 4. Empty when the
  // peer did not say.
  std::string omp_wait_policy;
  nlohmann::json configuration = nlohmann::json::object();
  std::vector<bench::Measurement> measurements;
};

// Throws nimble::Error naming the cause: an unknown framework or variant, a
// model or target the framework cannot run (and why: the Tree-LSTM has no ONNX
// export; only PyTorch runs on the GPU), a missing interpreter or framework
// (naming scripts/install-peers.sh), outputs that differ from Nimble's, a run
// that would not end within the child's time limit, or a child that failed
// (its last stderr line).
std::vector<PeerResult> RunPeerBaseline(const bench::BenchOptions& bench,
                                        const PeerOptions& options,
                                        const bench::Progress& progress);

}  // namespace nimble::baselines
