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
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "harness/agent/child_process.h"
#include "harness/bench/emulation.h"
#include "nimble/vm/error.h"
#include "nimble/vm/npy.h"

namespace nimble {
namespace {

namespace fs = std::filesystem;

const std::string kSourceDir = NIMBLE_SOURCE_DIR;

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

class ArmEmulation : public ::testing::Test {
 protected:
  void SetUp() override {
    // The same search and checks as `nimble-bench run --emulate`.
    try {
      const bench::Emulator emulator = bench::FindArmEmulator();
      qemu_ = emulator.qemu;
      arm_nimble_ = (fs::path(emulator.arm_nimble_bench).parent_path() / "nimble").string();
    } catch (const Error& missing) {
      GTEST_SKIP() << missing.what();
    }
    std::string pattern = (fs::temp_directory_path() / "nimble_arm_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Runs `argv`; a hang under qemu fails the test instead of stalling the
  // suite.
  static agent::ChildResult Run(const std::vector<std::string>& argv) {
    agent::ChildOptions options;
    options.timeout_s = 300;
    return agent::RunChild(argv, options);
  }

  std::string qemu_;
  std::string arm_nimble_;
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

    // Each target's executable embeds its own generated kernels.
    const auto compile = [&](const std::string& target) {
      const std::string executable = (dir_ / (name + "." + target + ".nimble")).string();
      std::vector<std::string> argv = {
          NIMBLE_BINARY, "compile", entry.path().string(), "--target", target, "-o", executable};
      if (!data->second.params.empty()) {
        argv.insert(argv.end(), {"--params", kSourceDir + "/examples/" + data->second.params});
      }
      const agent::ChildResult compiled = Run(argv);
      EXPECT_TRUE(compiled.ok()) << compiled.Describe();
      return executable;
    };
    const std::string intel_executable = compile("intel");
    const std::string arm_executable = compile("arm");

    const auto run = [&](std::vector<std::string> argv, const std::string& executable,
                         const std::string& out) {
      argv.insert(argv.end(), {"run", executable, "--out", (dir_ / name / out).string()});
      if (!data->second.inputs.empty()) argv.push_back("--input");
      for (const std::string& input : data->second.inputs) {
        argv.push_back(kSourceDir + "/examples/" + input);
      }
      return Run(argv);
    };
    const agent::ChildResult x86 = run({NIMBLE_BINARY}, intel_executable, "x86");
    ASSERT_TRUE(x86.ok()) << x86.Describe();
    const agent::ChildResult arm = run({qemu_, arm_nimble_}, arm_executable, "arm");
    ASSERT_TRUE(arm.ok()) << arm.Describe()
                          << " (an old build-arm/ rejects newer executables: rerun "
                             "scripts/build-arm.sh)";
    ExpectSameOutputs(dir_ / name / "arm", dir_ / name / "x86");
  }
  EXPECT_EQ(examples, static_cast<int>(kExampleData.size()));
}

}  // namespace
}  // namespace nimble
