// The kernel library an executable embeds: a shared object for the host that
// exports one `extern "C"` NimbleKernelFunc per primitive, named after it.
// It is loaded straight from the executable's bytes (an anonymous memfd, or a
// temporary file where memfd is unavailable), so running a model needs no
// separate .so on disk, and it is unloaded when the VM goes away.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "nimble/vm/kernel.h"

namespace nimble::vm {

class KernelLibrary {
 public:
  // Loads the shared object in `bytes` and fills in its `nimble_runtime`
  // hooks when it has them (a generated library, kernel.h), the GPU ones with
  // `device_code` (which must outlive the library) when given; throws
  // nimble::Error with the loader's message when it is not a loadable library.
  explicit KernelLibrary(std::span<const std::byte> bytes, DeviceCode* device_code = nullptr);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary&) = delete;
  KernelLibrary& operator=(const KernelLibrary&) = delete;

  // The kernel exported as `symbol`, or null when the library has none
  // (`missing_reason` then receives the loader's message).
  NimbleKernelFunc Find(const std::string& symbol, std::string* missing_reason) const;

 private:
  void* handle_ = nullptr;
  int memfd_ = -1;  // kept open while loaded, so its /proc/self/fd name stays unique
};

}  // namespace nimble::vm
