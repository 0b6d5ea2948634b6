#include "nimble/compiler/backend/matmul_sites.h"

#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <string_view>

#include "nimble/compiler/backend/primitive_kernels.h"
#include "nimble/compiler/ir/constant_bytes.h"
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/te/parallel_chunk.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/transform/repeated_code.h"
#include "nimble/vm/dlpack.h"
#include "nimble/vm/error.h"
#include "nimble/vm/thread_pool.h"

#if NIMBLE_HAVE_CODEGEN
#include "nimble/compiler/codegen/link.h"
#include "nimble/compiler/codegen/llvm_codegen.h"
#include "nimble/compiler/codegen/target.h"
#include "nimble/vm/kernel_library.h"
#endif

namespace nimble::backend {
namespace {

// The shape class of a float32 tensor type, or of one of dtype `also`.
std::optional<Shape> ShapeClass(const ir::Type& type, DataType also = DataType::Float32()) {
  if (!type || type->kind != ir::TypeKind::kTensor) return std::nullopt;
  const auto& tensor = static_cast<const ir::TensorTypeNode&>(*type);
  if (tensor.dtype != DataType::Float32() && tensor.dtype != also) return std::nullopt;
  Shape shape;
  for (const ir::Dim& dim : tensor.shape)
    shape.push_back(dim.is_any() ? kSymbolicDim : dim.value());
  return shape;
}

Shape AtExtent(const Shape& shape_class, int64_t extent) {
  Shape shape = shape_class;
  for (int64_t& dim : shape) {
    if (dim == kSymbolicDim) dim = extent;
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
  MatMulSite site;
  site.primitive = primitive;
  site.op = op;
  site.attrs = call->attrs;
  // The kernel takes the call's arguments, which are the primitive's
  // parameters in order when fusion left the op alone.
  if (call->args.size() != primitive->params.size()) return std::nullopt;
  for (size_t i = 0; i < call->args.size(); ++i) {
    if (call->args[i].get() != primitive->params[i].get()) return std::nullopt;
    const ir::Var& param = primitive->params[i];
    const ir::Type& type = param->checked_type ? param->checked_type : param->type_annotation;
    const bool weight = op == "nn.dense" && i == 1;
    std::optional<Shape> shape =
        ShapeClass(type, weight ? DataType::BFloat16() : DataType::Float32());
    if (!shape) return std::nullopt;
    site.input_class.push_back(std::move(*shape));
    site.input_dtypes.push_back(static_cast<const ir::TensorTypeNode&>(*type).dtype);
  }
  std::optional<Shape> output = ShapeClass(body->checked_type);
  if (!output) return std::nullopt;
  site.output_class = std::move(*output);
  return site.AtExtent(kDynamicExtent);
}

// The sites of one global's function.
class SiteCollector : public ir::ExprVisitor {
 public:
  SiteCollector(bool global_repeated, std::vector<MatMulSite>& sites)
      : global_repeated_(global_repeated), sites_(sites) {}

  void VisitFunction(const ir::FunctionNode* function) override {
    if (transform::HasFlag(function, transform::kPrimitiveAttr)) {
      if (std::optional<MatMulSite> site = AsMatMulSite(function)) {
        site->repeated = global_repeated_ || depth_ > 1;
        sites_.push_back(*site);
      }
      return;
    }
    ++depth_;
    ExprVisitor::VisitFunction(function);
    --depth_;
  }

 private:
  bool global_repeated_;
  std::vector<MatMulSite>& sites_;
  int depth_ = 0;  // functions entered: 1 in the global's own body
};

// What the kernels after a matrix product do, run after each measured call:
// an elementwise pass over as many elements as the product writes, split
// over the runtime's pool as a generated kernel splits it. Its size follows
// the product's, because a fixed sweep larger than a small product's output
// (it was 256 KB) evicted weights that stay cached between calls in the
// program, and made every kernel of the LSTM's W_hh or the Tree-LSTM's node
// product measure alike, 1.3 to 4 times slower than they run there.
class PoolWork {
 public:
  explicit PoolWork(int64_t size) : data_(static_cast<size_t>(size), 0.5f) {}

  void operator()() {
    ThreadPool::Global().ParallelFor(0, static_cast<int64_t>(data_.size()), te::kParallelGrain,
                                     [this](int64_t begin, int64_t end) {
                                       for (int64_t i = begin; i < end; ++i)
                                         data_[i] = data_[i] * 0.5f + 0.25f;
                                     });
  }

 private:
  std::vector<float> data_;
};

// The bytes of weight copies a site read from memory cycles through: more
// than the largest last-level cache measured here (32 MB), so that each
// call's weight comes from memory, as in the program.
constexpr size_t kMemoryWeightCycleBytes = size_t{64} << 20;

Tensor Filled(const Shape& shape, DataType dtype = DataType::Float32()) {
  Tensor tensor = TensorNode::Empty(shape, dtype);
  for (int64_t i = 0; i < tensor->numel(); ++i) tensor->SetFromDouble(i, 0.5);
  return tensor;
}

}  // namespace

WeightResidence ResidenceOfWeights(size_t constant_bytes, bool repeated) {
  const size_t cached = repeated ? kCachedWeightBytes : kOncePerRunCachedWeightBytes;
  return constant_bytes > cached ? WeightResidence::kMemory : WeightResidence::kCached;
}

int MatMulSite::weight_input() const {
  if (op == "nn.dense" || op == "nn.contrib_dense_pack") return 1;
  if (input_class.size() != 2) return -1;
  const auto has_symbolic = [&](int input) {
    const Shape& shape = input_class[input];
    return std::find(shape.begin(), shape.end(), kSymbolicDim) != shape.end();
  };
  if (has_symbolic(0) == has_symbolic(1)) return -1;
  return has_symbolic(0) ? 1 : 0;
}

bool MatMulSite::bf16_weight() const {
  const int weight = weight_input();
  return weight >= 0 && static_cast<size_t>(weight) < input_dtypes.size() &&
         input_dtypes[weight] == DataType::BFloat16();
}

bool MatMulSite::dynamic() const {
  for (const Shape& shape : input_class) {
    if (std::find(shape.begin(), shape.end(), kSymbolicDim) != shape.end()) return true;
  }
  return false;
}

int64_t MatMulSite::MultiplyAdds() const {
  // The reduction runs along the first operand's last axis, or its middle
  // one for a batch product with transpose_a.
  const Shape& data = inputs.front();
  const bool transposed = op == "nn.batch_matmul" && attrs.GetBool("transpose_a");
  const int64_t reduced = data[transposed ? data.size() - 2 : data.size() - 1];
  int64_t product = 0;
  if (__builtin_mul_overflow(ShapeNumel(output), reduced, &product)) {
    return std::numeric_limits<int64_t>::max();
  }
  return product;
}

int64_t MatMulSite::Bytes() const {
  int64_t total = ShapeBytes(output, DataType::Float32());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DataType dtype = i < input_dtypes.size() ? input_dtypes[i] : DataType::Float32();
    if (__builtin_add_overflow(total, ShapeBytes(inputs[i], dtype), &total)) {
      return std::numeric_limits<int64_t>::max();
    }
  }
  return total;
}

MatMulSite MatMulSite::AtExtent(int64_t extent) const {
  MatMulSite site = *this;
  site.inputs.clear();
  for (const Shape& shape : input_class) site.inputs.push_back(backend::AtExtent(shape, extent));
  site.output = backend::AtExtent(output_class, extent);
  return site;
}

std::vector<MatMulSite> CollectMatMulSites(const ir::IRModule& module) {
  const transform::RepeatedCode repeated(module);
  std::vector<MatMulSite> sites;
  for (const ir::IRModuleNode::Definition& definition : module->functions()) {
    SiteCollector(repeated.Global(definition.global->name), sites).VisitExpr(definition.function);
  }
  return sites;
}

namespace {

constexpr std::string_view kOnThePool = " on the pool";

bool IsLibraryKernel(std::string_view kernel) {
  return kernel.ends_with(".dnnl") || kernel.ends_with(".openblas");
}

}  // namespace

std::string MeasuredKernelName(const std::string& kernel) {
  return IsLibraryKernel(kernel) ? kernel + std::string(kOnThePool) : kernel;
}

std::optional<std::string> KernelOfMeasuredName(const std::string& name) {
  if (name.ends_with(kOnThePool)) {
    const std::string kernel = name.substr(0, name.size() - kOnThePool.size());
    if (IsLibraryKernel(kernel)) return kernel;
    return std::nullopt;
  }
  if (IsLibraryKernel(name)) return std::nullopt;
  return name;
}

std::string ShapesText(const std::vector<Shape>& shapes) {
  std::string text;
  for (const Shape& shape : shapes) {
    text += text.empty() ? "(" : ", (";
    for (size_t d = 0; d < shape.size(); ++d) {
      text += (d ? "," : "") + (shape[d] == kSymbolicDim ? "?" : std::to_string(shape[d]));
    }
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
  return key + ", kernels r" + std::to_string(kKernelsRevision);
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

struct SiteMeasurer::State {
  State(const ir::IRModule& module, const CompileOptions& options)
      : module(module), options(options) {}

  const ir::IRModule& module;
  const CompileOptions& options;
  // A site's generated kernel per template configuration, compiled once
  // and called at every extent.
  std::map<std::pair<const ir::FunctionNode*, std::string>, vm::Kernel> generated;
  // Weights to cycle through when they are read from memory, by element
  // count, shared by every candidate of a site (a packed weight has the
  // plain one's elements): copies side by side in one buffer.
  struct WeightCopies {
    Tensor buffer;
    size_t count = 0;
    size_t stride = 0;  // bytes from one copy to the next, whole cache lines
    void* copy(size_t index) const {
      return static_cast<std::byte*>(buffer->raw_data()) + index % count * stride;
    }
  };
  std::map<int64_t, std::shared_ptr<WeightCopies>> memory_weights;

  std::shared_ptr<WeightCopies> MemoryWeights(const Shape& shape) {
    std::shared_ptr<WeightCopies>& copies = memory_weights[ShapeNumel(shape)];
    if (!copies) {
      copies = std::make_shared<WeightCopies>();
      copies->stride = (static_cast<size_t>(ShapeNumel(shape)) * sizeof(float) + 63) / 64 * 64;
      copies->count = std::max<size_t>(2, kMemoryWeightCycleBytes / copies->stride);
      copies->buffer =
          Filled({static_cast<int64_t>(copies->count * copies->stride / sizeof(float))});
    }
    return copies;
  }
#if NIMBLE_HAVE_CODEGEN
  std::vector<std::unique_ptr<vm::KernelLibrary>> libraries;
#endif

  vm::Kernel GeneratedKernel(const MatMulSite& site, const te::MatMulKnobs& matmul) {
    te::CheckMatMulKnobs(matmul);
    const auto key = std::make_pair(site.primitive, te::MatMulKnobsText(matmul));
    if (const auto found = generated.find(key); found != generated.end()) return found->second;
#if NIMBLE_HAVE_CODEGEN
    const PrimitiveKernels kernels = GenerateKernels(
        module, [&](const ir::FunctionNode& primitive) { return &primitive == site.primitive; },
        [&](const ir::FunctionNode&) { return matmul; });
    const backend::GeneratedKernel* kernel = kernels.Find(site.primitive);
    if (!kernel) throw Error(site.op + ": no generated kernel");
    const codegen::CodegenTarget target = codegen::CodegenTargetFor(options.target);
    libraries.push_back(std::make_unique<vm::KernelLibrary>(
        codegen::LinkSharedLibrary(codegen::EmitObject(kernels.funcs(), target), target)));
    std::string missing;
    const NimbleKernelFunc func = libraries.back()->Find(kernel->name, &missing);
    if (!func) throw Error(missing);
    return generated[key] = vm::Kernel{kernel->name, func, nullptr};
#else
    throw Error(site.op + ": code generation is not in this build");
#endif
  }
};

SiteMeasurer::SiteMeasurer(const ir::IRModule& module, const CompileOptions& options)
    : state_(std::make_unique<State>(module, options)) {}

SiteMeasurer::~SiteMeasurer() = default;

std::function<void()> SiteMeasurer::Prepare(const MatMulSite& site, const std::string& kernel,
                                            const te::MatMulKnobs& matmul) {
  auto tensors = std::make_shared<std::vector<Tensor>>();
  for (size_t i = 0; i < site.inputs.size(); ++i) {
    tensors->push_back(Filled(
        site.inputs[i], i < site.input_dtypes.size() ? site.input_dtypes[i] : DataType::Float32()));
  }
  tensors->push_back(Filled(site.output));
  auto views = std::make_shared<std::vector<DLTensor>>();
  for (const Tensor& tensor : *tensors) views->push_back(AsDLTensor(tensor));
  // With its weight read from memory, the weight argument moves to the next
  // copy before each call.
  const int weight = site.weights == WeightResidence::kMemory ? site.weight_input() : -1;
  const auto weight_copies = weight >= 0 ? state_->MemoryWeights(site.inputs[weight]) : nullptr;
  auto next_copy = std::make_shared<size_t>(0);
  auto args = std::make_shared<std::vector<DLTensor*>>();
  for (DLTensor& view : *views) args->push_back(&view);
  const vm::Kernel bound = kernel == kGeneratedKernel
                               ? state_->GeneratedKernel(site, matmul)
                               : vm::KernelRegistry::Global().Bind(kernel, site.attrs);
  const auto call = [bound, tensors, views, args, weight, weight_copies, next_copy] {
    if (weight_copies) (*views)[weight].data = weight_copies->copy((*next_copy)++);
    bound(args->data(), static_cast<int32_t>(args->size()));
  };
  call();
  auto pool_work = std::make_shared<PoolWork>(ShapeNumel(site.output));
  return [pool_work, call] {
    call();
    (*pool_work)();
  };
}

}  // namespace nimble::backend
