// The matrix-product sites of a compiled module and the timing of kernels on
// them, shared by the kernel choice at compile time (kernel_tuning.h) and
// the template tuner (template_tuning.h).
//
// A site is a primitive whose body is one nn.dense or nn.batch_matmul call on
// float32 (fusion leaves matrix products on their own), or an nn.dense on a
// bfloat16 weight (transform/bf16_weights.h). Its shape class is
// its input shapes with `?` kept; the paper's tuning measures a `?` at
// several extents, every `?` of a site at the same one (one symbolic
// variable, as in BERT, where each `?` is the sequence length).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nimble/compiler/backend/vm_compiler.h"
#include "nimble/compiler/ir/module.h"
#include "nimble/vm/kernel.h"

namespace nimble::backend {

// The extent a `?` dimension is measured at when no other is asked for: a
// typical sentence (the paper's representative size).
inline constexpr int64_t kDynamicExtent = 64;

// A `?` in a MatMulSite's shape class.
inline constexpr int64_t kSymbolicDim = -1;

// Where a site's weight is when the program calls it. A program whose
// constants outgrow the caches reads every product's weight from memory
// (BERT-base, 440 MB); a small one finds its weights cached (an LSTM's 6
// MB, read every token). Candidates rank differently in the two: at BERT's
// 54 x 768 x 768 output projection the built-in kernel leads the packed one
// by 3-6% with the weight cached and trails it by 11-16% with the weight read
// from memory (2 threads of a Zen 4 EPYC), so a site is measured as its
// program will run it.
enum class WeightResidence { kCached, kMemory };

// Constant bytes above which a program's weights count as read from memory:
// more than a 2-core share of any host here keeps cached. A fixed figure,
// since hypervisors report last-level caches of 320-480 MB on hosts whose
// measured bandwidth falls to memory speed beyond 16-64 MB.
inline constexpr size_t kCachedWeightBytes = size_t{64} << 20;

// Constant bytes above which a product that runs once per run of its
// program (not in a loop or recursion, transform/repeated_code.h) reads its
// weight from memory: the rest of the run streams the other weights through
// the cores' L2 (1-2 MiB each here) before the next run comes back to it. An
// LSTM's input projection of layer 2 ([tokens, 512] x [512, 2048], once per
// sentence, in a 15 MB program) ran 15% of LSTM-2's time in the generated
// kernel that measured level with the packed one in cache; measured from
// memory, the packed one leads by 17-20% and LSTM-2 runs 11-19% faster.
inline constexpr size_t kOncePerRunCachedWeightBytes = size_t{2} << 20;

// Where a product's weight is when it runs, in a program holding
// `constant_bytes` of named constants (ir::ConstantBytes): kMemory above
// kCachedWeightBytes, or above kOncePerRunCachedWeightBytes for a product
// that is not `repeated`.
WeightResidence ResidenceOfWeights(size_t constant_bytes, bool repeated);

struct MatMulSite {
  const ir::FunctionNode* primitive = nullptr;
  std::string op;
  Attrs attrs;
  std::vector<Shape> input_class;  // kSymbolicDim for `?`
  // float32, but for nn.dense's weight under --precision bf16 (bfloat16).
  std::vector<DataType> input_dtypes;
  Shape output_class;
  // input_class and output_class with each `?` at the measured extent.
  std::vector<Shape> inputs;
  Shape output;

  WeightResidence weights = WeightResidence::kCached;
  // Whether the site may run more than once per run (transform/repeated_code.h).
  bool repeated = true;

  bool dynamic() const;
  // The input that is the product's weight: nn.dense's second; of
  // nn.batch_matmul's, the one without a `?` when the other has one; -1
  // when neither can be told apart.
  int weight_input() const;
  // Whether the weight is bfloat16: only the runtime's bf16 products
  // (nn.dense, nn.dense.dnnl) run such a site.
  bool bf16_weight() const;
  // The site measured with every `?` at `extent`.
  MatMulSite AtExtent(int64_t extent) const;
  // A call's multiply-adds and the bytes of its operands and result at the
  // measured shapes (`inputs`, `output`), saturated at INT64_MAX.
  int64_t MultiplyAdds() const;
  int64_t Bytes() const;
};

// Every site of `module` (after the pipeline), `?` at kDynamicExtent, in
// order of appearance, weights cached, `repeated` set.
std::vector<MatMulSite> CollectMatMulSites(const ir::IRModule& module);

// "(?,768), (768,768)": shapes as the tuning databases key them.
std::string ShapesText(const std::vector<Shape>& shapes);
// "units=768, out_dtype=": a call's attributes as the databases key them.
std::string AttrsText(const Attrs& attrs);

// The revision of the kernels whose times the tuning databases hold. Bump it
// when a kernel's speed changes (a runtime product kernel rewritten, code
// generation that changes generated kernels): the databases key their
// records by it (HostKey), so a new revision measures again instead of
// choosing by times that an older build recorded. KernelsRevisionTest
// (tests/compiler/backend/kernel_tuning_test.cc) holds the generated
// products' loop IR of this revision, hashed, and fails when it changes.
// r2: the outer-product form of generated products read as [k, n]
// (te/matmul_schedule.h), which r1's times put behind the built-in kernel.
inline constexpr int kKernelsRevision = 2;

// The host as the tuning databases know it: architecture, CPU model and
// the kernels' revision, e.g. "x86_64 Intel(R) Xeon(R) Processor, kernels r2".
std::string HostKey();

// Whether `target` ("intel", "arm") is the CPU this process runs on.
bool IsHostTarget(const std::string& target);

// A runtime kernel as the tuning databases name its times: a library's
// (oneDNN, OpenBLAS) as "KERNEL on the pool", since it runs one slice per
// pool thread; builds that ran the libraries on their own threads recorded
// them under the bare name, and such times must never be read back.
std::string MeasuredKernelName(const std::string& kernel);
// The runtime kernel a name from MeasuredKernelName stands for; nullopt for
// a library's bare name (a time from before the pool).
std::optional<std::string> KernelOfMeasuredName(const std::string& name);

// Seconds per call of each of `runs`: the least over five rounds, each round
// timing every run once in turn (a batch of calls sized to at least 2 ms;
// the caller has made a first call, which paid any set-up). Taking turns
// spreads a burst of load from other tenants of a shared host over all the
// candidates instead of charging it to whichever ran then.
std::vector<double> InterleavedSecondsPerCall(const std::vector<std::function<void()>>& runs);

// Kernels on tensors of a site's measured shapes and dtypes. Each call is
// followed by the same piece of parallel work on the runtime's thread pool,
// as in a model, where other kernels run between two calls of a site: a
// kernel that leaves threads busy after it returns would slow that work, and
// the cost would be its. (The libraries run on the pool, one slice per
// thread, so today none does; see nimble/vm/kernels/dense.cc.) A site whose
// weights are read from memory takes a different copy of its weight each
// call, from copies that together outgrow the caches.
class SiteMeasurer {
 public:
  // `module` holds the sites (after the pipeline); generated kernels are
  // compiled for options.target.
  SiteMeasurer(const ir::IRModule& module, const CompileOptions& options);
  ~SiteMeasurer();

  // A call of `kernel` (kGeneratedKernel with the template knobs `matmul`,
  // or a runtime kernel name) on `site` and the pool work, after one first
  // call here that pays any set-up. Throws nimble::Error when it cannot run
  // there (not in this build, as oneDNN may not be; not for these shapes;
  // knobs out of range), naming why.
  std::function<void()> Prepare(const MatMulSite& site, const std::string& kernel,
                                const te::MatMulKnobs& matmul);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace nimble::backend
