#include "nimble/compiler/codegen/link.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "nimble/vm/error.h"

extern char** environ;

namespace nimble::codegen {
namespace {

// An ld.lld beside the running executable first: the agent bundle
// (scripts/bundle-agent.sh) ships lld 19 there for hosts without LLVM. Then
// lld 19 as Debian's lld-19 installs it; the plain ld.lld on PATH may be
// another version.
std::string FindLinker() {
  std::vector<std::string> candidates;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) candidates.push_back((self.parent_path() / "ld.lld").string());
  candidates.insert(candidates.end(), {"/usr/bin/ld.lld-19", "/usr/lib/llvm-19/bin/ld.lld"});
  std::string looked;
  for (const std::string& path : candidates) {
    if (access(path.c_str(), X_OK) == 0) return path;
    looked += (looked.empty() ? "" : ", ") + path;
  }
  throw Error("linking kernels: ld.lld-19 not found (looked at " + looked +
              "; install the lld-19 package)");
}

std::string Emulation(const CodegenTarget& target) {
  if (target.triple.starts_with("x86_64")) return "elf_x86_64";
  if (target.triple.starts_with("aarch64")) return "aarch64linux";
  throw Error("linking kernels: no linker emulation for target " + target.name + " (" +
              target.triple + ")");
}

// A private directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  TempDir() {
    const char* tmpdir = std::getenv("TMPDIR");
    std::string pattern = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/nimble-link-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      throw Error("linking kernels: cannot create a directory " + pattern + ": " +
                  std::strerror(errno));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

void WriteFile(const std::string& path, std::span<const std::byte> bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  if (!file.flush()) throw Error("linking kernels: cannot write " + path);
}

std::vector<std::byte> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error("linking kernels: cannot read " + path);
  const std::vector<char> chars((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  const auto* begin = reinterpret_cast<const std::byte*>(chars.data());
  return std::vector<std::byte>(begin, begin + chars.size());
}

// Runs `argv` with stdin from /dev/null and stdout and stderr into `output`;
// returns its exit status, or -1 when it did not exit normally.
int Run(const std::vector<std::string>& argv, const std::string& output) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  const int error = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    throw Error("linking kernels: cannot run " + argv[0] + ": " + std::strerror(error));
  }
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      throw Error("linking kernels: waitpid: " + std::string(std::strerror(errno)));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::vector<std::byte> LinkSharedLibrary(std::span<const std::byte> object,
                                         const CodegenTarget& target) {
  const TempDir dir;
  const std::string input = dir.File("kernels.o");
  const std::string library = dir.File("lib.so");
  const std::string log = dir.File("linker.log");
  WriteFile(input, object);
  const std::vector<std::string> command = {
      FindLinker(), "-shared",     "-m", Emulation(target), "--hash-style=gnu",
      "-z",         "noexecstack", "-o", library,           input};
  if (Run(command, log) != 0) {
    const std::vector<std::byte> messages = ReadFile(log);
    std::string text(reinterpret_cast<const char*>(messages.data()), messages.size());
    while (!text.empty() && text.back() == '\n') text.pop_back();
    throw Error("linking kernels for " + target.name + " failed: " + text);
  }
  return ReadFile(library);
}

}  // namespace nimble::codegen
