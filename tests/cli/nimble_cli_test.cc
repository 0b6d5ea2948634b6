// Acceptance tests of the `nimble` command: they run the real binary as a
// child process on the examples and on broken inputs, and check its exit
// status, what it prints and the files it writes.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "nimble/vm/bytecode.h"
#include "nimble/vm/executable.h"
#include "nimble/vm/npy.h"

extern char** environ;

namespace nimble {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

struct Outcome {
  int status = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

class NimbleCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "nimble_cli_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the binary with `args`, its stdout and stderr going to files.
  Outcome Nimble(const std::vector<std::string>& args) const {
    const std::string out_path = (dir_ / "stdout.txt").string();
    const std::string err_path = (dir_ / "stderr.txt").string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    std::vector<std::string> argv_strings{NIMBLE_BINARY};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& arg : argv_strings) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    Outcome outcome;
    const int spawned = posix_spawn(&pid, NIMBLE_BINARY, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    EXPECT_EQ(spawned, 0) << "cannot start " << NIMBLE_BINARY;
    if (spawned != 0) return outcome;
    int wait_status = 0;
    waitpid(pid, &wait_status, 0);
    outcome.status =
        WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
    outcome.out = ReadFile(out_path);
    outcome.err = ReadFile(err_path);
    return outcome;
  }

  // Writes `text` to a file in the test's directory and returns its path.
  std::string WriteTemp(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }

  std::string Temp(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::string Example(const std::string& name) {
  return std::string(NIMBLE_SOURCE_DIR) + "/examples/" + name;
}

std::vector<double> Values(const Tensor& tensor) {
  std::vector<double> values;
  for (int64_t i = 0; i < tensor->numel(); ++i) values.push_back(tensor->GetAsDouble(i));
  return values;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

// The numbers of a summary line "0: Tensor[(4, 2), float32] [1, 2, ...]".
std::vector<double> PrintedValues(const std::string& line) {
  std::vector<double> values;
  const size_t open = line.rfind('[');
  std::istringstream stream(line.substr(open + 1));
  for (std::string item; std::getline(stream, item, ',');) {
    if (item.find("...") != std::string::npos) break;
    values.push_back(std::stod(item));
  }
  return values;
}

// A user error is exactly one line "error: ..." on stderr, nothing else.
void ExpectUserError(const Outcome& outcome, const std::string& prefix) {
  EXPECT_EQ(outcome.status, 1) << outcome.err;
  EXPECT_THAT(outcome.err, StartsWith("error: " + prefix));
  EXPECT_EQ(Lines(outcome.err).size(), 1u) << outcome.err;
  EXPECT_THAT(outcome.err, Not(HasSubstr("terminate")));
}

// The printed summary agrees with the written file (to the 6 digits printed).
void ExpectSummaryMatches(const std::string& line, const Tensor& tensor) {
  EXPECT_THAT(line, HasSubstr(tensor->TypeString()));
  const std::vector<double> printed = PrintedValues(line);
  const std::vector<double> values = Values(tensor);
  ASSERT_EQ(printed.size(), std::min<size_t>(values.size(), 8));
  for (size_t i = 0; i < printed.size(); ++i) {
    EXPECT_NEAR(printed[i], values[i], 1e-5 * (1 + std::abs(values[i])));
  }
}

// ---- Help and usage -----------------------------------------------------------

TEST_F(NimbleCli, HelpEverywhere) {
  Outcome top = Nimble({"--help"});
  EXPECT_EQ(top.status, 0);
  EXPECT_THAT(top.out,
              AllOf(HasSubstr("check"), HasSubstr("run"), HasSubstr("random"), HasSubstr("dump")));
  for (const char* command : {"check", "run", "random", "dump"}) {
    Outcome help = Nimble({command, "--help"});
    EXPECT_EQ(help.status, 0) << command;
    EXPECT_THAT(help.out, HasSubstr("Usage")) << command;
  }
  EXPECT_THAT(Nimble({"dump", "--help"}).out,
              AllOf(HasSubstr("--bytecode"), HasSubstr("--constants")));
  EXPECT_THAT(Nimble({"run", "--help"}).out, AllOf(HasSubstr("--params"), HasSubstr("--input"),
                                                   HasSubstr("--out"), HasSubstr("--function")));
  EXPECT_THAT(Nimble({"compile", "--help"}).out, HasSubstr("--function"));
}

TEST_F(NimbleCli, BadUsageExitsWithTwo) {
  Outcome no_command = Nimble({});
  EXPECT_EQ(no_command.status, 2);
  EXPECT_THAT(no_command.err, HasSubstr("subcommand"));
  Outcome unknown_option = Nimble({"run", Example("dynamic_concat.relay"), "--bogus"});
  EXPECT_EQ(unknown_option.status, 2);
  EXPECT_THAT(unknown_option.err, HasSubstr("--bogus"));
  Outcome no_program = Nimble({"check"});
  EXPECT_EQ(no_program.status, 2);
  EXPECT_THAT(no_program.err, HasSubstr("program is required"));
  EXPECT_EQ(Nimble({"random", "--tensor", "x:2"}).status, 2);  // no -o
  EXPECT_EQ(Nimble({"random", "-o", Temp("x.npy"), "--seed", "many", "--tensor", "x:2"}).status, 2);
}

TEST_F(NimbleCli, MatMulTemplateOptionsAreChecked) {
  const std::string program = Example("dynamic_concat.relay");
  Outcome zero = Nimble({"compile", program, "-o", Temp("x.nimble"), "--dispatch", "0"});
  EXPECT_EQ(zero.status, 2);
  EXPECT_THAT(zero.err, HasSubstr("--dispatch: Value 0 not in range 1 to 64"));
  Outcome text = Nimble({"compile", program, "-o", Temp("x.nimble"), "--matmul-tile", "4by3"});
  EXPECT_EQ(text.status, 2);
  EXPECT_THAT(text.err, HasSubstr("--matmul-tile: expected ROWSxCOLS, got '4by3'"));
  ExpectUserError(Nimble({"compile", program, "-o", Temp("x.nimble"), "--matmul-tile", "9x9"}),
                  "matmul schedule: a tile's elements must be between 1 and 64, got 81");
  EXPECT_FALSE(fs::exists(Temp("x.nimble")));
}

// ---- The examples (commands as in examples/README.md) -------------------------

TEST_F(NimbleCli, DynamicConcat) {
  Outcome run = Nimble({"run", Example("dynamic_concat.relay"), "--input",
                        Example("data/dynamic_concat_x.npy"), Example("data/dynamic_concat_y.npy"),
                        "--out", Temp("out")});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.err, "");
  const Tensor x = ReadNpy(Example("data/dynamic_concat_x.npy"));
  const Tensor y = ReadNpy(Example("data/dynamic_concat_y.npy"));
  const Tensor out = ReadNpy(Temp("out/0.npy"));
  EXPECT_EQ(out->shape(), (Shape{4, 2}));
  std::vector<double> expected = Values(x);
  for (double value : Values(y)) expected.push_back(value);
  EXPECT_EQ(Values(out), expected);
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], StartsWith("0: Tensor[(4, 2), float32] ["));
  ExpectSummaryMatches(lines[0], out);
  EXPECT_FALSE(fs::exists(Temp("out/1.npy")));
}

TEST_F(NimbleCli, GrowLoop) {
  Outcome run = Nimble({"run", Example("grow_loop.relay"), "--input",
                        Example("data/grow_loop_row.npy"), "--out", Temp("out")});
  ASSERT_EQ(run.status, 0) << run.err;
  const std::vector<double> row = Values(ReadNpy(Example("data/grow_loop_row.npy")));
  const Tensor out = ReadNpy(Temp("out/0.npy"));
  ASSERT_EQ(out->shape(), (Shape{5, 2}));
  for (int64_t r = 0; r < 5; ++r) {
    for (int64_t c = 0; c < 2; ++c) {
      EXPECT_NEAR(out->GetAsDouble(r * 2 + c), row[c] + static_cast<double>(r), 1e-6);
    }
  }
  ASSERT_EQ(Lines(run.out).size(), 1u);
  EXPECT_THAT(run.out, StartsWith("0: Tensor[(5, 2), float32] ["));
  EXPECT_THAT(run.out, EndsWith(", ...]\n"));
  ExpectSummaryMatches(Lines(run.out)[0], out);
}

TEST_F(NimbleCli, ListFold) {
  Outcome run =
      Nimble({"run", Example("list_fold.relay"), "--input", Example("data/list_fold_x.npy"),
              Example("data/list_fold_scale.npy"), "--out", Temp("out")});
  ASSERT_EQ(run.status, 0) << run.err;
  const Tensor x = ReadNpy(Example("data/list_fold_x.npy"));
  const double scale = ReadNpy(Example("data/list_fold_scale.npy"))->GetAsDouble(0);
  ASSERT_EQ(x->shape(), (Shape{3, 4}));
  // Output 0 is the sum of the scaled rows; outputs 1-3 the list's cells.
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), 4u);
  std::vector<double> sum(4, 0.0);
  for (int64_t r = 0; r < 3; ++r) {
    const Tensor cell = ReadNpy(Temp("out/" + std::to_string(r + 1) + ".npy"));
    ASSERT_EQ(cell->shape(), (Shape{4}));
    for (int64_t c = 0; c < 4; ++c) {
      const double expected = static_cast<float>(x->GetAsDouble(r * 4 + c) * scale);
      EXPECT_NEAR(cell->GetAsDouble(c), expected, 1e-6);
      sum[c] += cell->GetAsDouble(c);
    }
    ExpectSummaryMatches(lines[r + 1], cell);
  }
  const Tensor total = ReadNpy(Temp("out/0.npy"));
  for (int64_t c = 0; c < 4; ++c) EXPECT_NEAR(total->GetAsDouble(c), sum[c], 1e-5);
  ExpectSummaryMatches(lines[0], total);
  EXPECT_FALSE(fs::exists(Temp("out/4.npy")));
}

double Sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

TEST_F(NimbleCli, LstmMatchesAHandWrittenLstm) {
  Outcome run =
      Nimble({"run", Example("lstm_cell.relay"), "--params", Example("data/lstm_cell.npz"),
              "--input", Example("data/lstm_sequence.npy"), "--out", Temp("out")});
  ASSERT_EQ(run.status, 0) << run.err;
  std::map<std::string, Tensor> params;
  for (auto& [name, tensor] : ReadNpz(Example("data/lstm_cell.npz"))) params[name] = tensor;
  const Tensor xs = ReadNpy(Example("data/lstm_sequence.npy"));
  ASSERT_EQ(xs->shape(), (Shape{5, 8}));
  std::vector<double> h(16, 0.0), c(16, 0.0);
  for (int64_t t = 0; t < xs->shape()[0]; ++t) {
    std::vector<double> gates(64);
    for (int64_t g = 0; g < 64; ++g) {
      double sum = params["b_ih"]->GetAsDouble(g) + params["b_hh"]->GetAsDouble(g);
      for (int64_t k = 0; k < 8; ++k) {
        sum += xs->GetAsDouble(t * 8 + k) * params["w_ih"]->GetAsDouble(g * 8 + k);
      }
      for (int64_t k = 0; k < 16; ++k) sum += h[k] * params["w_hh"]->GetAsDouble(g * 16 + k);
      gates[g] = sum;
    }
    for (int64_t k = 0; k < 16; ++k) {
      c[k] = Sigmoid(gates[16 + k]) * c[k] + Sigmoid(gates[k]) * std::tanh(gates[32 + k]);
      h[k] = Sigmoid(gates[48 + k]) * std::tanh(c[k]);
    }
  }
  const Tensor out = ReadNpy(Temp("out/0.npy"));
  ASSERT_EQ(out->shape(), (Shape{1, 16}));
  for (int64_t k = 0; k < 16; ++k) EXPECT_NEAR(out->GetAsDouble(k), h[k], 1e-5) << k;
  ASSERT_EQ(Lines(run.out).size(), 1u);
  ExpectSummaryMatches(Lines(run.out)[0], out);
}

// The LSTM example compiled to an executable and run on the VM prints what
// the reference evaluator prints (to the summary's precision), in memory or
// from the file; --profile reports the kernel/other split.
TEST_F(NimbleCli, CompileAndRunOnTheVM) {
  const std::vector<std::string> input = {"--input", Example("data/lstm_sequence.npy")};
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.end(), input.begin(), input.end());
    return Nimble(args);
  };
  const std::string params = Example("data/lstm_cell.npz");
  Outcome reference =
      run({"run", Example("lstm_cell.relay"), "--params", params, "--out", Temp("ref")});
  ASSERT_EQ(reference.status, 0) << reference.err;
  Outcome in_memory =
      run({"run", Example("lstm_cell.relay"), "--params", params, "--engine", "vm"});
  ASSERT_EQ(in_memory.status, 0) << in_memory.err;
  Outcome compile = Nimble(
      {"compile", Example("lstm_cell.relay"), "--params", params, "-o", Temp("lstm.nimble")});
  ASSERT_EQ(compile.status, 0) << compile.err;
  // An arm executable's AArch64 kernels do not run on this x86-64 host.
  Outcome arm = Nimble({"compile", Example("lstm_cell.relay"), "--params", params, "--target",
                        "arm", "-o", Temp("lstm_arm.nimble")});
  ASSERT_EQ(arm.status, 0) << arm.err;
  EXPECT_THAT(run({"run", Temp("lstm_arm.nimble")}).err,
              HasSubstr("generated kernels are for target 'arm'"));
  Outcome from_file = run({"run", Temp("lstm.nimble"), "--profile"});
  ASSERT_EQ(from_file.status, 0) << from_file.err;
  for (const Outcome* vm : {&in_memory, &from_file}) {
    ASSERT_EQ(Lines(vm->out).size(), 1u);
    ExpectSummaryMatches(Lines(vm->out)[0], ReadNpy(Temp("ref/0.npy")));
  }
  EXPECT_THAT(from_file.err,
              AllOf(HasSubstr("kernels"), HasSubstr("others"), HasSubstr("invoke_packed")));
  Outcome dump = Nimble({"dump", Temp("lstm_arm.nimble"), "--bytecode"});
  EXPECT_THAT(dump.out, AllOf(HasSubstr("target \"arm\""), HasSubstr("kernel[1] nn.dense"),
                              HasSubstr("fused_add_add_strided_slice_sigmoid")));
  Outcome ref_on_executable = Nimble({"run", Temp("lstm.nimble"), "--engine", "ref"});
  EXPECT_EQ(ref_on_executable.status, 1);
  EXPECT_THAT(ref_on_executable.err, HasSubstr("the reference evaluator runs programs"));
}

TEST_F(NimbleCli, DumpIrAfterAPass) {
  Outcome dump = Nimble({"dump", Example("dynamic_concat.relay"), "--ir-after", "manifest-alloc"});
  ASSERT_EQ(dump.status, 0) << dump.err;
  EXPECT_THAT(dump.out, AllOf(HasSubstr("memory.shape_func("), HasSubstr("memory.invoke_mut("),
                              HasSubstr("memory.alloc_storage(")));
  Outcome unknown = Nimble({"dump", Example("dynamic_concat.relay"), "--ir-after", "nope"});
  EXPECT_EQ(unknown.status, 1);
  EXPECT_THAT(unknown.err, HasSubstr("unknown pass 'nope' (passes: inline, fold-constant, "
                                     "tree-batching, batch-matmul-to-dense, "
                                     "bf16-weights, pack-dense-weights, eta-expand, anf"));
}

// --kernels and --no-fusion choose the kernels a program compiles to, which
// `dump --kernels` lists; both give the reference evaluator's outputs.
TEST_F(NimbleCli, KernelChoiceAndFusion) {
  const std::string lstm = Example("lstm_cell.relay");
  const std::vector<std::string> params = {"--params", Example("data/lstm_cell.npz")};
  const auto compile = [&](const std::string& out, std::vector<std::string> flags) {
    std::vector<std::string> args = {"compile", lstm, "-o", Temp(out)};
    args.insert(args.end(), params.begin(), params.end());
    args.insert(args.end(), flags.begin(), flags.end());
    EXPECT_EQ(Nimble(args).status, 0) << out;
    return Nimble({"dump", Temp(out), "--kernels"}).out;
  };
  EXPECT_THAT(
      compile("fused.nimble", {"--tuning-db", Temp("tuning.db")}),
      AllOf(Not(HasSubstr("nn.dense+")),
            HasSubstr("generated, fuses add+add+strided_slice+sigmoid+strided_slice+sigmoid+"
                      "strided_slice+tanh+strided_slice+sigmoid+multiply+multiply+add+"
                      "tanh+multiply")));
  EXPECT_TRUE(std::filesystem::exists(Temp("tuning.db")));
  EXPECT_THAT(compile("library.nimble", {"--kernels", "library"}),
              AllOf(HasSubstr("] nn.dense."), HasSubstr(": library ")));
  EXPECT_THAT(compile("unfused.nimble", {"--no-fusion"}),
              AllOf(HasSubstr("generated, fuses sigmoid, (1, 16) float32 -> (1, 16) float32"),
                    Not(HasSubstr("+"))));
  EXPECT_THAT(compile("builtin.nimble", {"--kernels", "builtin"}),
              AllOf(HasSubstr("] add: built-in"), Not(HasSubstr("generated"))));
  EXPECT_THAT(compile("dense.nimble", {"--kernels", "generated"}),
              HasSubstr("generated, fuses nn.dense"));
  for (const std::string flags :
       {"", "--no-fusion", "--kernels=builtin", "--kernels=generated", "--kernels=library"}) {
    std::vector<std::string> args = {"run", lstm, "--input", Example("data/lstm_sequence.npy")};
    args.insert(args.end(), params.begin(), params.end());
    if (!flags.empty()) args.push_back(flags);
    const Outcome run = Nimble(args);
    ASSERT_EQ(run.status, 0) << flags << ": " << run.err;
  }
  ExpectUserError(
      Nimble({"run", Temp("fused.nimble"), "--no-fusion"}),
      Temp("fused.nimble") +
          ": --kernels, --no-fusion, --tuning-db, --precision and --batch-trees apply to programs");
  ExpectUserError(
      Nimble({"run", Temp("fused.nimble"), "--tuning-db", Temp("other.db")}),
      Temp("fused.nimble") +
          ": --kernels, --no-fusion, --tuning-db, --precision and --batch-trees apply to programs");
  ExpectUserError(
      Nimble({"run", Temp("fused.nimble"), "--precision", "bf16"}),
      Temp("fused.nimble") +
          ": --kernels, --no-fusion, --tuning-db, --precision and --batch-trees apply to programs");
}

// The loop IR of the generated kernels, simplified: a row's elementwise
// kernel indexes its operands by the loop variable and the gate's offset.
TEST_F(NimbleCli, DumpsTheLoopIrOfAGeneratedKernel) {
  const std::string lstm = Example("lstm_cell.relay");
  const std::string params = Example("data/lstm_cell.npz");
  const Outcome all = Nimble({"dump", lstm, "--params", params, "--tir", "all"});
  ASSERT_EQ(all.status, 0) << all.err;
  EXPECT_THAT(all.out,
              AllOf(HasSubstr("kernel fused_add_add_strided_slice_sigmoid_1("),
                    HasSubstr("(sigmoid(((p0[(48 + multiply.j)] + p1[(48 + multiply.j)]) + "
                              "p2[(48 + multiply.j)])) * tanh(add[multiply.j]))"),
                    Not(HasSubstr("floordiv"))));
  const Outcome missing = Nimble({"dump", lstm, "--params", params, "--tir", "fused_nope"});
  ExpectUserError(missing, "--tir: no generated kernel named 'fused_nope'");
  EXPECT_THAT(missing.err,
              HasSubstr("are fused_take_expand_dims_0, fused_add_add_strided_slice_sigmoid_1, "));
  // For the nvidia target a kernel's stages are GPU loops, a thread per
  // element; the cell's two, c' (add) and h' (multiply, which reads c'),
  // share one loop, each thread computing c' then h' with its gates inlined:
  // no temporary buffer.
  const Outcome gpu =
      Nimble({"dump", lstm, "--params", params, "--tir", "all", "--target", "nvidia"});
  ASSERT_EQ(gpu.status, 0) << gpu.err;
  EXPECT_THAT(gpu.out, AllOf(HasSubstr("gpu kernel fused_add_add_strided_slice_sigmoid_1("),
                             HasSubstr("for add.thread in [0, 16) gpu_threads {"),
                             HasSubstr("    let multiply.thread = add.thread\n"),
                             HasSubstr(" * tanh(add[multiply.thread]))\n"),
                             Not(HasSubstr("for multiply.thread")), Not(HasSubstr("allocate"))));
  // --generated compiles as --kernels generated: the recurrent product joins
  // the cell, and on the GPU each unit's thread computes its four gates' rows
  // where the cell reads them (one launch, no gate buffer).
  const Outcome generated = Nimble(
      {"dump", lstm, "--params", params, "--tir", "all", "--target", "nvidia", "--generated"});
  ASSERT_EQ(generated.status, 0) << generated.err;
  EXPECT_THAT(generated.out, AllOf(HasSubstr("gpu kernel fused_nn_dense_add_add_strided_slice_2("),
                                   HasSubstr("  for add.element in [0, 16) gpu_threads {\n"),
                                   HasSubstr("    let nn.dense.3 = nn.dense.3.acc[0]\n"),
                                   Not(HasSubstr("allocate nn.dense:"))));
}

// --warmup runs the program first; the profile covers the last run alone.
TEST_F(NimbleCli, WarmupRunsAreLeftOutOfTheProfile) {
  const std::vector<std::string> run = {
      "run",     Example("lstm_cell.relay"),        "--params", Example("data/lstm_cell.npz"),
      "--input", Example("data/lstm_sequence.npy"), "--profile"};
  const Outcome once = Nimble(run);
  ASSERT_EQ(once.status, 0) << once.err;
  std::vector<std::string> warmed = run;
  warmed.insert(warmed.end(), {"--warmup", "3"});
  const Outcome after_warmup = Nimble(warmed);
  ASSERT_EQ(after_warmup.status, 0) << after_warmup.err;
  const auto invocations = [](const std::string& report) {
    for (const std::string& line : Lines(report)) {
      if (line.starts_with("invoke_packed")) return line;
    }
    return std::string("no invoke_packed line");
  };
  EXPECT_EQ(invocations(after_warmup.err), invocations(once.err));
  EXPECT_EQ(after_warmup.out, once.out);
  ExpectUserError(
      Nimble({"run", Example("lstm_cell.relay"), "--params", Example("data/lstm_cell.npz"),
              "--input", Example("data/lstm_sequence.npy"), "--engine", "ref", "--warmup", "1"}),
      "--warmup needs --engine vm");
}

// Memory planning, measured: allocations as written before and after it, and
// the same results with it turned off.
TEST_F(NimbleCli, AllocationsWithAndWithoutPlanning) {
  const std::string lstm = Example("lstm_cell.relay");
  const std::string params = Example("data/lstm_cell.npz");
  Outcome counts = Nimble({"dump", lstm, "--params", params, "--allocations"});
  ASSERT_EQ(counts.status, 0) << counts.err;
  EXPECT_THAT(Lines(counts.out),
              ElementsAre(HasSubstr("allocations"),
                          "manifested                   6            736                   0",
                          "planned                      3            704                   0"));
  const std::vector<std::string> run = {"run",  lstm,      "--params",
                                        params, "--input", Example("data/lstm_sequence.npy")};
  std::vector<std::string> unplanned = run;
  unplanned.push_back("--no-memory-plan");
  const Outcome planned_run = Nimble(run);
  const Outcome unplanned_run = Nimble(unplanned);
  ASSERT_EQ(planned_run.status, 0) << planned_run.err;
  EXPECT_EQ(planned_run.out, unplanned_run.out);
  ExpectUserError(Nimble({"dump", Temp("x.nimble"), "--allocations"}),
                  "--allocations needs a program (.relay)");
}

TEST_F(NimbleCli, RunWithoutOutWritesNothing) {
  Outcome run =
      Nimble({"run", Example("grow_loop.relay"), "--input", Example("data/grow_loop_row.npy")});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.out, StartsWith("0: Tensor[(5, 2), float32]"));
  EXPECT_FALSE(fs::exists(Temp("0.npy")));
}

TEST_F(NimbleCli, RunAnotherFunction) {
  const std::string program = WriteTemp("two.relay", R"(
def @main(%x: Tensor[(2,), float32]) { %x }
def @pair(%x: Tensor[(2,), int32]) { (%x, (add(%x, 1), multiply(%x, 2))) }
)");
  WriteNpy(Temp("x.npy"), TensorNode::FromVector<int>({2}, DataType::Int32(), {3, 4}));
  Outcome run =
      Nimble({"run", program, "--function", "pair", "--input", Temp("x.npy"), "--out", Temp("o")});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(Lines(run.out),
              ElementsAre("0: Tensor[(2,), int32] [3, 4]", "1: Tensor[(2,), int32] [4, 5]",
                          "2: Tensor[(2,), int32] [6, 8]"));
  EXPECT_THAT(Values(ReadNpy(Temp("o/2.npy"))), ElementsAre(6, 8));
}

// The compiler's passes and the evaluator recurse along an expression's
// nesting, which graph bindings make as deep as their chain: they run on a
// deep stack of their own (support/deep_stack.h), so a chain deeper than the
// main thread's stack holds (made 1 MiB here, about 11,000 levels of the
// deepest pass; 8 MiB overflowed at 100,000 before the passes ran there)
// still compiles and runs, on both engines.
TEST_F(NimbleCli, BindingChainsDeeperThanTheMainStackRun) {
  constexpr int kChain = 20000;
  std::string text = "def @main(%x: Tensor[(2,), float32]) {\n  %0 = add(%x, 1f);\n";
  for (int i = 1; i < kChain; ++i) {
    text += "  %" + std::to_string(i) + " = add(%" + std::to_string(i - 1) + ", 1f);\n";
  }
  text += "  %" + std::to_string(kChain - 1) + "\n}\n";
  const std::string program = WriteTemp("chain.relay", text);
  WriteNpy(Temp("x.npy"), TensorNode::FromVector<float>({2}, DataType::Float32(), {0.5f, -3}));
  rlimit stack{};
  ASSERT_EQ(getrlimit(RLIMIT_STACK, &stack), 0);
  const rlimit small{.rlim_cur = rlim_t{1} << 20, .rlim_max = stack.rlim_max};
  for (const std::string engine : {"ref", "vm"}) {
    ASSERT_EQ(setrlimit(RLIMIT_STACK, &small), 0);
    Outcome run = Nimble({"run", program, "--engine", engine, "--input", Temp("x.npy")});
    ASSERT_EQ(setrlimit(RLIMIT_STACK, &stack), 0);
    EXPECT_EQ(run.status, 0) << engine << ": " << run.err;
    EXPECT_THAT(run.out, StartsWith("0: Tensor[(2,), float32] [20000.5, 19997]")) << engine;
  }
}

// A tensor of 2^62 float32 elements has more bytes than int64 holds: the
// byte count wrapped to 0 and the fill overran the tiny buffer it sized
// (SIGSEGV with no message, in constant folding at compile time, in the
// evaluator and in the VM's fill kernel). Every place that turns a shape
// into bytes checks it now, with one message.
TEST_F(NimbleCli, ATensorWhoseBytesOverflowIsAnError) {
  const std::string overflow = "storage for shape (4611686018427387904,) of float32 overflows";
  for (const std::string body : {"zeros(shape=[4611686018427387904], dtype=\"float32\")",
                                 "full(1f, shape=[4611686018427387904], dtype=\"float32\")"}) {
    const std::string program = WriteTemp("huge.relay", "def @main() {\n  " + body + "\n}\n");
    const Outcome compile = Nimble({"compile", program, "-o", Temp("huge.nimble")});
    ExpectUserError(compile, "");
    EXPECT_THAT(compile.err, HasSubstr(overflow)) << body;
    for (const std::string engine : {"ref", "vm"}) {
      const Outcome run = Nimble({"run", program, "--engine", engine});
      ExpectUserError(run, "");
      EXPECT_THAT(run.err, HasSubstr(overflow)) << body << " on " << engine;
    }
  }
  // The shape from an input: nothing folds, the kernel or the evaluator meets it.
  const std::string program =
      WriteTemp("dynfull.relay",
                "def @main(%s: Tensor[(1,), int64]) { dyn.full(1f, %s, dtype=\"float32\") }\n");
  WriteNpy(Temp("s.npy"),
           TensorNode::FromVector<int64_t>({1}, DataType::Int64(), {int64_t{1} << 62}));
  for (const std::string engine : {"ref", "vm"}) {
    const Outcome run = Nimble({"run", program, "--engine", engine, "--input", Temp("s.npy")});
    ExpectUserError(run, "");
    EXPECT_THAT(run.err, HasSubstr(overflow)) << engine;
  }
}

// A program with @main beside other functions, for choosing the entry.
constexpr const char* kTwoEntries = R"(
def @main(%x: Tensor[(2,), float32]) { %x }
def @pair(%x: Tensor[(2,), int32]) { (%x, @twice(%x)) }
def @twice(%x: Tensor[(2,), int32]) { multiply(%x, 2) }
)";

// Compiled in memory, the program keeps the function run, not only @main.
TEST_F(NimbleCli, RunAnotherFunctionOnTheVM) {
  const std::string program = WriteTemp("two.relay", kTwoEntries);
  WriteNpy(Temp("x.npy"), TensorNode::FromVector<int>({2}, DataType::Int32(), {3, 4}));
  Outcome run =
      Nimble({"run", program, "--function", "pair", "--engine", "vm", "--input", Temp("x.npy")});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(Lines(run.out),
              ElementsAre("0: Tensor[(2,), int32] [3, 4]", "1: Tensor[(2,), int32] [6, 8]"));
  ExpectUserError(Nimble({"run", program, "--function", "nope", "--engine", "vm"}),
                  program + ": no function @nope");
}

// `compile --function` chooses the functions the executable keeps; by
// default it keeps @main and what @main calls.
TEST_F(NimbleCli, CompileKeepsTheChosenFunctions) {
  const std::string program = WriteTemp("two.relay", kTwoEntries);
  WriteNpy(Temp("x.npy"), TensorNode::FromVector<int>({2}, DataType::Int32(), {3, 4}));
  auto functions = [&](const std::string& executable) {
    std::vector<std::string> names;
    for (const std::string& line : Lines(Nimble({"dump", executable, "--bytecode"}).out)) {
      const size_t def = line.find(" def @");
      if (line.starts_with("func[") && def != std::string::npos) {
        names.push_back(line.substr(def + 5, line.find('(', def) - def - 5));
      }
    }
    return names;
  };
  ASSERT_EQ(Nimble({"compile", program, "-o", Temp("main.nimble")}).status, 0);
  EXPECT_THAT(functions(Temp("main.nimble")), ElementsAre("@main"));
  Outcome both = Nimble(
      {"compile", program, "--function", "pair", "--function", "main", "-o", Temp("both.nimble")});
  ASSERT_EQ(both.status, 0) << both.err;
  EXPECT_THAT(functions(Temp("both.nimble")), ElementsAre("@main", "@pair", "@twice"));
  ASSERT_EQ(Nimble({"compile", program, "--function", "pair", "-o", Temp("pair.nimble")}).status,
            0);
  EXPECT_THAT(functions(Temp("pair.nimble")), ElementsAre("@pair", "@twice"));
  Outcome run =
      Nimble({"run", Temp("pair.nimble"), "--function", "pair", "--input", Temp("x.npy")});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(Lines(run.out),
              ElementsAre("0: Tensor[(2,), int32] [3, 4]", "1: Tensor[(2,), int32] [6, 8]"));
  ExpectUserError(Nimble({"compile", program, "--function", "nope", "-o", Temp("no.nimble")}),
                  "pass dead-code: entry function @nope is not defined");
  EXPECT_FALSE(fs::exists(Temp("no.nimble")));
}

TEST_F(NimbleCli, CheckPrintsTypedPrograms) {
  Outcome concat = Nimble({"check", Example("dynamic_concat.relay")});
  ASSERT_EQ(concat.status, 0) << concat.err;
  EXPECT_THAT(concat.out,
              AllOf(StartsWith("#[version = \"0.0.5\"]"),
                    HasSubstr("def @main(%x: Tensor[(?, 2), float32], %y: Tensor[(1, 2), "
                              "float32]) -> Tensor[(?, 2), float32]")));
  Outcome grow = Nimble({"check", Example("grow_loop.relay")});
  ASSERT_EQ(grow.status, 0) << grow.err;
  EXPECT_THAT(grow.out, HasSubstr("let %next: Tensor[(1, 2), float32] = add(%row, 1f);"));
  Outcome fold = Nimble({"check", Example("list_fold.relay")});
  ASSERT_EQ(fold.status, 0) << fold.err;
  EXPECT_THAT(fold.out, AllOf(HasSubstr("type List[A]"),
                              HasSubstr("let %scaled: List[Tensor[(4,), float32]]")));
  // The biases in the params file bind @main's parameters of those names.
  Outcome lstm =
      Nimble({"check", Example("lstm_cell.relay"), "--params", Example("data/lstm_cell.npz")});
  ASSERT_EQ(lstm.status, 0) << lstm.err;
  EXPECT_THAT(
      lstm.out,
      AllOf(HasSubstr("def @main(%xs: Tensor[(?, 8), float32]) -> Tensor[(1, 16), float32]"),
            HasSubstr("let %gates: Tensor[(1, 64), float32]"),
            HasSubstr("meta[relay.Constant][b_ih]")));
}

// ---- `nimble random` ------------------------------------------------------------

// The same tensors, in the same order, with the same names.
void ExpectSameNpz(const std::string& a, const std::string& b) {
  const auto left = ReadNpz(a);
  const auto right = ReadNpz(b);
  ASSERT_EQ(left.size(), right.size());
  for (size_t i = 0; i < left.size(); ++i) {
    EXPECT_EQ(left[i].first, right[i].first);
    EXPECT_EQ(left[i].second->TypeString(), right[i].second->TypeString());
    EXPECT_EQ(Values(left[i].second), Values(right[i].second)) << left[i].first;
  }
}

TEST_F(NimbleCli, RandomRemakesTheExampleData) {
  // As in examples/make_data.sh.
  ASSERT_EQ(Nimble({"random", "-o", Temp("lstm_cell.npz"), "--seed", "6", "--tensor", "w_ih:64x8",
                    "--tensor", "w_hh:64x16", "--tensor", "b_ih:64", "--tensor", "b_hh:64"})
                .status,
            0);
  ExpectSameNpz(Temp("lstm_cell.npz"), Example("data/lstm_cell.npz"));
  ASSERT_EQ(Nimble({"random", "-o", Temp("x.npy"), "--seed", "1", "--tensor", "x:3x2"}).status, 0);
  EXPECT_TRUE(ReadFile(Temp("x.npy")) == ReadFile(Example("data/dynamic_concat_x.npy")));
}

TEST_F(NimbleCli, RandomValuesAndFormats) {
  Outcome made =
      Nimble({"random", "-o", Temp("t.npz"), "--seed", "42", "--tensor", "f:5x8", "--tensor",
              "i:100:int32", "--tensor", "s:scalar:float64", "--tensor", "b:16:bool"});
  ASSERT_EQ(made.status, 0) << made.err;
  const auto tensors = ReadNpz(Temp("t.npz"));
  ASSERT_EQ(tensors.size(), 4u);
  EXPECT_EQ(tensors[0].first, "f");
  EXPECT_EQ(tensors[0].second->TypeString(), "Tensor[(5, 8), float32]");
  for (double value : Values(tensors[0].second)) {
    EXPECT_GE(value, -1.0);
    EXPECT_LT(value, 1.0);
  }
  EXPECT_EQ(tensors[1].second->TypeString(), "Tensor[(100,), int32]");
  for (double value : Values(tensors[1].second)) {
    EXPECT_GE(value, -4);
    EXPECT_LE(value, 4);
  }
  EXPECT_EQ(tensors[2].second->TypeString(), "Tensor[(), float64]");
  EXPECT_EQ(tensors[3].second->TypeString(), "Tensor[(16,), bool]");
  // Another seed gives other values; the same seed the same file.
  ASSERT_EQ(Nimble({"random", "-o", Temp("a.npy"), "--seed", "1", "--tensor", "f:5x8"}).status, 0);
  ASSERT_EQ(Nimble({"random", "-o", Temp("b.npy"), "--seed", "2", "--tensor", "f:5x8"}).status, 0);
  ASSERT_EQ(Nimble({"random", "-o", Temp("c.npy"), "--seed", "1", "--tensor", "f:5x8"}).status, 0);
  EXPECT_NE(Values(ReadNpy(Temp("a.npy"))), Values(ReadNpy(Temp("b.npy"))));
  EXPECT_TRUE(ReadFile(Temp("a.npy")) == ReadFile(Temp("c.npy")));
}

TEST_F(NimbleCli, RandomRejectsBadSpecs) {
  ExpectUserError(Nimble({"random", "-o", Temp("a.npy"), "--tensor", "a:3y2"}), "bad shape '3y2'");
  ExpectUserError(Nimble({"random", "-o", Temp("a.npy"), "--tensor", "a:3:float8"}),
                  "unknown dtype 'float8'");
  ExpectUserError(Nimble({"random", "-o", Temp("a.npy"), "--tensor", "a"}), "bad tensor spec 'a'");
  ExpectUserError(Nimble({"random", "-o", Temp("a.npy"), "--tensor", "a:2", "--tensor", "b:2"}),
                  Temp("a.npy") + ": a .npy file holds one tensor");
  ExpectUserError(Nimble({"random", "-o", Temp("a.npz"), "--tensor", "a:2", "--tensor", "a:3"}),
                  "tensor 'a' is given twice");
}

// ---- User errors ------------------------------------------------------------------

TEST_F(NimbleCli, SyntaxErrorNamesFileLineAndColumn) {
  const std::string program =
      WriteTemp("syntax.relay", "def @main(%x: Tensor[(2,), float32]) {\n  add(%x, \n}\n");
  ExpectUserError(Nimble({"check", program}), program + ":3:1: ");
  ExpectUserError(Nimble({"run", program, "--input", Example("data/dynamic_concat_x.npy")}),
                  program + ":3:1: ");
}

TEST_F(NimbleCli, TypeErrorNamesFileLineAndColumn) {
  const std::string program = WriteTemp(
      "types.relay",
      "def @main(%x: Tensor[(2,), float32], %y: Tensor[(3,), float32]) {\n  add(%x, %y)\n}\n");
  const Outcome outcome = Nimble({"check", program});
  ExpectUserError(outcome, program + ":2:3: add");
  EXPECT_THAT(outcome.err, AllOf(HasSubstr("2"), HasSubstr("3")));
}

TEST_F(NimbleCli, EvaluatorRuntimeErrorNamesFileLineAndColumn) {
  // Both rows are `?`, so the mismatch shows only at run time.
  const std::string program =
      WriteTemp("runtime.relay",
                "def @main(%x: Tensor[(?, 2), float32], %y: Tensor[(?, 2), float32]) {\n"
                "  let %z = multiply(%x, 2f);\n  add(%z, %y)\n}\n");
  WriteNpy(Temp("x.npy"), TensorNode::Empty({3, 2}, DataType::Float32()));
  WriteNpy(Temp("y.npy"), TensorNode::Empty({4, 2}, DataType::Float32()));
  const Outcome outcome =
      Nimble({"run", program, "--engine", "ref", "--input", Temp("x.npy"), Temp("y.npy")});
  ExpectUserError(outcome, program + ":3:3: add");
  EXPECT_THAT(outcome.err, AllOf(HasSubstr("3"), HasSubstr("4")));  // the conflicting sizes
}

// The VM names the source position of a run-time error, from a program
// compiled in memory or from an executable, which records the program's path.
TEST_F(NimbleCli, VmRuntimeErrorsNameFileLineAndColumn) {
  const std::string program =
      WriteTemp("runtime.relay",
                "def @main(%x: Tensor[(?, 2), float32], %y: Tensor[(?, 2), float32]) {\n"
                "  let %z = multiply(%x, 2f);\n  add(%z, %y)\n}\n");
  WriteNpy(Temp("x.npy"), TensorNode::Empty({3, 2}, DataType::Float32()));
  WriteNpy(Temp("y.npy"), TensorNode::Empty({4, 2}, DataType::Float32()));
  ExpectUserError(
      Nimble({"run", program, "--engine", "vm", "--input", Temp("x.npy"), Temp("y.npy")}),
      program + ":3:3: ");
  const std::string executable = Temp("runtime.nimble");
  ASSERT_EQ(Nimble({"compile", program, "-o", executable}).status, 0);
  ExpectUserError(Nimble({"run", executable, "--input", Temp("x.npy"), Temp("y.npy")}),
                  program + ":3:3: ");
  const Outcome dump = Nimble({"dump", executable, "--bytecode"});
  EXPECT_THAT(dump.out, AllOf(HasSubstr("source \"" + program + "\"\n"),
                              HasSubstr("  signature @main(%x: Tensor[(?, 2), float32], %y: "
                                        "Tensor[(?, 2), float32])\n"),
                              HasSubstr("  ; 3:3\n")));

  const std::string match = WriteTemp("match.relay",
                                      "type List[A] {\n  Cons(A, List[A]),\n  Nil,\n}\n\n"
                                      "def @head(%xs: List[float32]) -> float32 {\n"
                                      "  match? (%xs) {\n    Cons(%x, _) => %x,\n  }\n}\n\n"
                                      "def @main(%x: float32) { @head(Nil) }\n");
  WriteNpy(Temp("s.npy"), TensorNode::Scalar<float>(DataType::Float32(), 1));
  ExpectUserError(Nimble({"run", match, "--engine", "vm", "--input", Temp("s.npy")}),
                  match + ":7:3: non-exhaustive match in @head");
}

// The VM checks the inputs against the entry function's parameter types.
TEST_F(NimbleCli, VmChecksInputsAtEntry) {
  const std::string program = WriteTemp(
      "entry.relay", "def @main(%x: Tensor[(?, 2), float32], %n: int32) { add(%x, 1f) }\n");
  const std::string executable = Temp("entry.nimble");
  ASSERT_EQ(Nimble({"compile", program, "-o", executable}).status, 0);
  WriteNpy(Temp("x.npy"), TensorNode::Empty({3, 3}, DataType::Float32()));
  WriteNpy(Temp("n.npy"), TensorNode::Scalar<int32_t>(DataType::Int32(), 1));
  for (const std::string& file : {program, executable}) {
    ExpectUserError(
        Nimble({"run", file, "--engine", "vm", "--input", Temp("x.npy"), Temp("n.npy")}),
        "@main: argument 0 (%x): expected Tensor[(?, 2), float32], got Tensor[(3, 3), "
        "float32]");
    ExpectUserError(
        Nimble({"run", file, "--engine", "vm", "--input", Temp("n.npy"), Temp("n.npy")}),
        "@main: argument 0 (%x): expected Tensor[(?, 2), float32], got Tensor[(), "
        "int32]");
    ExpectUserError(Nimble({"run", file, "--engine", "vm", "--input", Temp("x.npy")}),
                    "@main needs 2 --input file(s) (for %x, %n), got 1");
  }
}

TEST_F(NimbleCli, InputErrors) {
  const std::string concat = Example("dynamic_concat.relay");
  ExpectUserError(
      Nimble({"run", concat, "--input", Temp("missing.npy"), Example("data/dynamic_concat_y.npy")}),
      "");
  EXPECT_THAT(
      Nimble({"run", concat, "--input", Temp("missing.npy"), Example("data/dynamic_concat_y.npy")})
          .err,
      HasSubstr("missing.npy"));
  const std::string bad = WriteTemp("bad.npy", "this is not a numpy file");
  ExpectUserError(Nimble({"run", concat, "--input", bad, Example("data/dynamic_concat_y.npy")}),
                  bad + ": ");
  ExpectUserError(Nimble({"run", concat, "--input", Example("data/dynamic_concat_x.npy")}),
                  "@main needs 2 --input file(s) (for %x, %y), got 1");
  // Swapped inputs: %y must have exactly one row.
  ExpectUserError(Nimble({"run", concat, "--input", Example("data/dynamic_concat_y.npy"),
                          Example("data/dynamic_concat_x.npy")}),
                  "@main: argument 1 (%y): expected Tensor[(1, 2), float32], got Tensor[(3, 2), "
                  "float32]");
  ExpectUserError(Nimble({"check", Temp("missing.relay")}), "cannot read " + Temp("missing.relay"));
  ExpectUserError(Nimble({"run", concat, "--function", "nope"}), concat + ": no function @nope");
}

TEST_F(NimbleCli, ParamsErrors) {
  const std::string lstm = Example("lstm_cell.relay");
  // Without the params file the constants are unknown.
  const Outcome no_params = Nimble({"check", lstm});
  ExpectUserError(no_params, lstm + ":");
  EXPECT_THAT(no_params.err, HasSubstr("w_ih"));
  ExpectUserError(Nimble({"check", lstm, "--params", Temp("missing.npz")}), "");
  // A bias of the wrong size cannot bind @main's parameter.
  ASSERT_EQ(Nimble({"random", "-o", Temp("p.npz"), "--tensor", "w_ih:64x8", "--tensor",
                    "w_hh:64x16", "--tensor", "b_ih:32", "--tensor", "b_hh:64"})
                .status,
            0);
  const Outcome wrong = Nimble({"check", lstm, "--params", Temp("p.npz")});
  ExpectUserError(wrong, "");
  EXPECT_THAT(wrong.err, AllOf(HasSubstr("b_ih"), HasSubstr("Tensor[(64,), float32]"),
                               HasSubstr("Tensor[(32,), float32]")));
}

// ---- dump ----------------------------------------------------------------------

// @main($0): a branch that either runs a kernel into a fresh tensor or loads the constant.
vm::Executable BranchingExecutable() {
  using vm::Instruction;
  vm::Executable exe;
  exe.target = "intel";
  exe.primitives.push_back({"negative", {}});
  exe.constants.push_back(
      {TensorNode::FromVector<float>({2, 3}, DataType::Float32(), {1, 2, 3, 4, 5, 6.5}), 0});
  exe.functions.push_back(vm::VMFunction{
      .name = "main",
      .num_params = 1,
      .register_file_size = 4,
      .instructions = {
          Instruction::LoadConsti(1, 1),
          Instruction::If(1, vm::kNoRegister, 1, 1, 5),
          Instruction::AllocStorage(vm::kNoRegister, 24, 64, DataType::Float32(), 0, 2),
          Instruction::AllocTensor(2, vm::kNoRegister, 0, {2, 3}, DataType::Float32(), 3),
          Instruction::InvokePacked(0, {0}, {3}),
          Instruction::Goto(2),
          Instruction::LoadConst(0, 3),
          Instruction::Ret(3),
      }});
  return exe;
}

TEST_F(NimbleCli, DumpPrintsTablesAndBytecode) {
  const std::string path = Temp("branch.nimble");
  BranchingExecutable().SaveToFile(path);

  Outcome bytecode = Nimble({"dump", path, "--bytecode"});
  EXPECT_EQ(bytecode.status, 0) << bytecode.err;
  EXPECT_EQ(bytecode.err, "");
  EXPECT_THAT(bytecode.out, StartsWith("target \"intel\""));
  EXPECT_THAT(
      bytecode.out,
      AllOf(HasSubstr("kernel[0] negative\n"),
            HasSubstr("const[0] Tensor[(2, 3), float32] on device[0]\n"),
            HasSubstr("def @main($0) registers 4:\n"), HasSubstr("0: $1 = load_consti 1\n"),
            HasSubstr("1: if $1 == 1 then +1 (pc 2) else +5 (pc 6)\n"),
            HasSubstr("$2 = alloc_storage size 24 align 64 float32 device[0]\n"),
            HasSubstr("$3 = alloc_tensor $2 offset 0 [2, 3] float32\n"),
            HasSubstr("invoke_packed kernel[0](in: $0; out: $3)\n"), HasSubstr("goto +2 (pc 7)\n"),
            HasSubstr("$3 = load_const const[0]\n"), HasSubstr("7: ret $3\n")));
  EXPECT_THAT(bytecode.out, Not(HasSubstr("6.5")));

  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--constants"}, {"--bytecode", "--constants"}}) {
    std::vector<std::string> args{"dump", path};
    args.insert(args.end(), flags.begin(), flags.end());
    Outcome with_values = Nimble(args);
    EXPECT_EQ(with_values.status, 0) << with_values.err;
    EXPECT_THAT(with_values.out,
                AllOf(HasSubstr("const[0] Tensor[(2, 3), float32] on device[0] = [1.0, 2.0, 3.0, "
                                "4.0, 5.0, 6.5]\n"),
                      HasSubstr("def @main($0)"), HasSubstr("invoke_packed kernel[0]")));
  }
}

TEST_F(NimbleCli, DumpRejectsBadFilesAndUsage) {
  const std::string path = Temp("branch.nimble");
  BranchingExecutable().SaveToFile(path);
  const std::string bytes = ReadFile(path);
  const std::string truncated = WriteTemp("truncated.nimble", bytes.substr(0, bytes.size() / 2));

  Outcome corrupt = Nimble({"dump", truncated, "--bytecode"});
  ExpectUserError(corrupt, "'" + truncated + "': executable: truncated");
  EXPECT_EQ(corrupt.out, "");

  Outcome missing = Nimble({"dump", Temp("missing.nimble"), "--constants"});
  ExpectUserError(missing, "");
  EXPECT_THAT(missing.err, HasSubstr(Temp("missing.nimble")));

  Outcome no_flags = Nimble({"dump", path});
  EXPECT_EQ(no_flags.status, 2);
  EXPECT_EQ(no_flags.out, "");
  EXPECT_EQ(Nimble({"dump", "--bytecode"}).status, 2);
  EXPECT_EQ(Nimble({"dump", path, "--bytecode", "--bogus"}).status, 2);
}

// ---- export-model ----------------------------------------------------------------

class NimbleExport : public NimbleCli {
 protected:
  // `nimble run` with `args` on the VM and on the evaluator; the VM's output
  // 0, after checking that the evaluator's agrees.
  Tensor RunOnBothEngines(const std::vector<std::string>& args) const {
    std::vector<Tensor> outputs;
    for (const std::string engine : {"vm", "ref"}) {
      std::vector<std::string> command{"run"};
      command.insert(command.end(), args.begin(), args.end());
      command.insert(command.end(), {"--engine", engine, "--out", Temp(engine)});
      Outcome run = Nimble(command);
      EXPECT_EQ(run.status, 0) << run.err;
      outputs.push_back(ReadNpy(Temp(engine + "/0.npy")));
    }
    const std::vector<double> vm = Values(outputs[0]);
    const std::vector<double> ref = Values(outputs[1]);
    EXPECT_EQ(vm.size(), ref.size());
    for (size_t i = 0; i < std::min(vm.size(), ref.size()); ++i) {
      EXPECT_NEAR(vm[i], ref[i], 1e-5) << "element " << i;
    }
    return outputs[0];
  }
};

TEST_F(NimbleExport, Help) {
  EXPECT_THAT(Nimble({"--help"}).out, HasSubstr("export-model"));
  Outcome help = Nimble({"export-model", "--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_THAT(help.out, AllOf(HasSubstr("lstm"), HasSubstr("--params"), HasSubstr("--layers"),
                              HasSubstr("--seed"), HasSubstr("--weights")));
}

// An exported model runs through `nimble run` with the command it prints, on
// the VM and on the evaluator alike; re-exporting its own weights gives the
// same files.
TEST_F(NimbleExport, LstmRuns) {
  Outcome exported = Nimble({"export-model", "lstm", "--layers", "2", "-o", Temp("lstm.relay"),
                             "--params", Temp("lstm.npz")});
  ASSERT_EQ(exported.status, 0) << exported.err;
  EXPECT_THAT(exported.out, HasSubstr("run: nimble run " + Temp("lstm.relay") + " --params " +
                                      Temp("lstm.npz") + " --input xs.npy"));
  ASSERT_EQ(Nimble({"random", "-o", Temp("xs.npy"), "--tensor", "xs:5x300"}).status, 0);
  EXPECT_EQ(RunOnBothEngines(
                {Temp("lstm.relay"), "--params", Temp("lstm.npz"), "--input", Temp("xs.npy")})
                ->shape(),
            (Shape{1, 512}));

  ASSERT_EQ(Nimble({"export-model", "lstm", "--layers", "2", "--weights", Temp("lstm.npz"), "-o",
                    Temp("again.relay"), "--params", Temp("again.npz")})
                .status,
            0);
  EXPECT_EQ(ReadFile(Temp("again.relay")), ReadFile(Temp("lstm.relay")));
  EXPECT_EQ(ReadFile(Temp("again.npz")), ReadFile(Temp("lstm.npz")));
  ASSERT_EQ(Nimble({"export-model", "lstm", "--layers", "2", "--seed", "2", "-o",
                    Temp("other.relay"), "--params", Temp("other.npz")})
                .status,
            0);
  EXPECT_NE(ReadFile(Temp("other.npz")), ReadFile(Temp("lstm.npz")));
}

// The Tree-LSTM takes an ADT, which `nimble run` cannot read; its
// @main_arrays takes the tree as arrays.
TEST_F(NimbleExport, TreeLstmRunsOnArrays) {
  Outcome exported =
      Nimble({"export-model", "treelstm", "-o", Temp("tree.relay"), "--params", Temp("tree.npz")});
  ASSERT_EQ(exported.status, 0) << exported.err;
  EXPECT_THAT(exported.out,
              HasSubstr("--function main_arrays --input children.npy --input leaves.npy"));
  // ((leaf 0, leaf 1), leaf 2)
  WriteNpy(Temp("children.npy"), TensorNode::FromVector<int32_t>(
                                     {5, 2}, DataType::Int32(), {-1, 0, -1, 1, 0, 1, -1, 2, 2, 3}));
  ASSERT_EQ(Nimble({"random", "-o", Temp("leaves.npy"), "--tensor", "leaves:3x300"}).status, 0);
  const std::vector<std::string> args{Temp("tree.relay"),   "--params",        Temp("tree.npz"),
                                      "--function",         "main_arrays",     "--input",
                                      Temp("children.npy"), Temp("leaves.npy")};
  const Tensor node_at_a_time = RunOnBothEngines(args);
  EXPECT_EQ(node_at_a_time->shape(), (Shape{1, 150}));
  // The same outputs with the nodes of one height batched.
  std::vector<std::string> batched{"run"};
  batched.insert(batched.end(), args.begin(), args.end());
  batched.insert(batched.end(), {"--batch-trees", "--out", Temp("batched")});
  const Outcome run = Nimble(batched);
  ASSERT_EQ(run.status, 0) << run.err;
  const std::vector<double> want = Values(node_at_a_time);
  const std::vector<double> got = Values(ReadNpy(Temp("batched/0.npy")));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
}

TEST_F(NimbleExport, BertAtAStaticLength) {
  Outcome exported = Nimble({"export-model", "bert", "--layers", "1", "--seq-len", "8", "-o",
                             Temp("bert.relay"), "--params", Temp("bert.npz")});
  ASSERT_EQ(exported.status, 0) << exported.err;
  std::ifstream program(Temp("bert.relay"));
  const std::string text((std::istreambuf_iterator<char>(program)), {});
  EXPECT_THAT(text, HasSubstr("%input_ids: Tensor[(1, 8), int32]"));
  EXPECT_THAT(text, Not(HasSubstr("?")));
}

TEST_F(NimbleExport, Errors) {
  const std::vector<std::string> out{"-o", Temp("m.relay"), "--params", Temp("m.npz")};
  auto export_model = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "export-model");
    args.insert(args.end(), out.begin(), out.end());
    return Nimble(args);
  };
  ExpectUserError(export_model({"treelstm", "--layers", "2"}),
                  "--layers applies to lstm and bert, not treelstm");
  ExpectUserError(export_model({"lstm", "--seq-len", "8"}), "--seq-len applies to bert");
  EXPECT_EQ(export_model({"bert", "--seq-len", "513"}).status, 2);
  ExpectUserError(export_model({"lstm", "--layers", "9"}),
                  "lstm: layers must be between 1 and 8, got 9");
  ASSERT_EQ(export_model({"treelstm"}).status, 0);
  Outcome wrong_weights = export_model({"lstm", "--weights", Temp("m.npz")});
  ExpectUserError(wrong_weights, Temp("m.npz") + ": missing weight 'weight_ih_l0'");
  EXPECT_THAT(wrong_weights.err, HasSubstr("(2048, 300)"));
  Outcome absent = export_model({"lstm", "--weights", Temp("absent.npz")});
  ExpectUserError(absent, "cannot open");
  EXPECT_THAT(absent.err, HasSubstr(Temp("absent.npz")));
  EXPECT_EQ(export_model({"gru"}).status, 2);
  EXPECT_EQ(Nimble({"export-model", "lstm", "-o", Temp("m.relay")}).status, 2);  // no --params
  EXPECT_EQ(export_model({"lstm", "--layers", "two"}).status, 2);
}

// ---- ONNX models ------------------------------------------------------------

// A small ONNX model written with the onnx package's helpers: y = relu(x W +
// b) with a dynamic batch axis; its path, or "" when python3-onnx is missing.
std::string WriteOnnxModel(const fs::path& dir) {
  const std::string path = (dir / "small.onnx").string();
  const std::string script =
      "import numpy as np, onnx\n"
      "from onnx import helper, numpy_helper, TensorProto\n"
      "w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, 'w')\n"
      "b = numpy_helper.from_array(np.array([-1, 0, 1], dtype=np.float32), 'b')\n"
      "nodes = [helper.make_node('MatMul', ['x', 'w'], ['xw'], name='project'),\n"
      "         helper.make_node('Add', ['xw', 'b'], ['s'], name='bias'),\n"
      "         helper.make_node('Relu', ['s'], ['y'], name='relu')]\n"
      "graph = helper.make_graph(nodes, 'small',\n"
      "    [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['batch', 4])],\n"
      "    [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['batch', 3])], [w, b])\n"
      "model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 13)])\n"
      "onnx.checker.check_model(model)\n"
      "onnx.save(model, '" +
      path + "')\n";
  std::ofstream(dir / "make_onnx.py") << script;
  const std::string command =
      "/usr/bin/python3 " + (dir / "make_onnx.py").string() + " 2>/dev/null";
  return std::system(command.c_str()) == 0 ? path : "";
}

TEST_F(NimbleCli, OnnxModelsImportRunAndCompile) {
  const std::string model = WriteOnnxModel(dir_);
  if (model.empty()) GTEST_SKIP() << "/usr/bin/python3 has no onnx (apt install python3-onnx)";
  const Tensor x =
      TensorNode::FromVector<float>({2, 4}, DataType::Float32(), {1, 2, 3, 4, -1, -2, -3, -4});
  WriteNpy(Temp("x.npy"), x);
  const Outcome imported =
      Nimble({"import", model, "-o", Temp("small.relay"), "--params", Temp("small.npz")});
  ASSERT_EQ(imported.status, 0) << imported.err;
  EXPECT_THAT(imported.out, HasSubstr("wrote " + Temp("small.relay")));
  EXPECT_THAT(imported.out, HasSubstr("--input x.npy"));
  EXPECT_THAT(ReadFile(Temp("small.relay")), HasSubstr("%x: Tensor[(?, 4), float32]"));

  const Outcome direct = Nimble({"run", model, "--input", Temp("x.npy"), "--out", Temp("direct")});
  ASSERT_EQ(direct.status, 0) << direct.err;
  const Outcome text = Nimble({"run", Temp("small.relay"), "--params", Temp("small.npz"), "--input",
                               Temp("x.npy"), "--out", Temp("text")});
  ASSERT_EQ(text.status, 0) << text.err;
  ASSERT_EQ(Nimble({"compile", model, "-o", Temp("small.nimble")}).status, 0);
  const Outcome compiled =
      Nimble({"run", Temp("small.nimble"), "--input", Temp("x.npy"), "--out", Temp("compiled")});
  ASSERT_EQ(compiled.status, 0) << compiled.err;
  // relu(x W + b) by hand: W[k][j] = (3k + j) / 10.
  std::vector<double> expected;
  for (int row = 0; row < 2; ++row) {
    for (int j = 0; j < 3; ++j) {
      double sum = j - 1;
      for (int k = 0; k < 4; ++k) sum += x->data<float>()[row * 4 + k] * (3 * k + j) / 10.0;
      expected.push_back(std::max(sum, 0.0));
    }
  }
  for (const char* out : {"direct", "text", "compiled"}) {
    const std::vector<double> values = Values(ReadNpy(Temp(std::string(out) + "/0.npy")));
    ASSERT_EQ(values.size(), expected.size()) << out;
    for (size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(values[i], expected[i], 1e-5) << out;
  }
}

// --dim-bound types a named dimension `?<=N`: the VM then refuses a larger
// input, and a name or form it cannot take is a user error.
TEST_F(NimbleCli, OnnxDimensionsTakeABound) {
  const std::string model = WriteOnnxModel(dir_);
  if (model.empty()) GTEST_SKIP() << "/usr/bin/python3 has no onnx (apt install python3-onnx)";
  const Outcome checked = Nimble({"check", model, "--dim-bound", "batch=3"});
  ASSERT_EQ(checked.status, 0) << checked.err;
  EXPECT_THAT(checked.out, HasSubstr("%x: Tensor[(?<=3, 4), float32]"));
  ASSERT_EQ(Nimble({"import", model, "-o", Temp("bounded.relay"), "--params", Temp("bounded.npz"),
                    "--dim-bound", "batch=3"})
                .status,
            0);
  EXPECT_THAT(ReadFile(Temp("bounded.relay")), HasSubstr("%x: Tensor[(?<=3, 4), float32]"));
  WriteNpy(Temp("two.npy"), TensorNode::Empty({2, 4}, DataType::Float32()));
  WriteNpy(Temp("four.npy"), TensorNode::Empty({4, 4}, DataType::Float32()));
  EXPECT_EQ(Nimble({"run", model, "--dim-bound", "batch=3", "--input", Temp("two.npy")}).status, 0);
  const Outcome past =
      Nimble({"run", model, "--dim-bound", "batch=3", "--input", Temp("four.npy")});
  EXPECT_EQ(past.status, 1);
  EXPECT_THAT(past.err, HasSubstr("(4, 4)"));

  ASSERT_EQ(
      Nimble({"compile", model, "--dim-bound", "batch=3", "-o", Temp("bounded.nimble")}).status, 0);
  const Outcome compiled_past =
      Nimble({"run", Temp("bounded.nimble"), "--input", Temp("four.npy")});
  EXPECT_EQ(compiled_past.status, 1);
  EXPECT_THAT(compiled_past.err, HasSubstr("(4, 4)"));
  ExpectUserError(Nimble({"run", Temp("bounded.nimble"), "--dim-bound", "batch=3"}),
                  Temp("bounded.nimble") + ": --dim-bound applies to ONNX models");

  ExpectUserError(
      Nimble({"check", model, "--dim-bound", "sequence=8"}),
      model +
          ": a bound is given for dimension 'sequence', which no graph input has (their "
          "named dimensions: 'batch')");
  for (const std::string bad : {"batch", "batch=0", "batch=x", "=4", "batch=4k"}) {
    ExpectUserError(Nimble({"check", model, "--dim-bound", bad}), "--dim-bound takes NAME=N");
  }
  ExpectUserError(Nimble({"check", model, "--dim-bound", "batch=3", "--dim-bound", "batch=4"}),
                  "--dim-bound gives dimension 'batch' twice");
  ExpectUserError(Nimble({"check", Temp("bounded.relay"), "--params", Temp("bounded.npz"),
                          "--dim-bound", "batch=3"}),
                  Temp("bounded.relay") + ": --dim-bound applies to ONNX models");
}

TEST_F(NimbleCli, BadOnnxFilesAreUserErrors) {
  const std::string junk = WriteTemp("junk.onnx", "this is not a protobuf \xff\xff\xff");
  ExpectUserError(Nimble({"run", junk}), junk + ": not an ONNX model");
  ExpectUserError(
      Nimble({"import", Temp("missing.onnx"), "-o", Temp("m.relay"), "--params", Temp("m.npz")}),
      Temp("missing.onnx") + ": cannot open it");
  const std::string model = WriteOnnxModel(dir_);
  if (model.empty()) GTEST_SKIP() << "/usr/bin/python3 has no onnx (apt install python3-onnx)";
  ExpectUserError(Nimble({"run", model, "--params", Temp("w.npz")}),
                  Temp("w.npz") + ": an ONNX model carries its weights");
  WriteNpy(Temp("wrong.npy"), TensorNode::Empty({2, 5}, DataType::Float32()));
  const Outcome wrong_shape = Nimble({"run", model, "--input", Temp("wrong.npy")});
  EXPECT_EQ(wrong_shape.status, 1);
  EXPECT_THAT(wrong_shape.err, HasSubstr("(2, 5)"));
}

}  // namespace
}  // namespace nimble
