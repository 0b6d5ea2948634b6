// A directory of this process's own under the system's temporary directory,
// created empty and removed with everything in it when the object goes: for
// files a benchmark writes only to read back or hand to a child process.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace nimble::bench {

class ScratchDir {
 public:
  // `prefix` names the user; the process id keeps concurrent runs apart.
  explicit ScratchDir(const std::string& prefix)
      : path_(std::filesystem::temp_directory_path() / (prefix + std::to_string(getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace nimble::bench
