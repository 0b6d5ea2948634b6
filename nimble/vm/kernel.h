// The one calling convention of all kernels, generated or library: an array
// of DLPack tensors, inputs first and then the pre-allocated outputs
// (destination passing), and their count. A kernel returns 0, or non-zero
// after recording a message with NimbleKernelSetError.
//
// Kernels that need attributes (an axis, a dtype) are bound to them once,
// when an executable is loaded: a factory turns the attributes into the
// kernel's `state`, which is passed back on every call.
#pragma once

#include <dlpack/dlpack.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nimble/vm/attrs.h"
#include "nimble/vm/device.h"

extern "C" {
typedef int (*NimbleKernelFunc)(void* state, DLTensor* const* args, int32_t num_args);
// Records the error message of the failing kernel on this thread.
void NimbleKernelSetError(const char* message);

// The runtime services that generated kernel libraries (nimble/compiler/
// codegen) call. Such a library defines one zero-initialised
// `NimbleRuntimeHooks nimble_runtime`, which KernelLibrary fills right after
// loading it: the library then needs no symbol of the runtime, only libc and
// libm. Both hooks are safe to call from any thread.
struct NimbleRuntimeHooks {
  // NimbleKernelSetError.
  void (*set_error)(const char* message);
  // Calls body(begin, end, closure) over disjoint chunks of at least
  // `min_chunk` iterations covering [0, n), on the runtime's thread pool;
  // returns non-zero, with the message of a failing chunk recorded on the
  // calling thread, when a chunk returned non-zero.
  int32_t (*parallel_for)(int64_t n, int64_t min_chunk,
                          int32_t (*body)(int64_t begin, int64_t end, void* closure),
                          void* closure);
  // The GPU code that the library's GPU kernels launch (a nimble::DeviceCode),
  // or null when none is loaded; the three hooks below take it first and
  // return non-zero (or null) with a message recorded on failure.
  void* device_code;
  int32_t (*launch)(void* device_code, const char* kernel, int64_t blocks, int32_t block_threads,
                    void** params);
  void* (*device_alloc)(void* device_code, int64_t bytes);
  void (*device_free)(void* device_code, void* data);
};
}

namespace nimble::vm {

struct Kernel {
  std::string name;
  NimbleKernelFunc func = nullptr;
  std::shared_ptr<void> state;  // owned by the kernel; may be null
  // The device whose memory the kernel reads and writes. The VM refuses to
  // pass it a tensor that lives elsewhere: a CPU kernel dereferencing a GPU
  // pointer would read garbage or crash.
  DeviceType device = DeviceType::kCPU;

  // Calls the kernel; throws nimble::Error "kernel NAME: message" on failure.
  void operator()(DLTensor* const* args, int32_t num_args) const;
};

// Turns a primitive's attributes into a bound kernel; throws nimble::Error
// when the attributes are invalid for it.
using KernelFactory = std::function<Kernel(const Attrs& attrs)>;

// The runtime's built-in kernels by name. Registration happens on first use
// of Global(), by the kernel families of nimble/vm/kernels.
class KernelRegistry {
 public:
  static const KernelRegistry& Global();

  void Register(const std::string& name, KernelFactory factory);
  bool Contains(const std::string& name) const;
  // Throws nimble::Error "unknown kernel 'x'" when absent.
  Kernel Bind(const std::string& name, const Attrs& attrs) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, KernelFactory> factories_;
};

// Registers the runtime's built-in kernel families (nimble/vm/kernels);
// Global() calls it once.
void RegisterBuiltinKernels(KernelRegistry& registry);

// The message recorded by the last failing kernel on this thread, cleared.
std::string TakeKernelError();

}  // namespace nimble::vm
