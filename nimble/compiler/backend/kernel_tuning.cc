#include "nimble/compiler/backend/kernel_tuning.h"

#include <sqlite3.h>
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/backend/primitive_kernels.h"
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/transform/pack_dense_weights.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/dlpack.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernel.h"
#include "nimble/vm/thread_pool.h"

#if NIMBLE_HAVE_CODEGEN
#include "nimble/compiler/codegen/link.h"
#include "nimble/compiler/codegen/llvm_codegen.h"
#include "nimble/compiler/codegen/target.h"
#include "nimble/vm/kernel_library.h"
#endif

namespace nimble::backend {
namespace {

// A primitive whose body is one nn.dense or nn.batch_matmul call on float32.
struct MatMulSite {
  const ir::FunctionNode* primitive;
  std::string op;
  Attrs attrs;
  std::vector<Shape> inputs;  // `?` at kDynamicExtent
  Shape output;
  bool dynamic = false;  // some input dimension is `?`
};

std::optional<Shape> MeasuredShape(const ir::Type& type, bool* dynamic = nullptr) {
  if (!type || type->kind != ir::TypeKind::kTensor) return std::nullopt;
  const auto& tensor = static_cast<const ir::TensorTypeNode&>(*type);
  if (tensor.dtype != DataType::Float32()) return std::nullopt;
  Shape shape;
  for (const ir::Dim& dim : tensor.shape) {
    shape.push_back(dim.is_any() ? kDynamicExtent : dim.value());
    if (dynamic && dim.is_any()) *dynamic = true;
  }
  return shape;
}

std::optional<MatMulSite> AsMatMulSite(const ir::FunctionNode* primitive) {
  const ir::Expr& body = primitive->body;
  if (body->kind != ir::ExprKind::kCall) return std::nullopt;
  const auto* call = static_cast<const ir::CallNode*>(body.get());
  if (call->callee->kind != ir::ExprKind::kOp) return std::nullopt;
  const std::string& op = static_cast<const ir::OpNode*>(call->callee.get())->name;
  if (op != "nn.dense" && op != "nn.batch_matmul") return std::nullopt;
  MatMulSite site{primitive, op, call->attrs, {}, {}};
  // The kernel takes the call's arguments, which are the primitive's
  // parameters in order when fusion left the op alone.
  if (call->args.size() != primitive->params.size()) return std::nullopt;
  for (size_t i = 0; i < call->args.size(); ++i) {
    if (call->args[i].get() != primitive->params[i].get()) return std::nullopt;
    const ir::Var& param = primitive->params[i];
    std::optional<Shape> shape = MeasuredShape(
        param->checked_type ? param->checked_type : param->type_annotation, &site.dynamic);
    if (!shape) return std::nullopt;
    site.inputs.push_back(std::move(*shape));
  }
  std::optional<Shape> output = MeasuredShape(body->checked_type);
  if (!output) return std::nullopt;
  site.output = std::move(*output);
  return site;
}

class PrimitiveCollector : public ir::ExprVisitor {
 public:
  void VisitFunction(const ir::FunctionNode* function) override {
    if (transform::HasFlag(function, transform::kPrimitiveAttr)) {
      if (std::optional<MatMulSite> site = AsMatMulSite(function)) sites.push_back(*site);
      return;
    }
    ExprVisitor::VisitFunction(function);
  }
  std::vector<MatMulSite> sites;
};

std::string ShapesText(const std::vector<Shape>& shapes) {
  std::string text;
  for (const Shape& shape : shapes) {
    text += text.empty() ? "(" : ", (";
    for (size_t d = 0; d < shape.size(); ++d) text += (d ? "," : "") + std::to_string(shape[d]);
    text += ")";
  }
  return text;
}

std::string AttrsText(const Attrs& attrs) {
  std::string text;
  for (const auto& [name, value] : attrs.entries()) {
    text += (text.empty() ? "" : ", ") + name + "=" + AttrValueToString(value);
  }
  return text;
}

// The host as the database knows it: architecture and CPU model.
std::string HostKey() {
  utsname names{};
  std::string key = uname(&names) == 0 ? names.machine : "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.starts_with("model name") || line.starts_with("CPU part")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) key += " " + line.substr(colon + 2);
      break;
    }
  }
  return key;
}

bool IsHostTarget(const std::string& target) {
#if defined(__x86_64__)
  return target == "intel";
#elif defined(__aarch64__)
  return target == "arm";
#else
  return false;
#endif
}

// Seconds per call of each of `runs`: the least over five rounds, each round
// timing every run once in turn (a batch of calls sized to at least 2 ms; the
// caller has made a first call, which paid any set-up: oneDNN creates its
// primitive).
// Taking turns spreads a burst of load from other tenants of a shared host
// over all the candidates instead of charging it to whichever ran then.
std::vector<double> InterleavedSecondsPerCall(const std::vector<std::function<void()>>& runs) {
  using Clock = std::chrono::steady_clock;
  const auto batch = [](const std::function<void()>& run, int calls) {
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < calls; ++i) run();
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  std::vector<int> calls(runs.size(), 1);
  std::vector<double> best(runs.size());
  for (size_t r = 0; r < runs.size(); ++r) {
    double seconds = batch(runs[r], calls[r]);
    while (seconds < 2e-3 && calls[r] < (1 << 16)) {
      calls[r] *= 2;
      seconds = batch(runs[r], calls[r]);
    }
    best[r] = seconds / calls[r];
  }
  for (int round = 1; round < 5; ++round) {
    for (size_t r = 0; r < runs.size(); ++r) {
      best[r] = std::min(best[r], batch(runs[r], calls[r]) / calls[r]);
    }
  }
  return best;
}

// The measurements table of a tuning database file.
class TuningDatabase {
 public:
  explicit TuningDatabase(const std::string& path) : path_(path) {
    if (path.empty()) return;
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ignored;
    if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
    sqlite3* db = nullptr;
    const int status = sqlite3_open(path.c_str(), &db);
    db_.reset(db);
    if (status != SQLITE_OK) Fail("cannot open it");
    sqlite3_busy_timeout(db, 5000);
    Execute(
        "CREATE TABLE IF NOT EXISTS kernel_measurements ("
        " host TEXT NOT NULL, threads INTEGER NOT NULL, kernel TEXT NOT NULL,"
        " attrs TEXT NOT NULL, shapes TEXT NOT NULL, seconds_per_call REAL NOT NULL,"
        " measured_at TEXT NOT NULL,"
        " PRIMARY KEY (host, threads, kernel, attrs, shapes))");
  }

  std::optional<double> Find(const std::string& host, int threads, const std::string& kernel,
                             const std::string& attrs, const std::string& shapes) {
    if (!db_) return std::nullopt;
    Statement statement = Prepare(
        "SELECT seconds_per_call FROM kernel_measurements WHERE host = ?1 AND threads = ?2"
        " AND kernel = ?3 AND attrs = ?4 AND shapes = ?5");
    Bind(statement.get(), host, threads, kernel, attrs, shapes);
    const int status = sqlite3_step(statement.get());
    if (status == SQLITE_ROW) return sqlite3_column_double(statement.get(), 0);
    if (status != SQLITE_DONE) Fail("cannot read it");
    return std::nullopt;
  }

  void Record(const std::string& host, int threads, const std::string& kernel,
              const std::string& attrs, const std::string& shapes, double seconds) {
    if (!db_) return;
    Statement statement = Prepare(
        "INSERT OR REPLACE INTO kernel_measurements VALUES (?1, ?2, ?3, ?4, ?5, ?6,"
        " strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))");
    Bind(statement.get(), host, threads, kernel, attrs, shapes);
    sqlite3_bind_double(statement.get(), 6, seconds);
    if (sqlite3_step(statement.get()) != SQLITE_DONE) Fail("cannot write it");
  }

 private:
  struct CloseDb {
    void operator()(sqlite3* db) const { sqlite3_close(db); }
  };
  struct Finalize {
    void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
  };
  using Statement = std::unique_ptr<sqlite3_stmt, Finalize>;

  [[noreturn]] void Fail(const std::string& what) const {
    const std::string reason = db_ ? sqlite3_errmsg(db_.get()) : "out of memory";
    throw Error("tuning database " + path_ + ": " + what + " (" + reason + ")");
  }

  void Execute(const char* sql) {
    if (sqlite3_exec(db_.get(), sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
      Fail("cannot create its table");
    }
  }

  Statement Prepare(const char* sql) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db_.get(), sql, -1, &statement, nullptr) != SQLITE_OK) {
      Fail("cannot query it");
    }
    return Statement(statement);
  }

  static void Bind(sqlite3_stmt* statement, const std::string& host, int threads,
                   const std::string& kernel, const std::string& attrs, const std::string& shapes) {
    sqlite3_bind_text(statement, 1, host.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(statement, 2, threads);
    sqlite3_bind_text(statement, 3, kernel.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(statement, 4, attrs.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(statement, 5, shapes.c_str(), -1, SQLITE_TRANSIENT);
  }

  std::string path_;
  std::unique_ptr<sqlite3, CloseDb> db_;
};

// Parallel elementwise work on the runtime's thread pool, about what the
// kernels after a matrix product do.
class PoolWork {
 public:
  void operator()() {
    ThreadPool::Global().ParallelFor(0, kSize, kSize / 8, [this](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) data_[i] = data_[i] * 0.5f + 0.25f;
    });
  }

 private:
  static constexpr int64_t kSize = int64_t{1} << 16;
  std::vector<float> data_ = std::vector<float>(kSize, 0.5f);
};

// Measures a site's candidates on float32 tensors of its shape class. Each
// call is timed together with the same piece of pool work after it: a
// library whose threads keep spinning after a call (OpenBLAS's, OpenMP's for
// oneDNN) slows what runs next on the same cores, and that cost is its.
class SiteMeasurer {
 public:
  SiteMeasurer(const ir::IRModule& module, const CompileOptions& options)
      : module_(module), options_(options) {}

  // A call of `kernel` on `site` followed by the pool work, on tensors of
  // the site's shapes, after one first call here that pays any set-up; null
  // when it cannot run there (not in this build, as oneDNN may not be, or
  // not for these shapes).
  std::function<void()> Prepare(const MatMulSite& site, const std::string& kernel) {
    auto tensors = std::make_shared<std::vector<Tensor>>();
    for (const Shape& shape : site.inputs) tensors->push_back(Filled(shape));
    tensors->push_back(Filled(site.output));
    auto views = std::make_shared<std::vector<DLTensor>>();
    for (const Tensor& tensor : *tensors) views->push_back(AsDLTensor(tensor));
    auto args = std::make_shared<std::vector<DLTensor*>>();
    for (DLTensor& view : *views) args->push_back(&view);
    try {
      const vm::Kernel bound = kernel == kGeneratedKernel
                                   ? GeneratedKernel(site)
                                   : vm::KernelRegistry::Global().Bind(kernel, site.attrs);
      bound(args->data(), static_cast<int32_t>(args->size()));
      return [this, bound, tensors, views, args] {
        bound(args->data(), static_cast<int32_t>(args->size()));
        pool_work_();
      };
    } catch (const Error&) {
      return nullptr;
    }
  }

 private:
  static Tensor Filled(const Shape& shape) {
    Tensor tensor = TensorNode::Empty(shape, DataType::Float32());
    std::fill_n(tensor->data<float>(), tensor->numel(), 0.5f);
    return tensor;
  }

  // The site's generated kernel, compiled and loaded on its own.
  vm::Kernel GeneratedKernel(const MatMulSite& site) {
#if NIMBLE_HAVE_CODEGEN
    const PrimitiveKernels kernels = GenerateKernels(
        module_, [&](const ir::FunctionNode& primitive) { return &primitive == site.primitive; },
        options_.matmul);
    const backend::GeneratedKernel* generated = kernels.Find(site.primitive);
    if (!generated) throw Error(site.op + ": no generated kernel");
    const codegen::CodegenTarget target = codegen::CodegenTargetFor(options_.target);
    libraries_.push_back(std::make_unique<vm::KernelLibrary>(
        codegen::LinkSharedLibrary(codegen::EmitObject(kernels.funcs(), target), target)));
    std::string missing;
    const NimbleKernelFunc func = libraries_.back()->Find(generated->name, &missing);
    if (!func) throw Error(missing);
    return vm::Kernel{generated->name, func, nullptr};
#else
    throw Error(site.op + ": code generation is not in this build");
#endif
  }

  const ir::IRModule& module_;
  const CompileOptions& options_;
  PoolWork pool_work_;
#if NIMBLE_HAVE_CODEGEN
  std::vector<std::unique_ptr<vm::KernelLibrary>> libraries_;
#endif
};

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

// At a site with a `?` dimension the libraries pay costs that a measurement
// at one length, called back to back, does not show: oneDNN builds a
// primitive per shape (milliseconds, then cached), so every new length pays
// it, and OpenBLAS's threads, asleep after the work between calls, must wake
// (the LSTM-2 projection, once per sentence: 1.1 ms in place against 0.18 ms
// for the built-in kernel, though it measured faster). So under auto only
// static sites weigh them; "library" keeps OpenBLAS at `?` sites.
// A kernel to time on a site.
using Candidate = std::pair<const MatMulSite*, std::string>;

std::vector<Candidate> Candidates(const MatMulSite& site, const std::string& choice) {
  std::vector<Candidate> candidates;
  if (choice == "auto") {
    if (NIMBLE_HAVE_CODEGEN) candidates.emplace_back(&site, kGeneratedKernel);
    candidates.emplace_back(&site, site.op);
    if (site.dynamic) return candidates;
  }
  if (!site.dynamic) candidates.emplace_back(&site, site.op + ".dnnl");
  candidates.emplace_back(&site, site.op + ".openblas");
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
        host_(HostKey()),
        threads_(ThreadPool::Global().num_threads()) {}

  // The fastest of `candidates`, each a kernel on a site. Those without a
  // recorded time are measured together, taking turns.
  Choice Fastest(const std::vector<Candidate>& candidates) {
    std::vector<std::optional<double>> seconds;
    std::vector<size_t> unmeasured;
    std::vector<std::function<void()>> runs;
    for (const auto& [site, kernel] : candidates) {
      seconds.push_back(database_.Find(host_, threads_, Key(*site, kernel), AttrsText(site->attrs),
                                       ShapesText(site->inputs)));
      if (!seconds.back())
        seconds.back() = ProcessMeasurements::Get().Find(ProcessKey(*site, kernel));
      if (seconds.back()) continue;
      if (std::function<void()> run = measurer_.Prepare(*site, kernel)) {
        unmeasured.push_back(seconds.size() - 1);
        runs.push_back(std::move(run));
      } else {
        seconds.back() = std::numeric_limits<double>::infinity();
      }
    }
    const std::vector<double> measured = InterleavedSecondsPerCall(runs);
    for (size_t i = 0; i < unmeasured.size(); ++i) seconds[unmeasured[i]] = measured[i];
    Choice best;
    for (size_t c = 0; c < candidates.size(); ++c) {
      const auto& [site, kernel] = candidates[c];
      database_.Record(host_, threads_, Key(*site, kernel), AttrsText(site->attrs),
                       ShapesText(site->inputs), *seconds[c]);
      ProcessMeasurements::Get().Record(ProcessKey(*site, kernel), *seconds[c]);
      if (*seconds[c] < best.seconds) best = {kernel, *seconds[c]};
    }
    return best;
  }

 private:
  // A generated kernel is measured per template configuration.
  std::string Key(const MatMulSite& site, const std::string& kernel) const {
    return kernel == kGeneratedKernel ? site.op + ".generated " + te::MatMulKnobsText(matmul_)
                                      : kernel;
  }
  std::string ProcessKey(const MatMulSite& site, const std::string& kernel) const {
    return std::to_string(threads_) + "|" + Key(site, kernel) + "|" + AttrsText(site.attrs) + "|" +
           ShapesText(site.inputs);
  }

  TuningDatabase database_;
  SiteMeasurer measurer_;
  te::MatMulKnobs matmul_;
  std::string host_;
  int threads_;
};

}  // namespace

KernelChoices ChooseMatMulKernels(const ir::IRModule& module, const CompileOptions& options) {
  KernelChoices choices;
  if ((options.kernels != "auto" && options.kernels != "library") ||
      !IsHostTarget(options.target)) {
    return choices;
  }
  PrimitiveCollector collector;
  for (const ir::IRModuleNode::Definition& definition : module->functions()) {
    collector.VisitExpr(definition.function);
  }
  if (collector.sites.empty()) return choices;
  SiteTimer timer(module, options);
  for (const MatMulSite& site : collector.sites) {
    const Choice best = timer.Fastest(Candidates(site, options.kernels));
    if (!best.kernel.empty()) choices.emplace(site.primitive, best.kernel);
  }
  return choices;
}

bool PackingDenseWins(const ir::TensorTypeNode& data, const ir::TensorTypeNode& weight,
                      const CompileOptions& options) {
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
  PrimitiveCollector collector;
  for (const ir::IRModuleNode::Definition& definition : module->functions()) {
    collector.VisitExpr(definition.function);
  }
  if (collector.sites.size() != 1) return false;
  const MatMulSite& plain = collector.sites.front();
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
