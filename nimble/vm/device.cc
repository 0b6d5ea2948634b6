#include "nimble/vm/device.h"

#include <dlfcn.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "nimble/vm/cuda/cuda_device_api.h"
#include "nimble/vm/error.h"

#ifndef NIMBLE_CUDA_MODULE_PATH
#define NIMBLE_CUDA_MODULE_PATH nullptr
#endif

namespace nimble {
namespace {

class CpuDeviceAPI final : public DeviceAPI {
 public:
  void* Alloc(size_t bytes, size_t alignment) override {
    if (!std::has_single_bit(alignment)) {
      throw Error("alignment " + std::to_string(alignment) + " is not a power of two");
    }
    alignment = std::max(alignment, alignof(std::max_align_t));
    // aligned_alloc wants a non-zero multiple of the alignment.
    const size_t rounded = ((bytes == 0 ? 1 : bytes) + alignment - 1) / alignment * alignment;
    void* data = std::aligned_alloc(alignment, rounded);
    if (!data) {
      throw Error("out of memory: cannot allocate " + std::to_string(bytes) + " bytes on cpu(0)");
    }
    return data;
  }

  void Free(void* data) override { std::free(data); }

  void Copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t bytes) override {
    if (dst_device.type != DeviceType::kCPU || src_device.type != DeviceType::kCPU) {
      throw Error("the CPU cannot copy from " + src_device.ToString() + " to " +
                  dst_device.ToString());
    }
    if (bytes) std::memcpy(dst, src, bytes);
  }

  void Synchronize() override {}
};

// The CUDA module, loaded on first use; its APIs (or why each is missing) by
// device id. Failures are remembered: the CUDA runtime does not recover from
// them within a process either.
class CudaDevices {
 public:
  static CudaDevices& Global() {
    static CudaDevices* const devices = new CudaDevices();
    return *devices;
  }

  DeviceAPI* Get(int32_t id) {
    std::lock_guard lock(mutex_);
    if (!factory_) throw Error("no CUDA device: " + load_error_);
    auto [it, inserted] = apis_.try_emplace(id);
    if (inserted) {
      char error[512] = "";
      it->second.api = factory_(id, error, sizeof(error));
      it->second.error = error;
    }
    if (!it->second.api) throw Error("no CUDA device: " + it->second.error);
    return it->second.api;
  }

 private:
  struct Entry {
    DeviceAPI* api = nullptr;
    std::string error;
  };

  // NIMBLE_CUDA_MODULE names the module explicitly; otherwise the module of
  // this build tree, then the soname on the library search path.
  CudaDevices() {
    const char* build_path = NIMBLE_CUDA_MODULE_PATH;
    if (!build_path) {
      load_error_ = "nimble was built without CUDA support";
      return;
    }
    void* module = nullptr;
    if (const char* override_path = std::getenv("NIMBLE_CUDA_MODULE")) {
      module = Open(override_path);
    } else {
      module = Open(build_path);
      if (!module) module = Open(kCudaModuleName);
    }
    if (!module) return;
    factory_ = reinterpret_cast<NimbleCudaDeviceAPIFactory>(dlsym(module, kCudaFactorySymbol));
    if (!factory_) load_error_ = std::string("the CUDA module has no ") + kCudaFactorySymbol;
  }

  void* Open(const char* path) {
    void* module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!module) {
      if (!load_error_.empty()) load_error_ += "; ";
      load_error_ += std::string("cannot load the CUDA module ") + path + ": " + dlerror();
    }
    return module;
  }

  std::mutex mutex_;
  NimbleCudaDeviceAPIFactory factory_ = nullptr;
  std::string load_error_;
  std::map<int32_t, Entry> apis_;
};

}  // namespace

std::string DeviceTypeName(DeviceType type) {
  switch (type) {
    case DeviceType::kCPU:
      return "cpu";
    case DeviceType::kCUDA:
      return "cuda";
  }
  return "device" + std::to_string(static_cast<int32_t>(type));
}

std::string Device::ToString() const {
  return DeviceTypeName(type) + "(" + std::to_string(id) + ")";
}

DeviceAPI* DeviceAPI::Get(Device device) {
  switch (device.type) {
    case DeviceType::kCPU: {
      if (device.id != 0) throw Error("no device " + device.ToString() + ": the host is cpu(0)");
      static CpuDeviceAPI* const cpu = new CpuDeviceAPI();  // outlives static tensors
      return cpu;
    }
    case DeviceType::kCUDA:
      return CudaDevices::Global().Get(device.id);
  }
  throw Error("unsupported device type " + std::to_string(static_cast<int32_t>(device.type)));
}

}  // namespace nimble
