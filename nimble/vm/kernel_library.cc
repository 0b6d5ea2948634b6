#include "nimble/vm/kernel_library.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "nimble/vm/error.h"

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
      return;
    } else {
      memfd_reason = LoaderError();
    }
  }
  if (fd >= 0) close(fd);
  handle_ = LoadFromTempFile(bytes, memfd_reason);
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
