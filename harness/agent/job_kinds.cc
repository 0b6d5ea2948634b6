#include "harness/agent/job_kinds.h"

#include <algorithm>

#include "harness/bench/run_record.h"
#include "nimble/vm/error.h"

namespace nimble::agent {

namespace {

constexpr double kRunTimeout = 3600;
constexpr double kBaselineStopMargin = 60;
constexpr double kMicrobenchTimeout = 1800;
constexpr double kProbeTimeout = 60;
constexpr double kTuneTimeout = 6 * 3600;

std::vector<std::string> WithEmulator(const JobContext& context, std::vector<std::string> argv) {
  std::vector<std::string> command = context.emulator;
  command.insert(command.end(), argv.begin(), argv.end());
  return command;
}

std::string BenchmarkBinary(const protocol::JobSpec& spec, const JobContext& context) {
  const std::string suite = spec.options.value("suite", "kernels");
  if (suite != "kernels" && suite != "vm") {
    throw Error("microbench suite '" + suite + "' (kernels, vm or dispatch)");
  }
  return context.bench_dir + "/nimble_bench_" + suite;
}

// Google Benchmark's JSON report as a run record of this agent's host.
protocol::Json MicrobenchRecord(const protocol::JobSpec& spec, const std::string& output,
                                const JobContext& context) {
  const protocol::Json report = protocol::Json::parse(output);
  bench::RunRecord record;
  bench::RunInfo& info = record.info;
  const bench::HostInfo& host = context.agent.host;
  info.commit_id = context.agent.commit_id;
  info.host = host.host;
  info.cpu_model = host.cpu_model;
  info.cpu_flags = host.cpu_flags;
  info.cores = host.cores;
  info.threads = report.at("context").value("num_cpus", host.cores);
  info.target = spec.target == "any" ? bench::NativeTarget(host) : spec.target;
  info.model = "nimble_bench_" + spec.options.value("suite", std::string("kernels"));
  info.configuration = spec.options.dump();
  info.dataset = "none";
  info.split = "none";
  info.kind = "microbench";
  info.arch = host.arch;
  info.emulated = host.emulated;
  info.emulator = host.emulator;
  for (const protocol::Json& benchmark : report.at("benchmarks")) {
    if (benchmark.value("run_type", "iteration") != "iteration") continue;
    record.measurements.push_back({benchmark.at("name").get<std::string>(),
                                   benchmark.at("real_time").get<double>(),
                                   benchmark.value("time_unit", std::string("ns"))});
  }
  return {{"run", bench::ToJson(record)}};
}

// `nimble-bench COMMAND...` with the job's forwarded options.
std::vector<std::string> BenchCommand(const protocol::JobSpec& spec, const JobContext& context,
                                      const std::vector<std::string>& command) {
  std::vector<std::string> argv = {context.nimble_bench};
  argv.insert(argv.end(), command.begin(), command.end());
  for (const protocol::Json& arg : spec.options.value("args", protocol::Json::array())) {
    if (!arg.is_string()) throw Error(spec.kind + " job: 'args' must be strings");
    argv.push_back(arg.get<std::string>());
  }
  return argv;
}

// A string option the kind needs.
std::string Required(const protocol::JobSpec& spec, const std::string& name) {
  const protocol::Json* value = spec.options.contains(name) ? &spec.options.at(name) : nullptr;
  if (!value || !value->is_string() || value->get<std::string>().empty()) {
    throw Error(spec.kind + " job: option '" + name + "' is missing or not a string");
  }
  return value->get<std::string>();
}

}  // namespace

JobCommand CommandFor(const protocol::JobSpec& spec, const JobContext& context) {
  const double timeout = spec.timeout_s;
  if (spec.kind == "run") {
    std::vector<std::string> argv = BenchCommand(spec, context, {"run"});
    argv.insert(argv.end(), {"--target", spec.target, "--record-json"});
    if (context.agent.host.emulated) argv.push_back("--emulate");
    return {WithEmulator(context, argv), timeout > 0 ? timeout : kRunTimeout};
  }
  if (spec.kind == "baseline") {
    // A peer's time under an emulator would be the emulator's.
    if (context.agent.host.emulated) throw Error("baseline job: this agent is emulated");
    std::vector<std::string> argv = BenchCommand(spec, context, {"baseline"});
    argv.insert(argv.end(), {"--framework", Required(spec, "framework"), "--variant",
                             Required(spec, "variant"), "--target", spec.target, "--record-json"});
    if (spec.options.contains("python"))
      argv.insert(argv.end(), {"--python", Required(spec, "python")});
    // The peer stops itself a minute before the child's hard limit, so that
    // a run too slow to finish fails saying so instead of being killed.
    const double limit = timeout > 0 ? timeout : kRunTimeout;
    argv.insert(argv.end(),
                {"--time-limit", std::to_string(std::max(1.0, limit - kBaselineStopMargin))});
    return {argv, limit};
  }
  if (spec.kind == "microbench" && spec.options.value("suite", "") == "dispatch") {
    // Timings under an emulator would be the emulator's.
    if (context.agent.host.emulated) throw Error("microbench dispatch job: this agent is emulated");
    std::vector<std::string> argv = BenchCommand(spec, context, {"microbench", "dispatch"});
    argv.insert(argv.end(), {"--target", spec.target, "--record-json"});
    return {argv, timeout > 0 ? timeout : kMicrobenchTimeout};
  }
  if (spec.kind == "microbench") {
    std::vector<std::string> argv = {BenchmarkBinary(spec, context), "--benchmark_format=json"};
    if (spec.options.contains("filter")) {
      argv.push_back("--benchmark_filter=" + spec.options["filter"].get<std::string>());
    }
    if (spec.options.contains("min_time")) {
      argv.push_back("--benchmark_min_time=" +
                     std::to_string(spec.options["min_time"].get<double>()));
    }
    return {WithEmulator(context, argv), timeout > 0 ? timeout : kMicrobenchTimeout};
  }
  if (spec.kind == "tune") {
    // Timings under an emulator would be the emulator's.
    if (context.agent.host.emulated) throw Error("tune job: this agent is emulated");
    if (!spec.options.contains("site") || !spec.options.contains("tune")) {
      throw Error("tune job: options 'site' and 'tune' are required");
    }
    const protocol::Json& tune = spec.options["tune"];
    std::vector<std::string> argv = {
        context.nimble_bench, "tune",      "--site-json",  spec.options["site"].dump(),
        "--target",           spec.target, "--record-json"};
    for (const char* name : {"trials", "top_k", "representative", "batch"}) {
      if (tune.contains(name)) {
        argv.push_back(std::string("--") + (name == std::string("top_k") ? "top-k" : name));
        argv.push_back(tune[name].dump());
      }
    }
    if (tune.contains("extents")) {
      argv.push_back("--extents");
      for (const protocol::Json& extent : tune["extents"]) argv.push_back(extent.dump());
    }
    if (spec.options.contains("task_timeout")) {
      argv.insert(argv.end(), {"--task-timeout", spec.options["task_timeout"].dump()});
    }
    return {argv, timeout > 0 ? timeout : kTuneTimeout};
  }
  if (spec.kind == "probe") {
    return {WithEmulator(context, {context.nimble_bench, "probe"}),
            timeout > 0 ? timeout : kProbeTimeout};
  }
  throw Error("this agent does not run '" + spec.kind + "' jobs");
}

protocol::Json ResultOf(const protocol::JobSpec& spec, const std::string& output,
                        const JobContext& context) {
  try {
    if (spec.kind == "run" || spec.kind == "baseline" ||
        (spec.kind == "microbench" && spec.options.value("suite", "") == "dispatch")) {
      // Checked here so a malformed record fails the attempt on the agent.
      return {{"run", bench::ToJson(bench::RunRecordFromJson(protocol::Json::parse(output)))}};
    }
    if (spec.kind == "microbench") return MicrobenchRecord(spec, output, context);
    if (spec.kind == "tune") return protocol::Json::parse(output);
    return {{"host", protocol::Json::parse(output)}};
  } catch (const protocol::Json::exception& error) {
    throw Error(spec.kind + " job printed something else than its JSON: " + error.what());
  }
}

}  // namespace nimble::agent
