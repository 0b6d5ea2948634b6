#include "harness/bench/emulation.h"

#include <elf.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string_view>

#include "nimble/vm/error.h"

extern char** environ;

namespace nimble::bench {
namespace {

constexpr std::string_view kQemu = "qemu-aarch64";
constexpr std::string_view kEmulatorVariable = "NIMBLE_EMULATOR=";
constexpr char kHowToGetThem[] =
    "run scripts/build-arm.sh as root (it installs qemu-user and the aarch64 cross toolchain, "
    "then builds build-arm/)";

bool IsExecutableFile(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
}

// The first executable file `name` in the directories of PATH, or "".
std::string FindOnPath(std::string_view name) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "";
  while (!dirs.empty()) {
    const size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    dirs = colon == std::string_view::npos ? "" : dirs.substr(colon + 1);
    // POSIX: an empty entry is the current directory.
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + std::string(name);
    if (IsExecutableFile(candidate)) return candidate;
  }
  return "";
}

// Whether `path` is a 64-bit little-endian ELF file for AArch64: qemu's own
// message for anything else ("Invalid ELF image") does not say what to fix.
bool IsAarch64Elf(const std::string& path) {
  Elf64_Ehdr header{};
  std::ifstream file(path, std::ios::binary);
  if (!file.read(reinterpret_cast<char*>(&header), sizeof(header))) return false;
  return std::memcmp(header.e_ident, ELFMAG, SELFMAG) == 0 &&
         header.e_ident[EI_CLASS] == ELFCLASS64 && header.e_ident[EI_DATA] == ELFDATA2LSB &&
         header.e_machine == EM_AARCH64;
}

}  // namespace

Emulator FindArmEmulator() {
  const char* build_variable = std::getenv("NIMBLE_ARM_BUILD");
  const bool from_variable = build_variable != nullptr && *build_variable != '\0';
  const std::string build = from_variable ? build_variable : NIMBLE_SOURCE_DIR "/build-arm";
  const std::string where = from_variable ? " (NIMBLE_ARM_BUILD)" : "";
  Emulator emulator;
  emulator.arm_nimble_bench = build + "/harness/cli/nimble-bench";
  if (!IsExecutableFile(emulator.arm_nimble_bench)) {
    throw Error("no aarch64 nimble-bench at " + emulator.arm_nimble_bench + where + ": " +
                kHowToGetThem);
  }
  if (!IsAarch64Elf(emulator.arm_nimble_bench)) {
    throw Error(emulator.arm_nimble_bench + where +
                " is not an aarch64 executable: " + kHowToGetThem);
  }
  emulator.qemu = FindOnPath(kQemu);
  if (emulator.qemu.empty()) {
    throw Error(std::string(kQemu) + " is not on PATH: " + kHowToGetThem);
  }
  return emulator;
}

int RunUnderEmulator(const Emulator& emulator, const std::vector<std::string>& args) {
  std::vector<std::string> arg_strings = {emulator.qemu, emulator.arm_nimble_bench};
  arg_strings.insert(arg_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : arg_strings) argv.push_back(arg.data());
  argv.push_back(nullptr);

  // Our environment, with NIMBLE_EMULATOR replaced: the child's host
  // description reads it. No -L or QEMU_LD_PREFIX: qemu takes the arm64
  // multiarch loader and libraries from their standard paths.
  std::string marker = std::string(kEmulatorVariable) + std::string(kQemu);
  std::vector<char*> envp;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (!std::string_view(*entry).starts_with(kEmulatorVariable)) envp.push_back(*entry);
  }
  envp.push_back(marker.data());
  envp.push_back(nullptr);

  // The child writes to the same stdout and stderr: what we buffered comes first.
  std::fflush(nullptr);
  pid_t pid = 0;
  const int error =
      posix_spawn(&pid, emulator.qemu.c_str(), nullptr, nullptr, argv.data(), envp.data());
  if (error != 0) {
    throw Error("cannot start " + emulator.qemu + ": " + std::strerror(error));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      throw Error("waiting for " + emulator.qemu + ": " + std::strerror(errno));
    }
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace nimble::bench
