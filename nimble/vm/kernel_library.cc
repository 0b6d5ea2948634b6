#include "nimble/vm/kernel_library.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "nimble/vm/error.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::vm {
namespace {

std::string LoaderError() {
  const char* message = dlerror();
  return message ? message : "unknown loader error";
}

// Writes all of `bytes` to `fd`; false (with errno set) on an I/O error.
bool WriteAll(int fd, std::span<const std::byte> bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t count = write(fd, bytes.data() + written, bytes.size() - written);
    if (count < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    written += static_cast<size_t>(count);
  }
  return true;
}

// NimbleRuntimeHooks::parallel_for. A failing chunk's message travels to the
// calling thread as the exception that stops the loop; no exception may
// unwind into generated code.
int32_t ParallelForHook(int64_t n, int64_t min_chunk,
                        int32_t (*body)(int64_t begin, int64_t end, void* closure), void* closure) {
  try {
    ThreadPool::Global().ParallelFor(0, n, min_chunk, [&](int64_t begin, int64_t end) {
      if (body(begin, end, closure) != 0) throw Error(TakeKernelError());
    });
    return 0;
  } catch (const std::exception& error) {
    NimbleKernelSetError(error.what());
    return 1;
  }
}

// Calls `action` on the DeviceCode behind a GPU hook, turning an exception
// into a recorded message and `failed`.
template <typename Result, typename Action>
Result OnDeviceCode(void* device_code, Result failed, const Action& action) {
  try {
    return action(*static_cast<DeviceCode*>(device_code));
  } catch (const std::exception& error) {
    NimbleKernelSetError(error.what());
    return failed;
  }
}

int32_t LaunchHook(void* device_code, const char* kernel, int64_t blocks, int32_t block_threads,
                   void** params) {
  return OnDeviceCode(device_code, 1, [&](DeviceCode& code) {
    code.Launch(kernel, blocks, block_threads, params);
    return 0;
  });
}

void* DeviceAllocHook(void* device_code, int64_t bytes) {
  return OnDeviceCode(device_code, static_cast<void*>(nullptr),
                      [&](DeviceCode& code) { return code.Alloc(bytes); });
}

void DeviceFreeHook(void* device_code, void* data) {
  OnDeviceCode(device_code, 0, [&](DeviceCode& code) {
    code.Free(data);
    return 0;
  });
}

// Fills in the runtime hooks of a generated library (kernel.h); other
// libraries have none. The GPU hooks only with GPU code to launch.
void ConnectRuntimeHooks(void* handle, DeviceCode* device_code) {
  if (auto* hooks = static_cast<NimbleRuntimeHooks*>(dlsym(handle, "nimble_runtime"))) {
    hooks->set_error = NimbleKernelSetError;
    hooks->parallel_for = ParallelForHook;
    if (device_code) {
      hooks->device_code = device_code;
      hooks->launch = LaunchHook;
      hooks->device_alloc = DeviceAllocHook;
      hooks->device_free = DeviceFreeHook;
    }
  }
}

std::string LoadFailure(std::span<const std::byte> bytes, const std::string& reason) {
  return "cannot load the executable's kernel library (" + std::to_string(bytes.size()) +
         " bytes): " + reason;
}

// The fallback where memfd or /proc is unavailable: a uniquely named
// temporary file, removed as soon as it is mapped.
void* LoadFromTempFile(std::span<const std::byte> bytes, const std::string& memfd_reason) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string path = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/nimble-kernels-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) {
    throw Error(LoadFailure(bytes, "memfd: " + memfd_reason + "; temporary file " + path + ": " +
                                       std::strerror(errno)));
  }
  const bool written = WriteAll(fd, bytes);
  const std::string write_error = written ? "" : std::strerror(errno);
  close(fd);
  void* handle = written ? dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  const std::string reason = written ? (handle ? "" : LoaderError()) : write_error;
  unlink(path.c_str());
  if (!handle) throw Error(LoadFailure(bytes, reason));
  return handle;
}

}  // namespace

KernelLibrary::KernelLibrary(std::span<const std::byte> bytes, DeviceCode* device_code) {
  if (bytes.empty()) throw Error(LoadFailure(bytes, "it is empty"));
  std::string memfd_reason;
  const int fd = memfd_create("nimble-kernels", MFD_CLOEXEC);
  if (fd < 0 || !WriteAll(fd, bytes)) {
    memfd_reason = std::strerror(errno);
  } else {
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    // The loader identifies libraries by path: one still loaded under this fd
    // number (an earlier library that could not be unloaded) would be handed
    // back instead of ours.
    if (void* stale = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
      dlclose(stale);
      memfd_reason = "a library is already loaded as " + path;
    } else if ((handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))) {
      memfd_ = fd;
      ConnectRuntimeHooks(handle_, device_code);
      return;
    } else {
      memfd_reason = LoaderError();
    }
  }
  if (fd >= 0) close(fd);
  handle_ = LoadFromTempFile(bytes, memfd_reason);
  ConnectRuntimeHooks(handle_, device_code);
}

KernelLibrary::~KernelLibrary() {
  dlclose(handle_);
  if (memfd_ >= 0) close(memfd_);
}

NimbleKernelFunc KernelLibrary::Find(const std::string& symbol, std::string* missing_reason) const {
  dlerror();
  void* address = dlsym(handle_, symbol.c_str());
  if (!address) {
    *missing_reason = LoaderError();
    return nullptr;
  }
  return reinterpret_cast<NimbleKernelFunc>(address);
}

}  // namespace nimble::vm
