#include "harness/reports/report.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "harness/bench/dispatch_figures.h"
#include "harness/bench/fixed_text.h"
#include "nimble/compiler/support/sqlite_util.h"

namespace nimble::reports {

namespace {

using Json = nlohmann::json;

// The systems as the paper names them, and ours.
constexpr const char* kNimble = "Nimble";
constexpr const char* kPyTorch = "PyTorch";
constexpr const char* kMxnet = "MXNet";
constexpr const char* kTensorFlow = "TensorFlow";
constexpr const char* kTfFold = "TF Fold";

constexpr const char* kTargets[] = {"intel", "nvidia", "arm"};

// The paper's Tables 1-3 (µs/token, §6.2): {system, layers, target} -> figure.
struct PaperLatency {
  const char* model;
  const char* system;
  int layers;  // LSTM only; 0 otherwise
  const char* target;
  double us_per_token;
};
constexpr PaperLatency kPaperLatencies[] = {
    {"lstm", kNimble, 1, "intel", 47.8},       {"lstm", kNimble, 1, "nvidia", 93.0},
    {"lstm", kNimble, 1, "arm", 182.2},        {"lstm", kNimble, 2, "intel", 97.2},
    {"lstm", kNimble, 2, "nvidia", 150.9},     {"lstm", kNimble, 2, "arm", 686.4},
    {"lstm", kPyTorch, 1, "intel", 79.3},      {"lstm", kPyTorch, 1, "nvidia", 110.3},
    {"lstm", kPyTorch, 1, "arm", 1729.5},      {"lstm", kPyTorch, 2, "intel", 158.1},
    {"lstm", kPyTorch, 2, "nvidia", 214.6},    {"lstm", kPyTorch, 2, "arm", 3378.1},
    {"lstm", kMxnet, 1, "intel", 212.9},       {"lstm", kMxnet, 1, "nvidia", 135.7},
    {"lstm", kMxnet, 1, "arm", 3695.9},        {"lstm", kMxnet, 2, "intel", 401.7},
    {"lstm", kMxnet, 2, "nvidia", 223.8},      {"lstm", kMxnet, 2, "arm", 7768.0},
    {"lstm", kTensorFlow, 1, "intel", 301.4},  {"lstm", kTensorFlow, 1, "nvidia", 304.7},
    {"lstm", kTensorFlow, 1, "arm", 978.3},    {"lstm", kTensorFlow, 2, "intel", 687.3},
    {"lstm", kTensorFlow, 2, "nvidia", 406.9}, {"lstm", kTensorFlow, 2, "arm", 2192.8},
    {"treelstm", kNimble, 0, "intel", 40.3},   {"treelstm", kNimble, 0, "arm", 86.3},
    {"treelstm", kPyTorch, 0, "intel", 701.6}, {"treelstm", kPyTorch, 0, "arm", 1717.1},
    {"treelstm", kTfFold, 0, "intel", 209.9},  {"bert", kNimble, 0, "intel", 307.0},
    {"bert", kNimble, 0, "nvidia", 95.2},      {"bert", kNimble, 0, "arm", 2862.6},
    {"bert", kPyTorch, 0, "intel", 479.5},     {"bert", kPyTorch, 0, "nvidia", 220.4},
    {"bert", kPyTorch, 0, "arm", 11851.2},     {"bert", kMxnet, 0, "intel", 455.8},
    {"bert", kMxnet, 0, "nvidia", 152.9},      {"bert", kMxnet, 0, "arm", 8628.0},
    {"bert", kTensorFlow, 0, "intel", 768.7},  {"bert", kTensorFlow, 0, "nvidia", 125.2},
    {"bert", kTensorFlow, 0, "arm", 2995.4},
};

// The paper's Table 4: BERT at sequence length 128, ms per inference.
struct PaperOverhead {
  const char* target;
  double tvm_static_ms, nimble_ms, kernel_ms, other_ms;
};
constexpr PaperOverhead kPaperOverheads[] = {{"intel", 19.38, 24.32, 21.06, 3.26},
                                             {"arm", 223.50, 237.41, 228.59, 8.82},
                                             {"nvidia", 5.58, 5.86, 5.60, 0.26}};
constexpr int64_t kPaperOverheadLength = 128;

// §6.3: memory planning cut BERT's buffer allocations by 47% on Intel.
constexpr double kPaperAllocationCut = 0.47;

std::optional<double> PaperFigure(const std::string& model, const std::string& system, int layers,
                                  const std::string& target) {
  for (const PaperLatency& entry : kPaperLatencies) {
    if (model == entry.model && system == entry.system && layers == entry.layers &&
        target == entry.target)
      return entry.us_per_token;
  }
  return std::nullopt;
}

using bench::Fixed;

std::string PaperOverheadText(const PaperOverhead& entry) {
  return Fixed(entry.tvm_static_ms, 2) + " / " + Fixed(entry.nimble_ms, 2) + " / " +
         Fixed(entry.kernel_ms, 2) + " / " + Fixed(entry.other_ms, 2);
}

// A chart's group: one model configuration on one target, measured on
// `where` (a host, or "paper"). `layers` is 0 for models without layers.
std::string ChartGroup(int layers, const std::string& target, const std::string& where) {
  const std::string model =
      layers == 0 ? ""
                  : "LSTM " + std::to_string(layers) + " layer" + (layers == 1 ? "" : "s") + ", ";
  return model + target + ", " + where;
}

Json Configuration(const bench::RunInfo& info) {
  Json configuration = Json::parse(info.configuration, nullptr, false);
  return configuration.is_object() ? configuration : Json::object();
}

int64_t Integer(const Json& configuration, const char* name) {
  const auto found = configuration.find(name);
  return found != configuration.end() && found->is_number_integer() ? found->get<int64_t>() : 0;
}

std::string Text(const Json& configuration, const char* name) {
  const auto found = configuration.find(name);
  return found != configuration.end() && found->is_string() ? found->get<std::string>() : "";
}

// Whether a run's model has the paper's sizes, so its figure may stand
// beside the paper's.
bool PaperSized(const bench::RunInfo& info) {
  const Json c = Configuration(info);
  if (info.model == "lstm")
    return Integer(c, "input_size") == 300 && Integer(c, "hidden_size") == 512;
  if (info.model == "treelstm")
    return Integer(c, "input_size") == 300 && Integer(c, "hidden_size") == 150;
  return Integer(c, "hidden_size") == 768 && Integer(c, "layers") == 12 &&
         Integer(c, "heads") == 12 && Integer(c, "ffn_size") == 3072;
}

// The data's file or directory name (the full path is in the run) and the
// threads.
std::string DataAndThreads(const bench::RunInfo& info) {
  return std::filesystem::path(info.dataset).filename().string() + ", " +
         std::to_string(info.threads) + " thread" + (info.threads == 1 ? "" : "s");
}

std::string Sizes(const bench::RunInfo& info) {
  const Json c = Configuration(info);
  std::string sizes;
  if (info.model == "bert") {
    sizes = std::to_string(Integer(c, "layers")) + " layers, hidden " +
            std::to_string(Integer(c, "hidden_size")) + ", " + std::to_string(Integer(c, "heads")) +
            " heads";
  } else {
    sizes =
        std::to_string(Integer(c, "input_size")) + "/" + std::to_string(Integer(c, "hidden_size"));
  }
  return sizes + ", " + DataAndThreads(info);
}

// The system as the paper would name it (for its figure), and as the row
// shows it (with the variant or a non-default compile).
std::string PaperSystem(const bench::RunInfo& info) {
  if (info.framework == "nimble") return kNimble;
  if (info.framework == "pytorch") return kPyTorch;
  return "";  // ONNX Runtime is not in the paper
}

std::string SystemLabel(const bench::RunInfo& info) {
  const Json c = Configuration(info);
  if (info.framework == "pytorch") {
    // PASSIVE is how peer_bench.py runs a peer unless told otherwise.
    const std::string policy = Text(c, "omp_wait_policy");
    return "PyTorch (" + Text(c, "variant") +
           (policy.empty() || policy == "PASSIVE" ? "" : ", OMP_WAIT_POLICY=" + policy) + ")";
  }
  if (info.framework == "onnxruntime") return "ONNX Runtime";
  std::string label = kNimble;
  std::string options;
  if (!Text(c, "kernels").empty()) options += "kernels " + Text(c, "kernels");
  if (c.contains("fusion") && c["fusion"] == false)
    options += (options.empty() ? "" : ", ") + std::string("no fusion");
  if (c.contains("bounded_length") && c["bounded_length"] == false)
    options += (options.empty() ? "" : ", ") + std::string("unbounded length");
  // Such a run also timed the static program (Table 4): a row apart from
  // the plain run of the same model.
  if (Integer(c, "static_seq_len") > 0)
    options += (options.empty() ? "" : ", ") + std::string("with static L=") +
               std::to_string(Integer(c, "static_seq_len"));
  return options.empty() ? label : label + " (" + options + ")";
}

std::string HostLabel(const bench::RunInfo& info) {
  return info.host + " (" + info.cpu_model + ")";
}

// The model, and the compile options when they are not the default.
std::string ModelLabel(const bench::RunInfo& info) {
  const std::string system = SystemLabel(info);
  const std::string nimble_options = std::string(kNimble) + " (";
  if (system == kNimble) return info.model;
  // "Nimble (no fusion)" -> "lstm (no fusion)"
  if (system.starts_with(nimble_options))
    return info.model + system.substr(std::string(kNimble).size());
  return info.model + " (" + system + ")";
}

// A run of `nimble-bench run --count-instructions`: an instruction count,
// no times.
bool Counted(const bench::RunInfo& info) {
  return Configuration(info).contains("counted_by");
}

int Layers(const bench::RunInfo& info) {
  return info.model == "lstm" ? static_cast<int>(Integer(Configuration(info), "layers")) : 0;
}

class ReportBuilder {
 public:
  explicit ReportBuilder(const std::vector<SelectedRun>& runs) : runs_(runs) {}

  Cell Figure(const SelectedRun& run, double value, int decimals) {
    Use(run);
    Cell cell;
    cell.text = Fixed(value, decimals);
    cell.value = value;
    cell.run = run.id;
    return cell;
  }
  static Cell Plain(std::string text) {
    Cell cell;
    cell.text = std::move(text);
    return cell;
  }
  static Cell Gap(std::string text) {
    Cell cell = Plain(std::move(text));
    cell.gap = true;
    return cell;
  }
  static Cell Ratio(std::optional<double> numerator, std::optional<double> denominator) {
    if (!numerator || !denominator || *denominator == 0) return Plain("");
    return Plain(Fixed(*numerator / *denominator, 2) + "x");
  }
  Cell RunLink(const SelectedRun& run) {
    Use(run);
    Cell cell = Plain("run " + std::to_string(run.id));
    cell.run = run.id;
    return cell;
  }

  Table Latency(const std::string& model, const std::string& id, const std::string& title,
                const std::vector<std::string>& paper_systems);
  Table Overhead();
  Table Memory();
  Table Instructions();
  Table DispatchFigure();
  Table OnnxImport();

  std::vector<Provenance> Sources() const {
    std::vector<Provenance> sources;
    for (const SelectedRun& run : runs_) {
      if (!used_.contains(run.id)) continue;
      const bench::RunInfo& info = run.record.info;
      sources.push_back({run.id, info.commit_id, info.host, info.cpu_model, run.finished_at});
    }
    return sources;
  }

 private:
  void Use(const SelectedRun& run) { used_.insert(run.id); }

  // The Nimble run a peer's run is compared with: same model sizes, data,
  // threads, target and host.
  const SelectedRun* NimbleTwin(const SelectedRun& peer) const {
    const bench::RunInfo& p = peer.record.info;
    for (const SelectedRun& run : runs_) {
      const bench::RunInfo& n = run.record.info;
      if (n.framework == "nimble" && SystemLabel(n) == kNimble && n.model == p.model &&
          Sizes(n) == Sizes(p) && Layers(n) == Layers(p) && n.target == p.target &&
          n.host == p.host && !n.emulated && !Counted(n))
        return &run;
    }
    return nullptr;
  }

  const std::vector<SelectedRun>& runs_;
  std::set<int64_t> used_;
};

Table ReportBuilder::Latency(const std::string& model, const std::string& id,
                             const std::string& title,
                             const std::vector<std::string>& paper_systems) {
  const bool lstm = model == "lstm";
  Table table;
  table.id = id;
  table.title = title;
  table.caption =
      "µs per token (total time over the dataset / its tokens, batch 1). \"ours / paper\" "
      "compares with the paper's figure for the same system and target, given only for the "
      "paper's model sizes; \"Nimble's speed-up\" is the peer's time over Nimble's on the same "
      "host, model and threads. Emulated runs are correctness runs and show no latency.";
  table.header = {"System",   "Target", "Host",         "Model, data, threads",
                  "µs/token", "Paper",  "Ours / paper", "Nimble's speed-up",
                  "Run"};
  if (lstm) table.header.insert(table.header.begin() + 1, "Layers");
  table.chart_unit = "µs/token";
  std::set<std::tuple<std::string, int, std::string>> measured;  // paper system, layers, target
  for (const SelectedRun& run : runs_) {
    const bench::RunInfo& info = run.record.info;
    if (info.model != model || Counted(info)) continue;
    const int layers = Layers(info);
    const std::string paper_system = PaperSystem(info);
    std::optional<double> paper;
    if (PaperSized(info) && !paper_system.empty())
      paper = PaperFigure(model, paper_system, layers, info.target);
    const bench::Measurement* us = run.Find("us_per_token");
    std::vector<Cell> row = {Plain(SystemLabel(info)), Plain(info.target), Plain(HostLabel(info)),
                             Plain(Sizes(info))};
    if (lstm) row.insert(row.begin() + 1, Plain(std::to_string(layers)));
    const std::string group = ChartGroup(layers, info.target, info.host);
    if (info.emulated) {
      row.push_back(Gap("emulated (" + info.emulator + "): correctness only"));
    } else if (us == nullptr) {
      row.push_back(Gap("not recorded"));
    } else {
      row.push_back(Figure(run, us->value, 1));
      table.chart.push_back({group, SystemLabel(info), us->value, false});
      if (paper) table.chart.push_back({group, "paper: " + paper_system, *paper, true});
      if (!paper_system.empty() && PaperSized(info))
        measured.insert({paper_system, layers, info.target});
    }
    row.push_back(paper ? Plain(Fixed(*paper, 1)) : Plain(""));
    std::optional<double> ours;
    if (us != nullptr && !info.emulated) ours = us->value;
    row.push_back(Ratio(ours, paper));
    const SelectedRun* twin = info.framework == "nimble" ? nullptr : NimbleTwin(run);
    const bench::Measurement* twin_us = twin ? twin->Find("us_per_token") : nullptr;
    row.push_back(twin_us ? Ratio(ours, twin_us->value) : Plain(""));
    row.push_back(RunLink(run));
    table.rows.push_back(std::move(row));
  }
  // The paper's figures that no run here measured: shown, marked as such.
  for (const std::string& system : paper_systems) {
    for (int layers : lstm ? std::vector<int>{1, 2} : std::vector<int>{0}) {
      for (const char* target : kTargets) {
        const std::optional<double> paper = PaperFigure(model, system, layers, target);
        if (!paper || measured.contains({system, layers, target})) continue;
        std::vector<Cell> row = {Plain(system), Plain(target), Plain(""), Plain("paper's sizes")};
        if (lstm) row.insert(row.begin() + 1, Plain(std::to_string(layers)));
        row.push_back(
            Gap(system == kNimble || system == kPyTorch ? "no data yet" : "not measured here"));
        row.push_back(Plain(Fixed(*paper, 1)));
        row.insert(row.end(), {Plain(""), Plain(""), Plain("")});
        table.rows.push_back(std::move(row));
        if (system == kNimble) {
          table.chart.push_back({ChartGroup(layers, target, "paper"),
                                 std::string("paper: ") + kNimble, *paper, true});
        }
      }
    }
  }
  return table;
}

Table ReportBuilder::Overhead() {
  Table table;
  table.id = "table4";
  table.title = "Table 4: the cost of dynamism, BERT at one length";
  table.caption =
      "ms per inference at one sequence length (nimble-bench run --model bert --static-seq-len L): "
      "the dynamic program against the same model compiled at the static length L (the paper "
      "compares with TVM's static runtime), and the dynamic program's time inside model kernels "
      "against everything else the VM does. Dynamic / static is the median ratio over passes that "
      "ran the two programs in turn. Shape functions count as \"others\", as in the paper. "
      "The paper's figures are at L = 128.";
  table.header = {"Target",
                  "Host",
                  "Model, data, threads",
                  "L",
                  "Static (ms)",
                  "Dynamic (ms)",
                  "Kernels (ms)",
                  "Others (ms)",
                  "Dynamic / static",
                  "Paper: static / dynamic / kernels / others",
                  "Run"};
  for (const SelectedRun& run : runs_) {
    const bench::RunInfo& info = run.record.info;
    const int64_t length = Integer(Configuration(info), "static_seq_len");
    if (info.model != "bert" || info.framework != "nimble" || length == 0) continue;
    std::vector<Cell> row = {Plain(info.target), Plain(HostLabel(info)), Plain(Sizes(info)),
                             Plain(std::to_string(length))};
    for (const char* name :
         {"fixed_len_static_us_per_token", "fixed_len_dynamic_us_per_token",
          "fixed_len_dynamic_kernel_us_per_token", "fixed_len_dynamic_other_us_per_token"}) {
      const bench::Measurement* figure = run.Find(name);
      if (info.emulated) {
        row.push_back(Gap("emulated"));
      } else if (figure == nullptr) {
        row.push_back(Gap("not recorded"));
      } else {
        row.push_back(Figure(run, figure->value * static_cast<double>(length) / 1000, 2));
      }
    }
    const bench::Measurement* ratio = run.Find("fixed_len_dynamic_over_static");
    row.push_back(info.emulated ? Gap("emulated")
                  : ratio       ? Figure(run, ratio->value, 3)
                                : Gap("not recorded"));
    std::string paper;
    for (const PaperOverhead& entry : kPaperOverheads) {
      if (entry.target == info.target && length == kPaperOverheadLength && PaperSized(info)) {
        paper = PaperOverheadText(entry);
      }
    }
    row.push_back(Plain(paper));
    row.push_back(RunLink(run));
    table.rows.push_back(std::move(row));
  }
  for (const PaperOverhead& entry : kPaperOverheads) {
    table.rows.push_back({Plain(entry.target), Plain(""), Plain("paper's BERT-base"),
                          Plain(std::to_string(kPaperOverheadLength)), Gap("paper only"),
                          Gap("paper only"), Gap("paper only"), Gap("paper only"),
                          Gap("paper only"), Plain(PaperOverheadText(entry)), Plain("")});
  }
  return table;
}

Table ReportBuilder::Memory() {
  Table table;
  table.id = "memory";
  table.title = "Memory planning: allocations and peak memory";
  table.caption =
      "Storage allocations with and without the memory planning pass: written in the compiled "
      "program, and executed per sentence; the peak is the model's own working set in the CPU "
      "pool during a profiled pass (weights and inputs, live before it, are reported apart). "
      "The paper reports 47% fewer buffer allocations for BERT on Intel.";
  table.header = {"Model",
                  "Target",
                  "Host",
                  "Model, data, threads",
                  "Written: planned / unplanned",
                  "Executed per sentence: planned",
                  "unplanned",
                  "Fewer",
                  "Peak MB: planned",
                  "unplanned",
                  "Weights MB",
                  "Run"};
  const auto megabytes = [](double bytes) { return bytes / (1024.0 * 1024.0); };
  for (const SelectedRun& run : runs_) {
    const bench::RunInfo& info = run.record.info;
    if (info.framework != "nimble") continue;
    const bench::Measurement* written_planned = run.Find("allocations_written_planned");
    const bench::Measurement* written_unplanned = run.Find("allocations_written_unplanned");
    const bench::Measurement* planned = run.Find("alloc_storage_per_sentence_planned");
    const bench::Measurement* unplanned = run.Find("alloc_storage_per_sentence_unplanned");
    if (!planned || !unplanned) continue;
    std::vector<Cell> row = {Plain(ModelLabel(info)), Plain(info.target), Plain(HostLabel(info)),
                             Plain(Sizes(info))};
    row.push_back(
        written_planned && written_unplanned
            ? Plain(Fixed(written_planned->value, 0) + " / " + Fixed(written_unplanned->value, 0))
            : Gap("not recorded"));
    row.push_back(Figure(run, planned->value, 1));
    row.push_back(Figure(run, unplanned->value, 1));
    row.push_back(
        unplanned->value > 0
            ? Plain(Fixed(100 * (1 - planned->value / unplanned->value), 0) + "%" +
                    (info.model == "bert" ? " (paper " + Fixed(100 * kPaperAllocationCut, 0) + "%)"
                                          : ""))
            : Plain(""));
    for (const char* name : {"peak_bytes_planned", "peak_bytes_unplanned", "weight_bytes"}) {
      const bench::Measurement* figure = run.Find(name);
      row.push_back(figure ? Figure(run, megabytes(figure->value), 2) : Gap("not recorded"));
    }
    row.push_back(RunLink(run));
    table.rows.push_back(std::move(row));
  }
  return table;
}

Table ReportBuilder::Instructions() {
  Table table;
  table.id = "instructions";
  table.title = "Instruction counts";
  table.caption =
      "Instructions executed by one pass over the samples, on one thread, counted by Valgrind's "
      "callgrind (`nimble-bench run --count-instructions`): unlike times, they do not move with "
      "the host's load, and CI's gate holds them. Under callgrind the kernels are compiled for "
      "the CPU Valgrind presents. Not in the paper.";
  table.header = {"Model",     "Target", "Host",         "Model, data, threads",
                  "Sentences", "Tokens", "Instructions", "Per token",
                  "Run"};
  for (const SelectedRun& run : runs_) {
    const bench::RunInfo& info = run.record.info;
    const bench::Measurement* instructions = run.Find("cpu_instructions");
    const bench::Measurement* per_token = run.Find("cpu_instructions_per_token");
    if (!Counted(info) || !instructions || !per_token) continue;
    std::vector<Cell> row = {Plain(ModelLabel(info)), Plain(info.target), Plain(HostLabel(info)),
                             Plain(Sizes(info))};
    for (const char* name : {"sentences", "tokens"}) {
      const bench::Measurement* count = run.Find(name);
      row.push_back(count ? Plain(Fixed(count->value, 0)) : Gap("not recorded"));
    }
    row.push_back(Figure(run, instructions->value, 0));
    row.push_back(Figure(run, per_token->value, 0));
    row.push_back(RunLink(run));
    table.rows.push_back(std::move(row));
  }
  return table;
}

Table ReportBuilder::OnnxImport() {
  Table table;
  table.id = "onnx";
  table.title = "ONNX import: an exported model against the native builder";
  table.caption =
      "A model exported from PyTorch to ONNX, run through the importer (nimble-bench run --onnx M "
      "--against-native), and the native builder's BERT of the same sizes on the same sentences, "
      "the two programs in turn pass by pass; ONNX / native is the median pass ratio. Bounds are "
      "the --dim-bound options. Not in the paper.";
  table.header = {"Model file",      "Target",        "Host",
                  "Data, threads",   "Bounds",        "ONNX µs/token",
                  "Native µs/token", "ONNX / native", "Run"};
  for (const SelectedRun& run : runs_) {
    const bench::RunInfo& info = run.record.info;
    if (info.model != "onnx" || Counted(info)) continue;
    const Json configuration = Configuration(info);
    std::string bounds;
    if (const auto found = configuration.find("dim_bounds");
        found != configuration.end() && found->is_object()) {
      for (const auto& [name, bound] : found->items()) {
        bounds += (bounds.empty() ? "" : ", ") + name + " <= " + bound.dump();
      }
    }
    std::vector<Cell> row = {
        Plain(std::filesystem::path(Text(configuration, "onnx")).filename().string()),
        Plain(info.target), Plain(HostLabel(info)), Plain(DataAndThreads(info)),
        Plain(bounds.empty() ? "none" : bounds)};
    for (const auto& [name, decimals] :
         {std::pair{"against_native_onnx_us_per_token", 1},
          std::pair{"against_native_native_us_per_token", 1}, std::pair{"onnx_over_native", 3}}) {
      const bench::Measurement* figure = run.Find(name);
      row.push_back(info.emulated ? Gap("emulated")
                    : figure      ? Figure(run, figure->value, decimals)
                                  : Gap("not measured (--against-native)"));
    }
    row.push_back(RunLink(run));
    table.rows.push_back(std::move(row));
  }
  return table;
}

Table ReportBuilder::DispatchFigure() {
  Table table;
  table.id = "figure3";
  table.title = "Figure 3: symbolic codegen, dispatch/k";
  table.caption =
      "Latency of generated dense kernels with a symbolic row count (the sequence length), "
      "relative to the kernel compiled for each length (static codegen): the mean over the "
      "lengths measured (`nimble-bench microbench dispatch`, by default 121 to 128, every residue "
      "mod 8), the worst length in brackets. dispatch/k keeps k kernel copies chosen by the "
      "length mod k; dispatch/1 is one kernel whose boundary rows are checked one at a time. "
      "With tiles of fewer than k rows, dispatch/k is already full dispatch. The paper (ARM, "
      "three BERT dense layers) finds full dispatch as fast as static codegen, and up to 42%, "
      "104% and 45% slower with fewer kernels.";
  constexpr int kDegrees[] = {8, 4, 2, 1};
  table.header = {"Shape", "Target", "Host", "Threads", "Static (µs)"};
  for (int degree : kDegrees) table.header.push_back("dispatch/" + std::to_string(degree));
  table.header.push_back("Run");
  table.chart_unit = "× static";
  for (const SelectedRun& run : runs_) {
    const bench::RunInfo& info = run.record.info;
    if (info.kind != "microbench" || info.model != bench::kDispatchMicrobench) continue;
    const Json shapes = Configuration(info).value("shapes", Json::array());
    for (const Json& shape : shapes) {
      if (!shape.is_array() || shape.size() != 2 || !shape[0].is_number_integer() ||
          !shape[1].is_number_integer())
        continue;
      const int64_t in = shape[0].get<int64_t>(), out = shape[1].get<int64_t>();
      const std::string name = bench::DenseShapeName(in, out);
      std::vector<Cell> row = {Plain(name), Plain(info.target), Plain(HostLabel(info)),
                               Plain(std::to_string(info.threads))};
      const bench::Measurement* base = run.Find(bench::DispatchFigureName(in, out, 0, "us"));
      row.push_back(base ? Figure(run, base->value, 1) : Gap("not recorded"));
      for (int degree : kDegrees) {
        const bench::Measurement* mean =
            run.Find(bench::DispatchFigureName(in, out, degree, "relative"));
        const bench::Measurement* worst =
            run.Find(bench::DispatchFigureName(in, out, degree, "worst_relative"));
        if (mean == nullptr) {
          row.push_back(Gap("not measured"));
          continue;
        }
        Cell cell = Figure(run, mean->value, 3);
        if (worst) cell.text += " (" + Fixed(worst->value, 2) + ")";
        row.push_back(cell);
        table.chart.push_back({name + ", " + info.target + ", " + info.host,
                               "dispatch/" + std::to_string(degree), mean->value, false});
      }
      row.push_back(RunLink(run));
      table.rows.push_back(std::move(row));
    }
  }
  if (table.rows.empty()) {
    table.caption += " No data yet: results.db holds no run of `nimble-bench microbench dispatch`.";
  }
  return table;
}

}  // namespace

Report BuildReport(const std::vector<SelectedRun>& runs, const std::string& database,
                   const std::string& filter) {
  ReportBuilder builder(runs);
  Report report;
  report.database = database;
  report.filter = filter;
  report.generated_at = sqlite::NowUtc();
  report.tables.push_back(builder.Latency("lstm", "table1", "Table 1: LSTM, µs/token",
                                          {kNimble, kPyTorch, kMxnet, kTensorFlow}));
  report.tables.push_back(builder.Latency("treelstm", "table2", "Table 2: Tree-LSTM, µs/token",
                                          {kNimble, kPyTorch, kTfFold}));
  report.tables.push_back(builder.Latency("bert", "table3", "Table 3: BERT, µs/token",
                                          {kNimble, kPyTorch, kMxnet, kTensorFlow}));
  report.tables.push_back(builder.Overhead());
  report.tables.push_back(builder.Memory());
  report.tables.push_back(builder.DispatchFigure());
  report.tables.push_back(builder.Instructions());
  report.tables.push_back(builder.OnnxImport());
  report.sources = builder.Sources();
  return report;
}

}  // namespace nimble::reports
