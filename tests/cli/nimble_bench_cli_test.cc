// nimble-bench's acceptance tests: the real binary as a child process, on
// small models over synthetic data, recording into a real results.db.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Outcome {
  int status = -1;
  std::string out;
};

// Runs a shell command; stdout and stderr together.
Outcome Shell(std::string command) {
  command += " 2>&1";
  Outcome outcome;
  FILE* pipe = popen(command.c_str(), "r");
  std::array<char, 4096> buffer{};
  size_t read = 0;
  while ((read = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    outcome.out.append(buffer.data(), read);
  const int status = pclose(pipe);
  outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

// Runs nimble-bench with `args`.
Outcome Bench(const std::vector<std::string>& args) {
  std::string command = NIMBLE_BENCH_BINARY;
  for (const std::string& arg : args) command += " '" + arg + "'";
  return Shell(command);
}

const std::vector<std::string> kQuick = {"--sentences", "4", "--warmup",  "1",
                                         "--repeat",    "2", "--threads", "1"};

std::vector<std::string> With(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

class NimbleBenchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nimble_bench_cli_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // Each case measures kernels into its own tuning database: a compile's
    // kernel choices must not depend on what other suites, running beside
    // this one, measured meanwhile.
    setenv("NIMBLE_TUNING_DB", (dir_ / "kernel_measurements.db").c_str(), 1);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Db() const { return (dir_ / "results.db").string(); }

  // Writes `model` with `export_models.py EXPORT_ARGS`, runs it quickly with
  // --onnx and checks the run recorded as an onnx model; its JSON, null on
  // a failure.
  nlohmann::json ExportAndRunOnnx(const std::string& model, const std::string& export_args) {
    const Outcome exported = Shell(std::string("/usr/bin/python3 ") + NIMBLE_SOURCE_DIR +
                                   "/tests/compiler/onnx/export_models.py " + export_args);
    EXPECT_EQ(exported.status, 0) << exported.out;
    const Outcome run = Bench(With({"run", "--onnx", model, "--db", Db(), "--json"}, kQuick));
    EXPECT_EQ(run.status, 0) << run.out;
    if (exported.status != 0 || run.status != 0) return nullptr;
    const nlohmann::json result = nlohmann::json::parse(run.out);
    EXPECT_EQ(result["model"], "onnx");
    EXPECT_EQ(result["configuration"]["onnx"], model);
    EXPECT_GT(result["measurements"]["us_per_token"]["value"].get<double>(), 0);
    EXPECT_THAT(Query("SELECT model || ' ' || status FROM runs"),
                ::testing::ElementsAre("onnx done"));
    return result;
  }

  // The rows of `sql`'s first column, in results.db or the file `path`.
  std::vector<std::string> Query(const std::string& sql, const std::string& path = "") const {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open((path.empty() ? Db() : path).c_str(), &db), SQLITE_OK);
    sqlite3_stmt* statement = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr), SQLITE_OK) << sql;
    std::vector<std::string> rows;
    while (sqlite3_step(statement) == SQLITE_ROW) {
      const unsigned char* text = sqlite3_column_text(statement, 0);
      rows.emplace_back(text ? reinterpret_cast<const char*>(text) : "NULL");
    }
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return rows;
  }

  fs::path dir_;
};

// Two layers: memory planning coalesces the first layer's buffers (one
// layer leaves it nothing to merge, each buffer a token's own or escaping).
TEST_F(NimbleBenchCli, LstmRunIsRecorded) {
  const Outcome run = Bench(With(
      {"run", "--model", "lstm", "--layers", "2", "--hidden-size", "16", "--db", Db(), "--json"},
      kQuick));
  ASSERT_EQ(run.status, 0) << run.out;
  const nlohmann::json result = nlohmann::json::parse(run.out);
  EXPECT_EQ(result["model"], "lstm");
  EXPECT_EQ(result["configuration"]["hidden_size"], 16);
  const nlohmann::json& figures = result["measurements"];
  EXPECT_GT(figures["us_per_token"]["value"].get<double>(), 0);
  EXPECT_EQ(figures["us_per_token"]["unit"], "us");
  EXPECT_EQ(figures["sentences"]["value"].get<double>(), 4);
  EXPECT_GT(figures["kernel_fraction"]["value"].get<double>(), 0);
  EXPECT_LT(figures["kernel_fraction"]["value"].get<double>(), 1);
  EXPECT_LT(figures["allocations_written_planned"]["value"].get<double>(),
            figures["allocations_written_unplanned"]["value"].get<double>());
  EXPECT_LT(figures["alloc_storage_per_sentence_planned"]["value"].get<double>(),
            figures["alloc_storage_per_sentence_unplanned"]["value"].get<double>());

  EXPECT_THAT(Query("SELECT status FROM runs"), ::testing::ElementsAre("done"));
  EXPECT_THAT(Query("SELECT model || ' ' || threads || ' ' || dataset FROM runs"),
              ::testing::ElementsAre("lstm 1 synthetic"));
  EXPECT_EQ(Query("SELECT count(*) FROM measurements")[0], std::to_string(figures.size()));

  // The run names the commit the binary was built from, marked when the
  // tracked files differed from it (the test runs right after its build).
  const Outcome head = Shell("git -C " NIMBLE_SOURCE_DIR " rev-parse --short=12 HEAD");
  const std::string commit = Query("SELECT commit_id FROM runs")[0];
  if (head.status == 0) {
    EXPECT_THAT(commit, ::testing::MatchesRegex(head.out.substr(0, 12) + "(\\+dirty)?"));
  } else {
    EXPECT_EQ(commit, "unknown");
  }
}

TEST_F(NimbleBenchCli, TreeLstmAndBertWithAStaticLength) {
  const Outcome tree =
      Bench(With({"run", "--model", "treelstm", "--hidden-size", "8", "--db", Db()}, kQuick));
  ASSERT_EQ(tree.status, 0) << tree.out;
  EXPECT_THAT(tree.out, HasSubstr("us/token"));
  const Outcome bert =
      Bench(With({"run", "--model", "bert", "--layers", "2", "--hidden-size", "32", "--heads", "2",
                  "--ffn-size", "64", "--static-seq-len", "24", "--db", Db()},
                 kQuick));
  ASSERT_EQ(bert.status, 0) << bert.out;
  EXPECT_THAT(bert.out, HasSubstr("at length 24"));
  EXPECT_THAT(Query("SELECT model FROM runs WHERE status = 'done' ORDER BY id"),
              ::testing::ElementsAre("treelstm", "bert"));
  EXPECT_THAT(Query("SELECT name FROM measurements WHERE name LIKE 'fixed_len_static_us%'"),
              ::testing::ElementsAre("fixed_len_static_us_per_token"));
  // The two programs' passes took turns; their ratio is recorded beside them.
  EXPECT_THAT(bert.out, HasSubstr("dynamic / static "));
  const std::vector<std::string> ratio =
      Query("SELECT value FROM measurements WHERE name = 'fixed_len_dynamic_over_static'");
  ASSERT_THAT(ratio, ::testing::SizeIs(1));
  EXPECT_GT(std::stod(ratio[0]), 0.0);
}

TEST_F(NimbleBenchCli, ErrorsAreReportedAndRecorded) {
  const Outcome missing = Bench(With({"run", "--model", "lstm", "--hidden-size", "8", "--dataset",
                                      (dir_ / "nope.tsv").string(), "--db", Db()},
                                     kQuick));
  EXPECT_EQ(missing.status, 1);
  EXPECT_THAT(missing.out, HasSubstr("error: "));
  EXPECT_THAT(missing.out, HasSubstr("nope.tsv"));
  EXPECT_THAT(Query("SELECT status FROM runs"), ::testing::ElementsAre("failed"));

  const Outcome no_weights = Bench(With(
      {"run", "--model", "lstm", "--weights", (dir_ / "w.npz").string(), "--db", Db()}, kQuick));
  EXPECT_EQ(no_weights.status, 1);
  EXPECT_THAT(no_weights.out, HasSubstr("w.npz"));

  EXPECT_EQ(Bench({"run", "--model", "resnet"}).status, 2);
  EXPECT_EQ(Bench({"run"}).status, 2);
  const Outcome bert_no_vocab = Bench(With(
      {"run", "--model", "bert", "--dataset", (dir_ / "x.tsv").string(), "--db", Db()}, kQuick));
  EXPECT_EQ(bert_no_vocab.status, 1);
}

TEST_F(NimbleBenchCli, ARunRecordsWhatReallyRanIt) {
  const Outcome run =
      Bench(With({"run", "--model", "lstm", "--hidden-size", "8", "--db", Db()}, kQuick));
  ASSERT_EQ(run.status, 0) << run.out;
  struct utsname system {};
  uname(&system);
  EXPECT_THAT(Query("SELECT arch || ' ' || emulated || ' ' || target FROM runs"),
              ::testing::ElementsAre(std::string(system.machine) + " 0 " +
                                     (std::string(system.machine) == "aarch64" ? "arm" : "intel")));
  // The record an agent's child prints: the same row, written nowhere.
  const Outcome record = Bench(With(
      {"run", "--model", "lstm", "--hidden-size", "8", "--record-json", "--db", Db()}, kQuick));
  ASSERT_EQ(record.status, 0) << record.out;
  const nlohmann::json json = nlohmann::json::parse(record.out);
  EXPECT_EQ(json["arch"], system.machine);
  EXPECT_EQ(json["emulated"], false);
  EXPECT_FALSE(json["measurements"].empty());
  EXPECT_THAT(Query("SELECT count(*) FROM runs"), ::testing::ElementsAre("1"));
}

TEST_F(NimbleBenchCli, AForeignTargetIsRefusedNotMislabelled) {
  struct utsname system {};
  uname(&system);
  if (std::string(system.machine) != "x86_64") GTEST_SKIP() << "checks an x86-64 host";
  const Outcome arm =
      Bench(With({"run", "--model", "lstm", "--target", "arm", "--db", Db()}, kQuick));
  EXPECT_EQ(arm.status, 1);
  EXPECT_THAT(arm.out, HasSubstr("--target arm on this x86_64 host would record x86 figures"));
  EXPECT_THAT(arm.out, HasSubstr("--emulate"));
  // Nothing was recorded under a target that did not run it.
  EXPECT_FALSE(fs::exists(Db()));
}

TEST_F(NimbleBenchCli, ProbeDescribesThisHost) {
  const Outcome probe = Bench({"probe"});
  ASSERT_EQ(probe.status, 0) << probe.out;
  const nlohmann::json host = nlohmann::json::parse(probe.out);
  struct utsname system {};
  uname(&system);
  EXPECT_EQ(host["arch"], system.machine);
  EXPECT_GT(host["cores"].get<int>(), 0);
  EXPECT_GT(host["memory_bytes"].get<int64_t>(), 0);
  EXPECT_FALSE(host["cpu_model"].get<std::string>().empty());
}

TEST_F(NimbleBenchCli, EmulateRunsTheArmBuildUnderQemuAndSaysSo) {
  struct utsname system {};
  uname(&system);
  if (std::string(system.machine) != "x86_64") GTEST_SKIP() << "checks an x86-64 host";
  if (!fs::exists(NIMBLE_SOURCE_DIR "/build-arm/harness/cli/nimble-bench")) {
    GTEST_SKIP() << "no build-arm/: run scripts/build-arm.sh (as root) first";
  }
  const Outcome arm = Bench(With({"run", "--model", "lstm", "--hidden-size", "8", "--target", "arm",
                                  "--emulate", "--db", Db()},
                                 kQuick));
  ASSERT_EQ(arm.status, 0) << arm.out;
  EXPECT_THAT(arm.out, HasSubstr("(aarch64, emulated by qemu-aarch64)"));
  EXPECT_THAT(Query("SELECT target || ' ' || arch || ' ' || emulated || ' ' || emulator FROM runs"),
              ::testing::ElementsAre("arm aarch64 1 qemu-aarch64"));
}

// ---- Reports, gates and peer baselines ----------------------------------------

// scripts/gate-runs.sh into `db`, with `environment` ("NAME=value ...").
Outcome GateRuns(const std::string& db, const std::string& environment = "") {
  return Shell(environment +
               " NIMBLE_BENCH=" NIMBLE_BENCH_BINARY " bash " NIMBLE_SOURCE_DIR
               "/scripts/gate-runs.sh '" +
               db + "'");
}

constexpr const char* kCommittedBaseline = NIMBLE_SOURCE_DIR "/results/baseline.db";

// CI's gate: this build's deterministic figures against the committed baseline.
TEST_F(NimbleBenchCli, CommittedBaselineHolds) {
  const Outcome runs = GateRuns(Db());
  ASSERT_EQ(runs.status, 0) << runs.out;
  const Outcome gate = Bench({"gate", "--baseline", kCommittedBaseline, "--current", Db()});
  EXPECT_EQ(gate.status, 0) << gate.out;
  EXPECT_THAT(gate.out, HasSubstr("PASS: 0 regressed"));
  EXPECT_THAT(gate.out, ::testing::Not(HasSubstr("not measured in current")));
}

// A build without memory planning's passes fails the gate, and its runs say
// which build made them.
TEST_F(NimbleBenchCli, AWorseBuildFailsTheGate) {
  const Outcome runs = GateRuns(Db(), "NIMBLE_DISABLE_PASSES=coalesce-storage,insert-kills");
  ASSERT_EQ(runs.status, 0) << runs.out;
  const Outcome gate = Bench({"gate", "--baseline", kCommittedBaseline, "--current", Db()});
  EXPECT_EQ(gate.status, 1) << gate.out;
  EXPECT_THAT(gate.out, ::testing::ContainsRegex("alloc_storage_per_sentence_planned +[0-9.]+ +"
                                                 "[0-9.]+ +\\+[0-9.]+% +REGRESSED"));
  EXPECT_THAT(gate.out, HasSubstr("FAIL: "));
  for (const std::string& commit : Query("SELECT commit_id FROM runs")) {
    EXPECT_THAT(commit, ::testing::EndsWith("+disabled:coalesce-storage,insert-kills"));
  }
}

TEST_F(NimbleBenchCli, GateRefusesWhatItCannotCompare) {
  ASSERT_EQ(
      Bench(With({"run", "--model", "lstm", "--hidden-size", "16", "--db", Db()}, kQuick)).status,
      0);
  EXPECT_THAT(Bench({"gate", "--baseline", (dir_ / "absent.db").string(), "--current", Db()}),
              ::testing::Field(&Outcome::out, HasSubstr("absent.db: no such results database")));
  const Outcome metric = Bench({"gate", "--baseline", kCommittedBaseline, "--current", Db(),
                                "--metrics", "kernel_fraction"});
  EXPECT_EQ(metric.status, 1);
  EXPECT_THAT(metric.out, HasSubstr("cannot gate on 'kernel_fraction'"));
  const Outcome silent = Bench(
      {"gate", "--update-baseline", "--baseline", (dir_ / "new.db").string(), "--current", Db()});
  EXPECT_EQ(silent.status, 1);
  EXPECT_THAT(silent.out, HasSubstr("needs --reason"));
  EXPECT_FALSE(fs::exists(dir_ / "new.db"));
}

// The committed report (results/paper/, which README's figures quote) is
// what `nimble-bench report` makes of the committed database, byte for byte.
// The database is read from a copy, under the same relative path, so the
// test never touches the source tree.
TEST_F(NimbleBenchCli, TheCommittedReportIsTheReportOfTheCommittedDatabase) {
  const fs::path committed = NIMBLE_SOURCE_DIR "/results";
  fs::create_directories(dir_ / "results");
  fs::copy_file(committed / "paper.db", dir_ / "results" / "paper.db");
  const Outcome report =
      Shell("cd '" + dir_.string() +
            "' && " NIMBLE_BENCH_BINARY " report --db results/paper.db --out regenerated");
  ASSERT_EQ(report.status, 0) << report.out;
  const auto text_of = [](const fs::path& path) {
    std::ifstream file(path);
    return std::string(std::istreambuf_iterator<char>(file), {});
  };
  for (const char* page : {"report.md", "index.html"}) {
    const std::string expected = text_of(committed / "paper" / page);
    ASSERT_FALSE(expected.empty()) << page;
    EXPECT_TRUE(text_of(dir_ / "regenerated" / page) == expected)
        << "results/paper/" << page << " is not the report of results/paper.db: regenerate it "
        << "in the source root: build/harness/cli/nimble-bench report --db results/paper.db "
           "--out results/paper";
  }
}

// Timings are gated by a test over the runs of each side: two runs a side
// can never reach p < 0.05, so the gate says so, with an exit status of its
// own (neither pass nor fail nor a usage error).
TEST_F(NimbleBenchCli, ATimingGateOnTwoRunsASideIsInconclusive) {
  for (int round = 0; round < 2; ++round) {
    ASSERT_EQ(
        Bench(With({"run", "--model", "lstm", "--hidden-size", "16", "--db", Db()}, kQuick)).status,
        0);
  }
  const Outcome gate =
      Bench({"gate", "--baseline", Db(), "--current", Db(), "--metrics", "us_per_token"});
  EXPECT_EQ(gate.status, 3) << gate.out;
  EXPECT_THAT(gate.out, HasSubstr("inconclusive"));
  EXPECT_THAT(gate.out, HasSubstr("2 more"));
}

// A counted run: callgrind's count of one pass on one thread, and no times.
// Its options reach the counted child (--no-fusion shows in its
// configuration).
TEST_F(NimbleBenchCli, ACountedRunRecordsInstructionsAndNoTimes) {
  if (Shell("valgrind --version").status != 0) GTEST_SKIP() << "no valgrind (apt install valgrind)";
  const Outcome counted =
      Bench(With({"run", "--model", "lstm", "--hidden-size", "16", "--no-fusion",
                  "--count-instructions", "--kernels", "generated", "--db", Db()},
                 kQuick));
  ASSERT_EQ(counted.status, 0) << counted.out;
  EXPECT_THAT(counted.out, HasSubstr(", 4 sentences, "));
  EXPECT_THAT(counted.out,
              ::testing::ContainsRegex("instructions +[0-9]+ in one pass \\([0-9]+ per "
                                       "token\\), counted by callgrind"));
  EXPECT_THAT(counted.out, ::testing::Not(HasSubstr("us/token")));
  EXPECT_THAT(Query("SELECT threads || ' ' || json_extract(configuration, '$.counted_by') || ' ' "
                    "|| json_extract(configuration, '$.fusion') FROM runs"),
              ::testing::ElementsAre("1 callgrind 0"));
  EXPECT_THAT(Query("SELECT name FROM measurements ORDER BY name"),
              ::testing::ElementsAre("cpu_instructions", "cpu_instructions_per_token", "sentences",
                                     "tokens"));
  // A 16-wide LSTM over some 80 tokens: more than a thousand instructions a
  // token, fewer than a million.
  EXPECT_THAT(Query("SELECT (SELECT value FROM measurements WHERE name = 'cpu_instructions') / "
                    "(SELECT value FROM measurements WHERE name = 'tokens') BETWEEN 1e3 AND 1e6"),
              ::testing::ElementsAre("1"));

  // glibc's malloc perturbation (meson's test runner sets it) adds no
  // instructions to the count: the same run counts the same to within 0.1%.
  // Not exactly: the count moves by a few hundred of these 2.6 million with
  // the stack's alignment, which the length of the process's environment
  // sets; perturbation, unneutralised, adds 1% here (12% to BERT's).
  const Outcome perturbed = Shell(
      "MALLOC_PERTURB_=165 " + std::string(NIMBLE_BENCH_BINARY) +
      " run --model lstm --hidden-size 16 --no-fusion --count-instructions --kernels generated "
      "--sentences 4 --warmup 1 --repeat 2 --threads 1 --db '" +
      Db() + "'");
  ASSERT_EQ(perturbed.status, 0) << perturbed.out;
  const std::vector<std::string> counts =
      Query("SELECT value FROM measurements WHERE name = 'cpu_instructions' ORDER BY run_id");
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_NEAR(std::stod(counts[1]) / std::stod(counts[0]), 1.0, 1e-3)
      << counts[0] << " then " << counts[1];

  const Outcome threads =
      Bench({"run", "--model", "lstm", "--count-instructions", "--threads", "2", "--db", Db()});
  EXPECT_EQ(threads.status, 1);
  EXPECT_THAT(threads.out, HasSubstr("--count-instructions counts one thread"));
  EXPECT_THAT(Query("SELECT count(*) FROM runs"), ::testing::ElementsAre("2"));
}

// `microbench dispatch` on one small shape: a microbench run in results.db
// with the shape's figures, which the report's Figure 3 shows; bad options
// fail with their cause and record nothing.
TEST_F(NimbleBenchCli, ADispatchMicrobenchmarkIsRecordedAndReported) {
  const Outcome bench =
      Bench({"microbench", "dispatch", "--shapes", "16x8", "--lengths", "3", "4", "--degrees", "2",
             "1", "--rounds", "1", "--min-time", "0", "--threads", "1", "--db", Db()});
  ASSERT_EQ(bench.status, 0) << bench.out;
  EXPECT_THAT(bench.out, HasSubstr("dense_16x8  static "));
  EXPECT_THAT(bench.out, HasSubstr("dispatch/2 "));
  EXPECT_THAT(Query("SELECT kind || ' ' || model || ' ' || threads || ' ' || status FROM runs"),
              ::testing::ElementsAre("microbench dispatch 1 done"));
  EXPECT_THAT(
      Query("SELECT name FROM measurements ORDER BY name"),
      ::testing::ElementsAre("dense_16x8.dispatch1_relative", "dense_16x8.dispatch1_us",
                             "dense_16x8.dispatch1_worst_relative", "dense_16x8.dispatch2_relative",
                             "dense_16x8.dispatch2_us", "dense_16x8.dispatch2_worst_relative",
                             "dense_16x8.static_us"));
  const Outcome report = Bench({"report", "--db", Db(), "--out", (dir_ / "report").string()});
  ASSERT_EQ(report.status, 0) << report.out;
  std::ifstream markdown(dir_ / "report" / "report.md");
  const std::string text((std::istreambuf_iterator<char>(markdown)), {});
  // One row per shape and dispatch/k: one run gives no interval, so no verdict.
  EXPECT_THAT(text, ::testing::ContainsRegex(
                        "\\| dense_16x8 \\| dispatch/2 \\| intel \\| [^\n]*\\| 1 \\| [0-9.]+ "
                        "\\| [0-9.]+ \\| 1 run: no interval \\| [0-9.]+ \\| [^|]+ \\| "
                        "inconclusive: [^|]+ \\| \\[run 1\\]"));

  const Outcome shape = Bench({"microbench", "dispatch", "--shapes", "16by8", "--db", Db()});
  EXPECT_EQ(shape.status, 2);
  EXPECT_THAT(shape.out, HasSubstr("expected INxOUT (e.g. 768x3072), got '16by8'"));
  const Outcome length = Bench({"microbench", "dispatch", "--lengths", "0", "--db", Db()});
  EXPECT_EQ(length.status, 1);
  EXPECT_THAT(length.out, HasSubstr("microbench dispatch: length 0 (1 to 4096)"));
  EXPECT_THAT(Query("SELECT count(*) FROM runs"), ::testing::ElementsAre("1"));
}

// What a peer reports of its OpenMP waiting goes into its run's
// configuration and the report's label: one PyTorch variant's figures move
// several times over between policies. The interpreter here stands in for
// one with torch: it prints the line peer_bench.py prints, with the policy
// its environment gives (peer_bench.py's default, PASSIVE, when none).
TEST_F(NimbleBenchCli, APyTorchRunRecordsItsOpenMpWaitPolicy) {
  const fs::path python = dir_ / "python";
  {
    std::ofstream script(python);
    script << "#!/bin/sh\n"
              "echo '{\"framework\": \"pytorch\", \"variant\": \"mv_script\", \"version\": "
              "\"stand-in\", \"omp_wait_policy\": \"'\"${OMP_WAIT_POLICY:-PASSIVE}\"'\", "
              "\"figures\": {\"us_per_token\": 50.0, \"sentences\": 4, \"tokens\": 40, "
              "\"max_abs_error\": 0.0}}'\n";
  }
  fs::permissions(python, fs::perms::owner_all);
  const std::vector<std::string> baseline = {
      "baseline",      "--framework", "pytorch", "--python", python.string(), "--model", "lstm",
      "--hidden-size", "16",          "--db",    Db()};
  unsetenv("OMP_WAIT_POLICY");
  ASSERT_EQ(Bench(With(baseline, kQuick)).status, 0);
  setenv("OMP_WAIT_POLICY", "ACTIVE", 1);
  const Outcome active = Bench(With(baseline, kQuick));
  unsetenv("OMP_WAIT_POLICY");
  ASSERT_EQ(active.status, 0) << active.out;
  EXPECT_THAT(
      Query("SELECT json_extract(configuration, '$.omp_wait_policy') FROM runs ORDER BY id"),
      ::testing::ElementsAre("PASSIVE", "ACTIVE"));

  const fs::path out = dir_ / "report";
  ASSERT_EQ(Bench({"report", "--db", Db(), "--out", out.string()}).status, 0);
  std::ifstream file(out / "report.md");
  const std::string markdown((std::istreambuf_iterator<char>(file)), {});
  EXPECT_THAT(markdown, HasSubstr("| PyTorch (mv_script) |"));
  EXPECT_THAT(markdown, HasSubstr("| PyTorch (mv_script, OMP_WAIT_POLICY=ACTIVE) |"));
}

bool PythonImports(const std::string& python, const std::string& module) {
  return Shell(python + " -c 'import " + module + "'").status == 0;
}

// The peer runs beside Nimble's in results.db and in the report.
TEST_F(NimbleBenchCli, PyTorchBaselineAndReport) {
  if (!PythonImports("/usr/bin/python3", "torch"))
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch)";
  const std::vector<std::string> model = {"--model", "lstm", "--hidden-size", "16", "--db", Db()};
  ASSERT_EQ(Bench(With(With({"run"}, model), kQuick)).status, 0);
  const Outcome baseline = Bench(With(With({"baseline", "--framework", "pytorch"}, model), kQuick));
  ASSERT_EQ(baseline.status, 0) << baseline.out;
  EXPECT_THAT(baseline.out, HasSubstr("pytorch native"));
  EXPECT_THAT(baseline.out, HasSubstr("pytorch mv_script"));
  EXPECT_THAT(
      Query("SELECT framework || ' ' || ifnull(json_extract(configuration, '$.variant'), '-') "
            "FROM runs ORDER BY id"),
      ::testing::ElementsAre("nimble -", "pytorch native", "pytorch mv_script"));
  EXPECT_THAT(Query("SELECT count(*) FROM measurements WHERE name = 'max_abs_error' AND value < "
                    "1e-4"),
              ::testing::ElementsAre("2"));

  const fs::path out = dir_ / "report";
  const Outcome report = Bench({"report", "--db", Db(), "--out", out.string()});
  ASSERT_EQ(report.status, 0) << report.out;
  std::ifstream file(out / "report.md");
  const std::string markdown((std::istreambuf_iterator<char>(file)), {});
  EXPECT_THAT(markdown, HasSubstr("| PyTorch (mv_script) | 1 | intel |"));
  EXPECT_THAT(markdown, ::testing::ContainsRegex("\\| Nimble \\| 1 \\| intel \\|.*\\[run 1\\]"));
  EXPECT_THAT(markdown, HasSubstr("id=\"run-3\""));
  EXPECT_TRUE(fs::exists(out / "index.html"));
}

TEST_F(NimbleBenchCli, ABaselineWithoutItsInterpreterSaysSo) {
  const Outcome missing =
      Bench(With({"baseline", "--framework", "pytorch", "--model", "lstm", "--hidden-size", "16",
                  "--python", "/nonexistent/python3", "--db", Db()},
                 kQuick));
  EXPECT_EQ(missing.status, 1);
  EXPECT_THAT(missing.out, HasSubstr("could not start /nonexistent/python3"));
  EXPECT_FALSE(fs::exists(Db())) << "a failed baseline records nothing";
}

// On --target nvidia the peer is PyTorch on the GPU, recorded with the GPU
// it ran on; without a GPU nothing runs and nothing is recorded.
TEST_F(NimbleBenchCli, AGpuBaselineIsPyTorchOnTheGpu) {
  const std::vector<std::string> tiny_lstm = {"--model",  "lstm",   "--hidden-size", "16",
                                              "--target", "nvidia", "--db",          Db()};
  const Outcome gpu = Bench(
      With(With({"baseline", "--framework", "pytorch", "--python", "python3"}, tiny_lstm), kQuick));
  if (gpu.out.find("no CUDA device") != std::string::npos) {
    EXPECT_EQ(gpu.status, 1);
    EXPECT_FALSE(fs::exists(Db())) << "a baseline on a missing GPU records nothing";
    GTEST_SKIP() << gpu.out;
  }
  if (gpu.out.find("torch is not importable") != std::string::npos) GTEST_SKIP() << gpu.out;
  ASSERT_EQ(gpu.status, 0) << gpu.out;
  EXPECT_THAT(Query("SELECT framework || ' ' || json_extract(configuration, '$.variant') || ' ' || "
                    "target || ' ' || (gpu IS NOT NULL) FROM runs ORDER BY id"),
              ::testing::ElementsAre("pytorch native nvidia 1", "pytorch mv_script nvidia 1"));
  const Outcome onnxruntime =
      Bench(With(With({"baseline", "--framework", "onnxruntime"}, tiny_lstm), kQuick));
  EXPECT_EQ(onnxruntime.status, 1);
  EXPECT_THAT(onnxruntime.out, HasSubstr("--target nvidia's peer is pytorch on the GPU"));
}

TEST_F(NimbleBenchCli, OnnxRuntimeBaseline) {
  EXPECT_THAT(
      Bench({"baseline", "--framework", "onnxruntime", "--model", "treelstm", "--db", Db()}).out,
      HasSubstr("ONNX Runtime has no Tree-LSTM baseline"));
  const Outcome baseline =
      Bench(With({"baseline", "--framework", "onnxruntime", "--model", "bert", "--layers", "1",
                  "--hidden-size", "32", "--heads", "2", "--ffn-size", "64", "--db", Db()},
                 kQuick));
  // Its environment (scripts/install-peers.sh) or an interpreter that imports it.
  if (baseline.out.find("ONNX Runtime is not installed") != std::string::npos) {
    GTEST_SKIP() << baseline.out;
  }
  ASSERT_EQ(baseline.status, 0) << baseline.out;
  EXPECT_THAT(
      Query("SELECT framework || ' ' || json_extract(configuration, '$.variant') FROM runs"),
      ::testing::ElementsAre("onnxruntime onnxruntime"));
}

}  // namespace

namespace nimble_bench_tune {

const std::vector<std::string> kTinyBert = {"--model",       "bert", "--layers",  "1",
                                            "--hidden-size", "32",   "--heads",   "2",
                                            "--ffn-size",    "64",   "--threads", "1"};

}  // namespace nimble_bench_tune

TEST_F(NimbleBenchCli, TuneRecordsChoicesResumesAndRunsUseThem) {
  using nimble_bench_tune::kTinyBert;
  const std::string tuning_db = (dir_ / "tuning.db").string();
  const std::vector<std::string> tune =
      With(With({"tune"}, kTinyBert), {"--trials", "3", "--top-k", "2", "--extents", "1", "4", "16",
                                       "--tuning-db", tuning_db, "--json"});
  const Outcome first = Bench(tune);
  ASSERT_EQ(first.status, 0) << first.out;
  const nlohmann::json sites = nlohmann::json::parse(first.out).at("sites");
  ASSERT_FALSE(sites.empty());
  int measured = 0;
  for (const nlohmann::json& site : sites) {
    EXPECT_EQ(site["error"], "") << site.dump();
    EXPECT_NE(site["kernel"], "") << site.dump();
    EXPECT_EQ(site["threads"], 1);
    EXPECT_GE(site["mean_relative"].get<double>(), 1.0);
    measured += site["measured"].get<int>();
  }
  EXPECT_GT(measured, 0);
  EXPECT_EQ(Query("SELECT count(*) FROM tuned_sites", tuning_db)[0], std::to_string(sites.size()));
  EXPECT_EQ(Query("SELECT count(*) FROM tuning_records WHERE seconds_per_call IS NULL "
                  "OR seconds_per_call <= 0",
                  tuning_db)[0],
            "0");
  // The representative size (64) and the three asked for.
  EXPECT_EQ(Query("SELECT count(DISTINCT extent) FROM tuning_records WHERE shapes LIKE '%?%'",
                  tuning_db)[0],
            "4");

  // Everything is recorded: a second tuning measures nothing.
  const Outcome again = Bench(tune);
  ASSERT_EQ(again.status, 0) << again.out;
  const nlohmann::json again_sites = nlohmann::json::parse(again.out).at("sites");
  for (const nlohmann::json& site : again_sites) {
    EXPECT_EQ(site["measured"], 0) << site.dump();
  }

  const Outcome run =
      Bench(With(With({"run"}, kTinyBert), {"--sentences", "2", "--warmup", "0", "--repeat", "1",
                                            "--tuning-db", tuning_db, "--db", Db()}));
  EXPECT_EQ(run.status, 0) << run.out;
}

TEST_F(NimbleBenchCli, TuneCandidatesThatOutliveTheirTimeAreRecordedAsFailed) {
  using nimble_bench_tune::kTinyBert;
  const std::string tuning_db = (dir_ / "tuning.db").string();
  const Outcome tune =
      Bench(With(With({"tune"}, kTinyBert), {"--trials", "2", "--top-k", "1", "--extents", "4",
                                             "--task-timeout", "0.01", "--tuning-db", tuning_db}));
  EXPECT_EQ(tune.status, 1) << tune.out;
  EXPECT_THAT(tune.out, HasSubstr("no candidate ran at every extent"));
  EXPECT_THAT(tune.out, HasSubstr("timed out after"));
  EXPECT_EQ(
      Query("SELECT count(*) FROM tuning_records WHERE seconds_per_call IS NOT NULL", tuning_db)[0],
      "0");
  EXPECT_NE(Query("SELECT count(*) FROM tuning_records WHERE error LIKE 'timed out after%'",
                  tuning_db)[0],
            "0");
  EXPECT_EQ(Query("SELECT count(*) FROM tuned_sites", tuning_db)[0], "0");
}

TEST_F(NimbleBenchCli, TuneRefusesBadOptions) {
  const std::string tuning_db = (dir_ / "tuning.db").string();
  const Outcome no_model = Bench({"tune", "--tuning-db", tuning_db});
  EXPECT_NE(no_model.status, 0);
  EXPECT_THAT(no_model.out, HasSubstr("tune needs --model"));
  const Outcome bad_extent =
      Bench({"tune", "--model", "lstm", "--extents", "0", "--tuning-db", tuning_db});
  EXPECT_NE(bad_extent.status, 0);
  EXPECT_THAT(bad_extent.out, HasSubstr("--extents must be positive"));
  const Outcome task = Shell("echo '{\"target\": 3}' | " NIMBLE_BENCH_BINARY " tune-task");
  EXPECT_NE(task.status, 0);
  EXPECT_THAT(task.out, HasSubstr("member 'target' has the wrong type"));
}

TEST_F(NimbleBenchCli, AnOnnxModelRunsOnTheDatasetAndIsRecorded) {
  if (!PythonImports("/usr/bin/python3", "torch"))
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch)";
  const std::string model = (dir_ / "bert.onnx").string();
  const nlohmann::json result =
      ExportAndRunOnnx(model, "--bert " + model + " --layers 1 --hidden 32 --heads 2 --ffn 64");
  ASSERT_FALSE(result.is_null());
  EXPECT_GT(result["measurements"]["weight_bytes"]["value"].get<double>(), 30522 * 32 * 4);
  const Outcome both = Bench({"run", "--onnx", model, "--model", "bert", "--db", Db()});
  EXPECT_NE(both.status, 0);
  EXPECT_THAT(both.out, HasSubstr("--onnx and --model name two models"));

  // A bounded sequence: storage planned once for the bound, in one region.
  const Outcome bounded = Bench(With(
      {"run", "--onnx", model, "--dim-bound", "sequence=512", "--db", Db(), "--json"}, kQuick));
  ASSERT_EQ(bounded.status, 0) << bounded.out;
  const nlohmann::json bounded_result = nlohmann::json::parse(bounded.out);
  EXPECT_EQ(bounded_result["configuration"]["dim_bounds"]["sequence"], 512);
  const auto allocations = [](const nlohmann::json& run) {
    return run["measurements"]["alloc_storage_per_sentence_planned"]["value"].get<double>();
  };
  EXPECT_LT(allocations(bounded_result), allocations(result));
  EXPECT_LE(allocations(bounded_result), 3);

  // Against the native builder's BERT of the same sizes, pass by pass.
  const Outcome against = Bench(
      With({"run", "--onnx", model, "--dim-bound", "sequence=512", "--against-native", "--layers",
            "1", "--hidden-size", "32", "--heads", "2", "--ffn-size", "64", "--db", Db()},
           kQuick));
  ASSERT_EQ(against.status, 0) << against.out;
  EXPECT_THAT(against.out, ::testing::ContainsRegex(
                               "against native onnx [0-9.]+ us/token, native [0-9.]+; onnx / "
                               "native [0-9.]+ \\(median of [0-9]+ interleaved passes\\)"));
  EXPECT_THAT(Query("SELECT value > 0 FROM measurements WHERE name = 'onnx_over_native'"),
              ::testing::ElementsAre("1"));
  // The run says which native BERT it was timed against.
  EXPECT_THAT(Query("SELECT json_extract(configuration, '$.against_native.hidden_size') || ' ' || "
                    "json_extract(configuration, '$.against_native.layers') FROM runs r JOIN "
                    "measurements m ON m.run_id = r.id WHERE m.name = 'onnx_over_native'"),
              ::testing::ElementsAre("32 1"));
  // A model fed word vectors is no BERT to compare.
  const std::string vectors = (dir_ / "vectors.onnx").string();
  ASSERT_EQ(Shell("/usr/bin/python3 -c \"import onnx\nfrom onnx import helper, TensorProto as T\n"
                  "g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'v', "
                  "[helper.make_tensor_value_info('x', T.FLOAT, ['n', 8])], "
                  "[helper.make_tensor_value_info('y', T.FLOAT, ['n', 8])])\n"
                  "onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), '" +
                  vectors + "')\"")
                .status,
            0);
  const Outcome not_bert =
      Bench(With({"run", "--onnx", vectors, "--against-native", "--db", Db()}, kQuick));
  EXPECT_NE(not_bert.status, 0);
  EXPECT_THAT(not_bert.out, HasSubstr("--against-native compares a BERT fed token ids, and the "
                                      "ONNX model's first input, x, does not take the token ids"));
  const Outcome counted = Bench({"run", "--onnx", model, "--against-native", "--count-instructions",
                                 "--threads", "1", "--db", Db()});
  EXPECT_NE(counted.status, 0);
  EXPECT_THAT(counted.out, HasSubstr("--count-instructions counts one program"));
  const Outcome native_only = Bench({"run", "--model", "bert", "--against-native", "--db", Db()});
  EXPECT_NE(native_only.status, 0);
  EXPECT_THAT(native_only.out, HasSubstr("--against-native compares an --onnx model"));

  const Outcome misplaced =
      Bench({"run", "--model", "bert", "--dim-bound", "sequence=512", "--db", Db()});
  EXPECT_NE(misplaced.status, 0);
  EXPECT_THAT(misplaced.out, HasSubstr("--dim-bound applies to an --onnx model"));
}

// A TorchScript export whose recurrence is an ONNX Loop, fed the dataset's
// word vectors: the VM runs its tail-recursive function a step per word.
TEST_F(NimbleBenchCli, AnOnnxLoopModelRunsOnTheDatasetAndIsRecorded) {
  if (!PythonImports("/usr/bin/python3", "torch"))
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch)";
  const std::string model = (dir_ / "elman.onnx").string();
  const nlohmann::json result = ExportAndRunOnnx(model, "--elman " + model);
  ASSERT_FALSE(result.is_null());
  // Instructions in proportion to the words: an iteration per word (its
  // test, product, tanh and tail call at least).
  EXPECT_GT(result["measurements"]["vm_instructions_per_sentence"]["value"].get<double>(),
            5 * result["measurements"]["tokens"]["value"].get<double>() /
                result["measurements"]["sentences"]["value"].get<double>());
}
