#include "nimble/vm/kernel.h"

#include <utility>

#include "nimble/vm/error.h"

namespace {

// One slot per thread: kernels may run on several threads of a server at once.
thread_local std::string kernel_error;

}  // namespace

extern "C" void NimbleKernelSetError(const char* message) {
  kernel_error = message ? message : "";
}

namespace nimble::vm {

std::string TakeKernelError() {
  return std::exchange(kernel_error, std::string());
}

void Kernel::operator()(DLTensor* const* args, int32_t num_args) const {
  const int status = func(state.get(), args, num_args);
  if (status == 0) return;
  std::string message = TakeKernelError();
  if (message.empty()) message = "failed with status " + std::to_string(status);
  throw Error("kernel " + name + ": " + message);
}

const KernelRegistry& KernelRegistry::Global() {
  static const KernelRegistry registry = [] {
    KernelRegistry built_in;
    RegisterBuiltinKernels(built_in);
    return built_in;
  }();
  return registry;
}

void KernelRegistry::Register(const std::string& name, KernelFactory factory) {
  if (!factory) throw Error("kernel '" + name + "' registered without a factory");
  if (!factories_.emplace(name, std::move(factory)).second) {
    throw Error("kernel '" + name + "' registered twice");
  }
}

bool KernelRegistry::Contains(const std::string& name) const {
  return factories_.count(name) != 0;
}

Kernel KernelRegistry::Bind(const std::string& name, const Attrs& attrs) const {
  const auto found = factories_.find(name);
  if (found == factories_.end()) throw Error("unknown kernel '" + name + "'");
  Kernel kernel = found->second(attrs);
  if (!kernel.func) throw Error("kernel '" + name + "': its factory returned no function");
  if (kernel.name.empty()) kernel.name = name;
  return kernel;
}

std::vector<std::string> KernelRegistry::Names() const {
  std::vector<std::string> names;
  names.reserve(factories_.size());
  for (const auto& [name, factory] : factories_) names.push_back(name);
  return names;
}

}  // namespace nimble::vm
