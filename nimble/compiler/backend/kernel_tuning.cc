#include "nimble/compiler/backend/kernel_tuning.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/backend/template_tuning.h"
#include "nimble/compiler/backend/tuning_database.h"
#include "nimble/compiler/ir/constant_bytes.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/transform/pack_dense_weights.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernel.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::backend {
namespace {

// Measurements this process has made or read, by database key, so that
// compiling the same model again (a test suite, a benchmark's second
// configuration) measures nothing even without a database file.
class ProcessMeasurements {
 public:
  static ProcessMeasurements& Get() {
    static ProcessMeasurements measurements;
    return measurements;
  }
  std::optional<double> Find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = seconds_.find(key);
    return found == seconds_.end() ? std::nullopt : std::optional(found->second);
  }
  void Record(const std::string& key, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    seconds_[key] = seconds;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, double> seconds_;
};

// A kernel to time on a site.
using Candidate = std::pair<const MatMulSite*, std::string>;

// Whether `kernel` can run `site`: a bf16 weight has no generated kernel
// and no OpenBLAS one.
bool RunsSite(const MatMulSite& site, const std::string& kernel) {
  return !site.bf16_weight() || kernel == site.op || kernel == site.op + ".dnnl";
}

std::vector<Candidate> Candidates(const MatMulSite& site, const std::string& choice) {
  std::vector<Candidate> candidates;
  if (choice == "auto" && NIMBLE_HAVE_CODEGEN && RunsSite(site, kGeneratedKernel)) {
    candidates.emplace_back(&site, kGeneratedKernel);
  }
  for (std::string& kernel : LibraryCandidates(site.op, site.dynamic(), choice)) {
    if (RunsSite(site, kernel)) candidates.emplace_back(&site, std::move(kernel));
  }
  return candidates;
}

struct Choice {
  std::string kernel;  // empty when no candidate could run
  double seconds = std::numeric_limits<double>::infinity();
};

// Seconds per call of a site's candidates: from the tuning database, else
// from this process's earlier measurements, else measured (and recorded).
class SiteTimer {
 public:
  SiteTimer(const ir::IRModule& module, const CompileOptions& options)
      : database_(options.tuning_database),
        measurer_(module, options),
        matmul_(options.matmul),
        host_{HostKey(), ThreadPool::Global().num_threads()} {}

  TuningDatabase& database() { return database_; }
  const TuningHost& host() const { return host_; }

  // The fastest of `candidates`, each a kernel on a site.
  Choice Fastest(const std::vector<Candidate>& candidates) {
    const std::vector<double> seconds = Seconds(candidates);
    Choice best;
    for (size_t c = 0; c < candidates.size(); ++c) {
      if (seconds[c] < best.seconds) best = {candidates[c].second, seconds[c]};
    }
    return best;
  }

  // Seconds per call of each of `candidates` (infinite for one that cannot
  // run). Those without a recorded time are measured together, taking turns.
  std::vector<double> Seconds(const std::vector<Candidate>& candidates) {
    std::vector<std::optional<double>> seconds;
    std::vector<size_t> unmeasured;
    std::vector<std::function<void()>> runs;
    for (const auto& [site, kernel] : candidates) {
      seconds.push_back(database_.FindMeasurement(host_, Key(*site, kernel), AttrsText(site->attrs),
                                                  ShapesText(site->inputs)));
      if (!seconds.back())
        seconds.back() = ProcessMeasurements::Get().Find(ProcessKey(*site, kernel));
      if (seconds.back()) continue;
      try {
        runs.push_back(measurer_.Prepare(*site, kernel, matmul_));
        unmeasured.push_back(seconds.size() - 1);
      } catch (const Error&) {
        seconds.back() = std::numeric_limits<double>::infinity();
      }
    }
    const std::vector<double> measured = InterleavedSecondsPerCall(runs);
    for (size_t i = 0; i < unmeasured.size(); ++i) seconds[unmeasured[i]] = measured[i];
    std::vector<double> result;
    for (size_t c = 0; c < candidates.size(); ++c) {
      const auto& [site, kernel] = candidates[c];
      database_.RecordMeasurement(host_, Key(*site, kernel), AttrsText(site->attrs),
                                  ShapesText(site->inputs), *seconds[c]);
      ProcessMeasurements::Get().Record(ProcessKey(*site, kernel), *seconds[c]);
      result.push_back(*seconds[c]);
    }
    return result;
  }

 private:
  // A generated kernel is measured per template configuration.
  std::string Key(const MatMulSite& site, const std::string& kernel) const {
    const std::string name = kernel == kGeneratedKernel
                                 ? site.op + ".generated " + te::MatMulKnobsText(matmul_)
                                 : MeasuredKernelName(kernel);
    const bool from_memory = site.weights == WeightResidence::kMemory && site.weight_input() >= 0;
    const std::string weight = site.bf16_weight() ? name + ", bfloat16 weight" : name;
    return from_memory ? weight + ", weights from memory" : weight;
  }
  std::string ProcessKey(const MatMulSite& site, const std::string& kernel) const {
    return std::to_string(host_.threads) + "|" + Key(site, kernel) + "|" + AttrsText(site.attrs) +
           "|" + ShapesText(site.inputs);
  }

  TuningDatabase database_;
  SiteMeasurer measurer_;
  te::MatMulKnobs matmul_;
  TuningHost host_;
};

// The choice `nimble-bench tune` recorded for `site` on this host, as
// options.kernels takes it; nullopt when it tuned none there or its choice
// is not for these options.
std::optional<KernelChoice> TunedChoice(const MatMulSite& site, const CompileOptions& options,
                                        SiteTimer& timer) {
  // A tuned site's records are of float32 products.
  if (options.kernels == "library" || !options.tuned_matmul || site.bf16_weight()) {
    return std::nullopt;
  }
  const std::optional<TunedSite> tuned = timer.database().FindTuned(
      timer.host(), {site.op, AttrsText(site.attrs), ShapesText(site.input_class)});
  if (!tuned) return std::nullopt;
  const std::string& configuration = options.kernels == "auto" ? tuned->kernel : tuned->generated;
  if (const std::optional<te::MatMulKnobs> knobs = ParseGeneratedConfiguration(configuration)) {
    KernelChoice choice{kGeneratedKernel, *knobs};
    // An explicit --dispatch still decides how many residue copies there are.
    if (options.matmul.dispatch != 0) choice.matmul.dispatch = options.matmul.dispatch;
    return choice;
  }
  // A library kernel this build lacks (the database came from another
  // build), or one tuned on the library's own threads, leaves the site to
  // measurement.
  const std::optional<std::string> kernel = KernelOfMeasuredName(configuration);
  if (!kernel || kernel->empty() || !vm::KernelRegistry::Global().Contains(*kernel)) {
    return std::nullopt;
  }
  return KernelChoice{*kernel, options.matmul};
}

// The extents above kDynamicExtent at which a `?` site's choice is weighed
// against the libraries, and how much faster one must be there to take over.
constexpr int64_t kLargeExtents[] = {128, 256};
constexpr double kLargeExtentMargin = 1.03;

// The most a call measured at a large extent may do and hold. Where every
// dimension is `?` (nn.batch_matmul of two (?, ?, ?)) a call at 256 is 4.3e9
// multiply-adds over three 64 MiB tensors, and the site measured for 38 s at
// 1.1 GB resident before compiling; BERT's largest site at 256 tokens (the
// intermediate dense) is 0.6e9 and 13 MiB, well inside.
constexpr int64_t kMaxMeasuredMultiplyAdds = int64_t{1} << 30;
constexpr int64_t kMaxMeasuredBytes = int64_t{256} << 20;

// The extents of kLargeExtents at which `site` is within the bounds above;
// says on stderr which it leaves out and why, since the choice then rests on
// fewer lengths.
std::vector<int64_t> MeasurableLargeExtents(const MatMulSite& site) {
  std::vector<int64_t> extents;
  for (int64_t extent : kLargeExtents) {
    const MatMulSite at = site.AtExtent(extent);
    if (at.MultiplyAdds() <= kMaxMeasuredMultiplyAdds && at.Bytes() <= kMaxMeasuredBytes) {
      extents.push_back(extent);
      continue;
    }
    std::cerr << "nimble: " << site.op << " at " << ShapesText(site.input_class)
              << ": kernels not measured with ? = " << extent << " (" << at.MultiplyAdds()
              << " multiply-adds and " << at.Bytes() << " bytes a call, past the bounds of "
              << kMaxMeasuredMultiplyAdds << " and " << kMaxMeasuredBytes
              << "); the choice rests on the shorter extents\n";
  }
  return extents;
}

// A runtime kernel that beats `chosen` (the site's choice at kDynamicExtent)
// by kLargeExtentMargin at the largest of kLargeExtents and at each one down
// to where it takes over. The libraries lose on short sequences, where their
// fixed costs weigh (LibraryCandidates), but win on long ones: oneDNN's batch
// products on BERT's attention at 128 tokens. Nullopt when none does.
std::optional<LargeExtentKernel> LargeExtentChoice(const MatMulSite& site,
                                                   const std::string& chosen, SiteTimer& timer) {
  // Every extent is measured before any is weighed, so that what the
  // database holds for a site does not depend on which kernel won where.
  const std::vector<int64_t> extents = MeasurableLargeExtents(site);
  std::vector<MatMulSite> sites;
  for (int64_t extent : extents) sites.push_back(site.AtExtent(extent));
  std::vector<std::vector<Candidate>> candidates;
  std::vector<std::vector<double>> seconds;
  for (const MatMulSite& at : sites) {
    candidates.push_back(Candidates(at, "auto"));
    for (std::string& kernel : LibraryCandidates(site.op, /*dynamic=*/false, "library")) {
      if (RunsSite(at, kernel)) candidates.back().emplace_back(&at, std::move(kernel));
    }
    seconds.push_back(timer.Seconds(candidates.back()));
  }
  std::optional<LargeExtentKernel> large;
  for (size_t e = sites.size(); e-- > 0;) {
    double chosen_seconds = std::numeric_limits<double>::infinity();
    size_t fastest = 0;
    for (size_t c = 0; c < candidates[e].size(); ++c) {
      if (candidates[e][c].second == chosen) chosen_seconds = seconds[e][c];
      if (seconds[e][c] < seconds[e][fastest]) fastest = c;
    }
    const std::string& kernel = candidates[e][fastest].second;
    if (kernel == chosen || kernel == kGeneratedKernel ||
        seconds[e][fastest] * kLargeExtentMargin > chosen_seconds ||
        (large && kernel != large->kernel)) {
      break;
    }
    large = LargeExtentKernel{kernel, 0, 0, extents[e]};
  }
  if (!large) return std::nullopt;
  // The switch reads the first `?` (every `?` of a site is the same extent).
  for (size_t arg = 0; arg < site.input_class.size(); ++arg) {
    const Shape& shape = site.input_class[arg];
    const auto axis = std::find(shape.begin(), shape.end(), kSymbolicDim);
    if (axis != shape.end()) {
      large->arg = static_cast<int64_t>(arg);
      large->axis = axis - shape.begin();
      return large;
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> LibraryCandidates(const std::string& op, bool dynamic,
                                           const std::string& choice) {
  // A site with a `?` dimension is measured at one length, and the libraries'
  // wins there did not hold at the others: oneDNN builds a primitive per
  // shape (the process's first about 6 ms, later ones 10-25 us, then cached),
  // and with it at BERT's `?` sites the model ran 1.09x slower (median of four
  // interleaved pairs); OpenBLAS won BERT's sites by a few percent that the
  // model lost (3-7% slower in three pairs). So under auto only static sites
  // weigh them at the representative extent (`?` sites, at the large ones:
  // LargeExtentChoice); "library" keeps OpenBLAS at `?` sites.
  std::vector<std::string> kernels;
  if (choice == "auto") {
    kernels.push_back(op);
    if (dynamic) return kernels;
  }
  if (!dynamic) kernels.push_back(op + ".dnnl");
  kernels.push_back(op + ".openblas");
  return kernels;
}

KernelChoices ChooseMatMulKernels(const ir::IRModule& module, const CompileOptions& options) {
  KernelChoices choices;
  if ((options.kernels != "auto" && options.kernels != "library" &&
       options.kernels != "generated") ||
      !IsHostTarget(options.target)) {
    return choices;
  }
  // Generated kernels measure nothing: without a database there is no
  // tuned tile to read, and none is created.
  if (options.kernels == "generated" &&
      (options.tuning_database.empty() || !std::filesystem::exists(options.tuning_database))) {
    return choices;
  }
  std::vector<MatMulSite> sites = CollectMatMulSites(module);
  if (sites.empty()) return choices;
  const size_t constant_bytes = ir::ConstantBytes(module);
  for (MatMulSite& site : sites) site.weights = ResidenceOfWeights(constant_bytes, site.repeated);
  SiteTimer timer(module, options);
  for (const MatMulSite& site : sites) {
    if (std::optional<KernelChoice> tuned = TunedChoice(site, options, timer)) {
      choices.emplace(site.primitive, std::move(*tuned));
      continue;
    }
    if (options.kernels == "generated") continue;
    const Choice best = timer.Fastest(Candidates(site, options.kernels));
    if (best.kernel.empty()) continue;
    KernelChoice choice{best.kernel, options.matmul};
    if (options.kernels == "auto" && site.dynamic()) {
      choice.large = LargeExtentChoice(site, best.kernel, timer);
    }
    choices.emplace(site.primitive, std::move(choice));
  }
  return choices;
}

bool PackingDenseWins(const ir::TensorTypeNode& data, const ir::TensorTypeNode& weight,
                      WeightResidence residence, const CompileOptions& options) {
  if (options.kernels != "auto" || !IsHostTarget(options.target) || weight.ndim() != 2 ||
      !weight.is_static()) {
    return false;
  }
  // The call as ChooseMatMulKernels would see it: a primitive of its own,
  // after the pipeline (whose packing pass leaves parameter weights alone).
  const auto type_of = [](const ir::TensorTypeNode& type) {
    return ir::MakeTensorType(type.shape, type.dtype);
  };
  const ir::Var data_var = Make<ir::VarNode>("data", type_of(data));
  const ir::Var weight_var = Make<ir::VarNode>("weight", type_of(weight));
  ir::IRModule module = ir::MakeModule();
  module->Add(
      Make<ir::GlobalVarNode>("main"),
      Make<ir::FunctionNode>(
          std::vector<ir::Var>{data_var, weight_var},
          Make<ir::CallNode>(op::GetOp("nn.dense"), std::vector<ir::Expr>{data_var, weight_var},
                             op::NormalizeAttrs(*op::OpRegistry::Global().Find("nn.dense"), {})),
          nullptr, std::vector<ir::TypeVar>{}));
  typing::InferTypes(module);
  // Its own @main is its only entry, whichever functions the program keeps.
  CompileOptions site_options = options;
  site_options.entry_functions.clear();
  module = RunPasses(module, site_options);
  const std::vector<MatMulSite> sites = CollectMatMulSites(module);
  if (sites.size() != 1) return false;
  MatMulSite plain = sites.front();
  plain.weights = residence;
  MatMulSite packed = plain;
  packed.primitive = nullptr;
  packed.op = "nn.contrib_dense_pack";
  packed.attrs = Attrs();
  packed.attrs.Set("out_dtype", std::monostate{});
  packed.inputs[1] = {plain.inputs[1][0] / transform::kDensePackBlock, plain.inputs[1][1],
                      transform::kDensePackBlock};
  std::vector<Candidate> candidates = Candidates(plain, options.kernels);
  candidates.emplace_back(&packed, packed.op);
  return SiteTimer(module, options).Fastest(candidates).kernel == packed.op;
}

std::string DefaultTuningDatabase() {
  if (const char* path = std::getenv("NIMBLE_TUNING_DB")) return path;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache) {
    return std::string(cache) + "/nimble/tuning.db";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::string(home) + "/.cache/nimble/tuning.db";
  }
  return "";
}

}  // namespace nimble::backend
