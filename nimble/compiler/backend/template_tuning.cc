#include "nimble/compiler/backend/template_tuning.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "nimble/compiler/backend/kernel_tuning.h"
#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/text/printer.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::backend {
namespace {

constexpr const char* kGeneratedPrefix = "generated ";

// The extents a site is measured at in a phase: its static shapes are one.
std::vector<int64_t> ExtentsOf(bool dynamic, const std::vector<int64_t>& extents) {
  return dynamic ? extents : std::vector<int64_t>{0};
}

// A program whose @main calls `site`'s op once on parameters of its types.
std::string SiteProgram(const MatMulSite& site) {
  const ir::FunctionNode& primitive = *site.primitive;
  std::vector<ir::Var> params;
  std::vector<ir::Expr> args;
  for (size_t i = 0; i < primitive.params.size(); ++i) {
    const ir::Var& param = primitive.params[i];
    params.push_back(Make<ir::VarNode>("p" + std::to_string(i), param->checked_type
                                                                    ? param->checked_type
                                                                    : param->type_annotation));
    args.push_back(params.back());
  }
  ir::IRModule module = ir::MakeModule();
  module->Add(
      Make<ir::GlobalVarNode>("main"),
      Make<ir::FunctionNode>(params, Make<ir::CallNode>(op::GetOp(site.op), args, site.attrs),
                             nullptr, std::vector<ir::TypeVar>{}));
  return text::PrintModule(module);
}

class Tuner {
 public:
  Tuner(const TunableSite& site, const TuneOptions& options, const TuningHost& host,
        TuningDatabase& database, const TaskRunner& run, const TuneProgress& progress)
      : site_(site),
        options_(options),
        host_(host),
        database_(database),
        run_(run),
        progress_(progress) {}

  TuneResult Run() {
    std::vector<std::string> generated;
    const std::vector<te::MatMulKnobs> space = TemplateSearchSpace();
    const size_t trials = options_.trials > 0
                              ? std::min(space.size(), static_cast<size_t>(options_.trials))
                              : space.size();
    for (size_t i = 0; i < trials; ++i) generated.push_back(GeneratedConfiguration(space[i]));
    std::vector<std::string> libraries;
    for (const std::string& kernel : LibraryCandidates(site_.key.op, site_.dynamic, "auto")) {
      libraries.push_back(MeasuredKernelName(kernel));
    }

    std::vector<std::string> candidates = generated;
    if (!site_.dynamic) candidates.insert(candidates.end(), libraries.begin(), libraries.end());
    const std::vector<int64_t> representative =
        ExtentsOf(site_.dynamic, {options_.representative_extent});
    Measure(candidates, representative, "representative");

    std::set<std::string> tried(candidates.begin(), candidates.end());
    std::vector<int64_t> extents = representative;
    if (site_.dynamic) {
      candidates = TopGenerated(generated, options_.representative_extent);
      candidates.insert(candidates.end(), libraries.begin(), libraries.end());
      extents = options_.extents;
      Measure(candidates, extents, "extents");
    }

    // The choice is among the last phase's candidates; failures count in both.
    tried.insert(candidates.begin(), candidates.end());
    const std::set<std::string> considered(candidates.begin(), candidates.end());
    std::vector<TuningRecord> records;
    std::set<std::string> failed;
    for (TuningRecord& record : database_.Records(host_, site_.key)) {
      if (!record.seconds && tried.contains(record.configuration)) {
        failed.insert(record.configuration);
      }
      if (considered.contains(record.configuration)) records.push_back(std::move(record));
    }
    std::optional<TunedSite> tuned = BestOnAverage(records, extents);
    if (!tuned) {
      throw Error("tuning " + site_.key.op + " " + site_.key.shapes +
                  ": no candidate ran at every extent" + FirstError(records));
    }
    database_.RecordTuned(host_, options_.target, site_.key, *tuned);
    return {*tuned, measured_, static_cast<int>(failed.size())};
  }

 private:
  using Measured = std::map<std::pair<std::string, int64_t>, bool>;  // (config, extent) -> ok

  Measured Known() {
    Measured known;
    for (const TuningRecord& record : database_.Records(host_, site_.key)) {
      known[{record.configuration, record.extent}] = record.seconds.has_value();
    }
    return known;
  }

  // Measures each of `configurations` at those of `extents` it has no
  // record at, `batch` configurations to a task (those missing the same
  // extents together); one that failed anywhere is not tried again, and a
  // time already recorded is kept, so the ranking a phase made stands.
  void Measure(const std::vector<std::string>& configurations, const std::vector<int64_t>& extents,
               const std::string& phase) {
    const Measured known = Known();
    std::map<std::vector<int64_t>, std::vector<std::string>> pending;  // missing extents -> configs
    size_t total = 0;
    for (const std::string& configuration : configurations) {
      std::vector<int64_t> missing;
      bool failed = false;
      for (int64_t extent : extents) {
        const auto found = known.find({configuration, extent});
        if (found == known.end()) {
          missing.push_back(extent);
        } else if (!found->second) {
          failed = true;
        }
      }
      if (missing.empty() || failed) continue;
      pending[missing].push_back(configuration);
      ++total;
    }
    size_t done = 0;
    if (progress_) progress_(phase, done, total);
    for (const auto& [missing, group] : pending) {
      for (size_t begin = 0; begin < group.size(); begin += options_.batch) {
        const size_t end = std::min(group.size(), begin + options_.batch);
        TuningTask task{options_.target,
                        site_.program,
                        {group.begin() + begin, group.begin() + end},
                        site_.dynamic ? missing : std::vector<int64_t>{}};
        RunSplittingFailures(task);
        done += end - begin;
        if (progress_) progress_(phase, done, total);
      }
    }
  }

  // Runs `task`; when it fails as a whole, each of its configurations alone,
  // and one that fails alone is recorded as failed at every extent.
  void RunSplittingFailures(const TuningTask& task) {
    TaskOutcome outcome = run_(task);
    if (outcome.error.empty()) outcome.error = WhyNotThisSite(task, outcome.records);
    if (outcome.error.empty()) {
      for (const TuningRecord& record : outcome.records) measured_ += record.seconds ? 1 : 0;
      database_.AddRecords(outcome.records);
      return;
    }
    if (task.configurations.size() > 1) {
      for (const std::string& configuration : task.configurations) {
        TuningTask single = task;
        single.configurations = {configuration};
        RunSplittingFailures(single);
      }
      return;
    }
    std::vector<TuningRecord> failed;
    for (int64_t extent : ExtentsOf(site_.dynamic, task.extents)) {
      failed.push_back({host_, options_.target, site_.key, task.configurations.front(), extent,
                        std::nullopt, outcome.error});
    }
    database_.AddRecords(failed);
  }

  // Why a task's records are not those it asked for, on this host: a
  // runner's process on another thread count, or one that skipped work,
  // would leave the choice to chance.
  std::string WhyNotThisSite(const TuningTask& task, const std::vector<TuningRecord>& records) {
    std::set<std::pair<std::string, int64_t>> expected;
    for (const std::string& configuration : task.configurations) {
      for (int64_t extent : ExtentsOf(site_.dynamic, task.extents)) {
        expected.insert({configuration, extent});
      }
    }
    for (const TuningRecord& record : records) {
      if (record.host.host != host_.host || record.host.threads != host_.threads) {
        return "measured on " + record.host.host + " with " + std::to_string(record.host.threads) +
               " threads, expected " + host_.host + " with " + std::to_string(host_.threads);
      }
      if (record.site.op != site_.key.op || record.site.attrs != site_.key.attrs ||
          record.site.shapes != site_.key.shapes ||
          !expected.erase({record.configuration, record.extent})) {
        return "a record of another site or configuration: " + record.configuration;
      }
    }
    if (!expected.empty()) return "no record of " + expected.begin()->first;
    return "";
  }

  // The top_k generated configurations by their time at `extent`.
  std::vector<std::string> TopGenerated(const std::vector<std::string>& generated, int64_t extent) {
    const std::set<std::string> tried(generated.begin(), generated.end());
    std::vector<std::pair<double, std::string>> timed;
    for (const TuningRecord& record : database_.Records(host_, site_.key)) {
      if (record.extent == extent && record.seconds && tried.contains(record.configuration)) {
        timed.emplace_back(*record.seconds, record.configuration);
      }
    }
    std::sort(timed.begin(), timed.end());
    std::vector<std::string> top;
    for (size_t i = 0; i < timed.size() && top.size() < static_cast<size_t>(options_.top_k); ++i) {
      top.push_back(timed[i].second);
    }
    return top;
  }

  static std::string FirstError(const std::vector<TuningRecord>& records) {
    for (const TuningRecord& record : records) {
      if (!record.error.empty()) return " (" + record.configuration + ": " + record.error + ")";
    }
    return "";
  }

  const TunableSite& site_;
  const TuneOptions& options_;
  const TuningHost& host_;
  TuningDatabase& database_;
  const TaskRunner& run_;
  const TuneProgress& progress_;
  int measured_ = 0;
};

}  // namespace

std::string GeneratedConfiguration(const te::MatMulKnobs& knobs) {
  return kGeneratedPrefix + std::string("tile ") + std::to_string(knobs.tile_rows) + "x" +
         std::to_string(knobs.tile_cols);
}

std::optional<te::MatMulKnobs> ParseGeneratedConfiguration(const std::string& configuration) {
  te::MatMulKnobs knobs;
  char extra = 0;
  if (std::sscanf(configuration.c_str(), "generated tile %dx%d%c", &knobs.tile_rows,
                  &knobs.tile_cols, &extra) != 2) {
    return std::nullopt;
  }
  return knobs;
}

std::vector<te::MatMulKnobs> TemplateSearchSpace() {
  std::vector<te::MatMulKnobs> space;
  const te::MatMulKnobs default_knobs;
  for (int rows = 1; rows <= 64; ++rows) {
    for (int cols = 1; cols <= 64; ++cols) {
      te::MatMulKnobs knobs{rows, cols, 0};
      try {
        te::CheckMatMulKnobs(knobs);
      } catch (const Error&) {
        continue;
      }
      if (rows != default_knobs.tile_rows || cols != default_knobs.tile_cols)
        space.push_back(knobs);
    }
  }
  // A fixed shuffle, so that runs agree on the first N; the default tile
  // first, so that tuning never ends worse than not tuning.
  std::mt19937 shuffle(20210405);
  for (size_t i = space.size(); i > 1; --i) {
    std::swap(space[i - 1], space[shuffle() % i]);
  }
  space.insert(space.begin(), default_knobs);
  return space;
}

std::vector<TunableSite> TunableSites(const ir::IRModule& module) {
  std::vector<TunableSite> sites;
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  for (const MatMulSite& site : CollectMatMulSites(module)) {
    // A bf16 product has no generated kernel to tune.
    if (site.bf16_weight()) continue;
    TuningSiteKey key{site.op, AttrsText(site.attrs), ShapesText(site.input_class)};
    if (!seen.insert({key.op, key.attrs, key.shapes}).second) continue;
    sites.push_back({std::move(key), site.dynamic(), SiteProgram(site)});
  }
  return sites;
}

std::vector<TuningRecord> MeasureTuningTask(const TuningTask& task) {
  if (!IsHostTarget(task.target)) {
    throw Error("a tuning task for target " + task.target + " cannot be measured on this host");
  }
  ir::IRModule module = text::ParseModule(task.program, "<tuning task>");
  typing::InferTypes(module);
  CompileOptions options{.target = task.target};
  options.tuning_database.clear();
  module = RunPasses(module, options);
  const std::vector<MatMulSite> sites = CollectMatMulSites(module);
  if (sites.size() != 1) {
    throw Error(
        "a tuning task's program must be one nn.dense or nn.batch_matmul on float32; it has " +
        std::to_string(sites.size()) + " such sites");
  }
  const MatMulSite& site = sites.front();
  const TuningHost host{HostKey(), ThreadPool::Global().num_threads()};
  const TuningSiteKey key{site.op, AttrsText(site.attrs), ShapesText(site.input_class)};
  SiteMeasurer measurer(module, options);
  std::vector<TuningRecord> records;
  for (int64_t extent : ExtentsOf(site.dynamic(), task.extents)) {
    if (site.dynamic() && extent < 1) {
      throw Error("a tuning task's extents must be positive, got " + std::to_string(extent));
    }
    const MatMulSite measured = site.AtExtent(extent > 0 ? extent : kDynamicExtent);
    std::vector<std::function<void()>> runs;
    std::vector<size_t> ran;
    for (const std::string& configuration : task.configurations) {
      records.push_back({host, task.target, key, configuration, extent, std::nullopt, ""});
      const std::optional<te::MatMulKnobs> knobs = ParseGeneratedConfiguration(configuration);
      const std::optional<std::string> kernel = knobs ? std::optional<std::string>(kGeneratedKernel)
                                                      : KernelOfMeasuredName(configuration);
      try {
        if (!kernel) {
          throw Error("'" + configuration +
                      "' is not a configuration (a library's is named 'KERNEL on the pool')");
        }
        runs.push_back(measurer.Prepare(measured, *kernel, knobs.value_or(te::MatMulKnobs{})));
        ran.push_back(records.size() - 1);
      } catch (const Error& error) {
        records.back().error = error.what();
      }
    }
    const std::vector<double> seconds = InterleavedSecondsPerCall(runs);
    for (size_t i = 0; i < ran.size(); ++i) records[ran[i]].seconds = seconds[i];
  }
  return records;
}

void CheckTuneOptions(const TuneOptions& options) {
  if (options.trials < 0) throw Error("--trials must be 0 (all) or more");
  if (options.top_k < 1) throw Error("--top-k must be at least 1");
  if (options.batch < 1) throw Error("--batch must be at least 1");
  if (options.representative_extent < 1) throw Error("--representative must be at least 1");
  if (options.extents.empty()) throw Error("--extents needs at least one extent");
  for (int64_t extent : options.extents) {
    if (extent < 1) throw Error("--extents must be positive, got " + std::to_string(extent));
  }
}

TuneResult TuneSite(const TunableSite& site, const TuneOptions& options, const TuningHost& host,
                    TuningDatabase& database, const TaskRunner& run, const TuneProgress& progress) {
  CheckTuneOptions(options);
  return Tuner(site, options, host, database, run, progress).Run();
}

std::optional<TunedSite> BestOnAverage(const std::vector<TuningRecord>& records,
                                       const std::vector<int64_t>& extents) {
  std::map<std::string, std::map<int64_t, double>> times;
  std::set<std::string> failed;
  for (const TuningRecord& record : records) {
    if (!record.seconds) {
      failed.insert(record.configuration);
    } else if (std::find(extents.begin(), extents.end(), record.extent) != extents.end()) {
      times[record.configuration][record.extent] = *record.seconds;
    }
  }
  std::map<int64_t, double> fastest;
  std::vector<std::string> complete;
  for (const auto& [configuration, at] : times) {
    if (failed.contains(configuration) || at.size() != extents.size()) continue;
    complete.push_back(configuration);
    for (const auto& [extent, seconds] : at) {
      const auto found = fastest.find(extent);
      if (found == fastest.end() || seconds < found->second) fastest[extent] = seconds;
    }
  }
  if (complete.empty()) return std::nullopt;
  TunedSite best;
  std::set<std::string> measured = failed;
  for (const auto& [configuration, at] : times) measured.insert(configuration);
  best.configurations = static_cast<int>(measured.size());
  double best_generated = 0;
  for (const std::string& configuration : complete) {
    double total = 0;
    for (const auto& [extent, seconds] : times[configuration]) total += seconds / fastest[extent];
    const double mean = total / static_cast<double>(extents.size());
    if (best.kernel.empty() || mean < best.mean_relative) {
      best.kernel = configuration;
      best.mean_relative = mean;
    }
    if (ParseGeneratedConfiguration(configuration) &&
        (best.generated.empty() || mean < best_generated)) {
      best.generated = configuration;
      best_generated = mean;
    }
  }
  return best;
}

}  // namespace nimble::backend
