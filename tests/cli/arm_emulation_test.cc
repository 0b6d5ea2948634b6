// An executable compiled on this x86-64 host with `--target arm` runs on the
// cross-built aarch64 runtime (scripts/build-arm.sh) under qemu-aarch64 and
// gives the outputs of the x86-64 run. Skipped, saying how to get them, where
// build-arm/ or qemu-aarch64 is missing.
//
// Outputs are compared within a tight tolerance rather than bit for bit: the
// built-in kernels sum in the order of the widest vector unit the CPU has
// (AVX-512 or AVX2 lanes on x86-64, NEON's 4 on aarch64), and GCC contracts
// a * b + c into one fused multiply-add on aarch64 but not in x86-64's
// baseline code, so the last bits of float sums differ.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "nimble/vm/npy.h"

extern char** environ;

namespace nimble {
namespace {

namespace fs = std::filesystem;

const std::string kSourceDir = NIMBLE_SOURCE_DIR;
const std::string kArmNimble = kSourceDir + "/build-arm/harness/cli/nimble";

// Each example's --params and --input files (examples/README.md), under examples/.
struct ExampleData {
  std::string params;
  std::vector<std::string> inputs;
};
const std::map<std::string, ExampleData> kExampleData = {
    {"dynamic_concat", {"", {"data/dynamic_concat_x.npy", "data/dynamic_concat_y.npy"}}},
    {"grow_loop", {"", {"data/grow_loop_row.npy"}}},
    {"list_fold", {"", {"data/list_fold_x.npy", "data/list_fold_scale.npy"}}},
    {"lstm_cell", {"data/lstm_cell.npz", {"data/lstm_sequence.npy"}}},
};

// |arm - x86| <= kAbsolute + kRelative * |x86| for every element.
constexpr double kAbsolute = 1e-6;
constexpr double kRelative = 1e-5;

struct Outcome {
  int status = -1;
  std::string err;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// The first executable file `name` in the directories of PATH, or "".
std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  for (size_t begin = 0; begin <= dirs.size();) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(begin, end - begin);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0 && fs::is_regular_file(candidate)) return candidate;
    begin = end + 1;
  }
  return "";
}

// Whether `path` is a little-endian ELF file for aarch64 (e_machine 183).
bool IsAarch64Elf(const std::string& path) {
  std::string header(20, '\0');
  std::ifstream file(path, std::ios::binary);
  if (!file.read(header.data(), static_cast<std::streamsize>(header.size()))) return false;
  return header.starts_with("\177ELF") && header[5] == 1 &&
         static_cast<unsigned char>(header[18]) == 183 && header[19] == 0;
}

class ArmEmulation : public ::testing::Test {
 protected:
  void SetUp() override {
    qemu_ = FindOnPath("qemu-aarch64");
    if (qemu_.empty() || !fs::exists(kArmNimble)) {
      GTEST_SKIP() << "needs qemu-aarch64 on PATH and " << kArmNimble
                   << ": run scripts/build-arm.sh (as root) first";
    }
    ASSERT_TRUE(IsAarch64Elf(kArmNimble)) << kArmNimble << " is not an aarch64 executable";
    std::string pattern = (fs::temp_directory_path() / "nimble_arm_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Runs `argv` (argv[0] looked up on PATH) with stdout discarded and stderr
  // kept. Emulated runs go through timeout(1): a hang under qemu fails the
  // test instead of stalling the suite.
  Outcome Spawn(std::vector<std::string> argv) const {
    const std::string err_path = (dir_ / "stderr.txt").string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    std::vector<char*> args;
    for (std::string& arg : argv) args.push_back(arg.data());
    args.push_back(nullptr);
    pid_t pid = 0;
    Outcome outcome;
    const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    EXPECT_EQ(spawned, 0) << "cannot start " << argv[0];
    if (spawned != 0) return outcome;
    int wait_status = 0;
    waitpid(pid, &wait_status, 0);
    outcome.status =
        WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
    outcome.err = ReadFile(err_path);
    return outcome;
  }

  std::string qemu_;
  fs::path dir_;
};

// The .npy files a run wrote to `dir`, by name.
std::vector<std::string> OutputNames(const fs::path& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void ExpectSameOutputs(const fs::path& arm_dir, const fs::path& x86_dir) {
  const std::vector<std::string> names = OutputNames(x86_dir);
  ASSERT_FALSE(names.empty()) << "the x86-64 run wrote no outputs";
  ASSERT_EQ(OutputNames(arm_dir), names);
  for (const std::string& name : names) {
    SCOPED_TRACE("output " + name);
    const Tensor x86 = ReadNpy((x86_dir / name).string());
    const Tensor arm = ReadNpy((arm_dir / name).string());
    ASSERT_EQ(arm->dtype(), x86->dtype());
    ASSERT_EQ(arm->shape(), x86->shape());
    for (int64_t i = 0; i < x86->numel(); ++i) {
      const double expected = x86->GetAsDouble(i);
      ASSERT_NEAR(arm->GetAsDouble(i), expected, kAbsolute + kRelative * std::abs(expected))
          << "element " << i;
    }
  }
}

TEST_F(ArmEmulation, ExamplesGiveTheOutputsOfTheX86Run) {
  int examples = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(kSourceDir + "/examples")) {
    if (entry.path().extension() != ".relay") continue;
    const std::string name = entry.path().stem().string();
    SCOPED_TRACE("examples/" + name + ".relay");
    const auto data = kExampleData.find(name);
    ASSERT_NE(data, kExampleData.end()) << "no inputs listed for the example: add them above";
    ++examples;

    const std::string executable = (dir_ / (name + ".nimble")).string();
    std::vector<std::string> compile = {
        NIMBLE_BINARY, "compile", entry.path().string(), "--target", "arm", "-o", executable};
    if (!data->second.params.empty()) {
      compile.insert(compile.end(), {"--params", kSourceDir + "/examples/" + data->second.params});
    }
    const Outcome compiled = Spawn(compile);
    ASSERT_EQ(compiled.status, 0) << compiled.err;

    const auto run = [&](std::vector<std::string> argv, const std::string& out) {
      argv.insert(argv.end(), {"run", executable, "--out", (dir_ / name / out).string()});
      if (!data->second.inputs.empty()) argv.push_back("--input");
      for (const std::string& input : data->second.inputs) {
        argv.push_back(kSourceDir + "/examples/" + input);
      }
      return Spawn(argv);
    };
    const Outcome x86 = run({NIMBLE_BINARY}, "x86");
    ASSERT_EQ(x86.status, 0) << x86.err;
    const Outcome arm = run({"timeout", "300", qemu_, kArmNimble}, "arm");
    ASSERT_EQ(arm.status, 0) << arm.err
                             << "(an old build-arm/ rejects newer executables: rerun "
                                "scripts/build-arm.sh)";
    ExpectSameOutputs(dir_ / name / "arm", dir_ / name / "x86");
  }
  EXPECT_EQ(examples, static_cast<int>(kExampleData.size()));
}

}  // namespace
}  // namespace nimble
