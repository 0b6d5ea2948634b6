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

// Fills in the runtime hooks of a generated library (kernel.h); other
// libraries have none.
void ConnectRuntimeHooks(void* handle) {
  if (auto* hooks = static_cast<NimbleRuntimeHooks*>(dlsym(handle, "nimble_runtime"))) {
    hooks->set_error = NimbleKernelSetError;
    hooks->parallel_for = ParallelForHook;
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

KernelLibrary::KernelLibrary(std::span<const std::byte> bytes) {
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
      ConnectRuntimeHooks(handle_);
      return;
    } else {
      memfd_reason = LoaderError();
    }
  }
  if (fd >= 0) close(fd);
  handle_ = LoadFromTempFile(bytes, memfd_reason);
  ConnectRuntimeHooks(handle_);
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
