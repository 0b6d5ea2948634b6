// The kernel chosen by measurement: which candidates a call site weighs, the
// tuning database that keeps their times (a real SQLite file), a later
// compile that reads it instead of measuring, and the chosen kernel in the
// executable giving the built-in kernel's values.
#include "nimble/compiler/backend/kernel_tuning.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/backend/primitive_kernels.h"
#include "nimble/compiler/ir/constant_bytes.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/tir/printer.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/vm.h"
#include "tests/error_of.h"

namespace nimble::backend {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

ir::IRModule Lowered(const std::string& data_type, const CompileOptions& options) {
  ir::IRModule module = text::ParseModule(R"(#[version = "0.0.5"]
def @main(%x: )" + data_type + R"(, %w: Tensor[(24, 32), float32]) {
  nn.dense(%x, %w)
}
)",
                                          "test.relay");
  typing::InferTypes(module);
  return RunPasses(module, options);
}

constexpr const char* kStatic = "Tensor[(8, 32), float32]";
constexpr const char* kDynamic = "Tensor[(?, 32), float32]";

// The database's rows as kernel -> seconds per call.
std::map<std::string, double> Rows(const std::string& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::map<std::string, double> rows;
  sqlite3_exec(
      db, "SELECT kernel, seconds_per_call FROM kernel_measurements",
      [](void* out, int, char** values, char**) {
        (*static_cast<std::map<std::string, double>*>(out))[values[0]] = std::stod(values[1]);
        return 0;
      },
      &rows, nullptr);
  sqlite3_close(db);
  return rows;
}

// The kernels of the measurements that match the SQL `condition`, sorted.
std::vector<std::string> KernelsWhere(const std::string& path, const std::string& condition) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::vector<std::string> kernels;
  const std::string sql =
      "SELECT kernel FROM kernel_measurements WHERE " + condition + " ORDER BY kernel";
  sqlite3_exec(
      db, sql.c_str(),
      [](void* out, int, char** values, char**) {
        static_cast<std::vector<std::string>*>(out)->push_back(values[0]);
        return 0;
      },
      &kernels, nullptr);
  sqlite3_close(db);
  return kernels;
}

// The kernels measured on the shapes `shapes` ("(64,32), (24,32)").
std::vector<std::string> KernelsAt(const std::string& path, const std::string& shapes) {
  return KernelsWhere(path, "shapes = '" + shapes + "'");
}

// Rewrites the recorded time of `kernel`, or of every kernel when empty; of
// its measurements on `shapes` only, when given.
void SetSeconds(const std::string& path, double seconds, const std::string& kernel = "",
                const std::string& shapes = "") {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::ostringstream value;
  value << std::scientific << seconds;
  const std::string sql = "UPDATE kernel_measurements SET seconds_per_call = " + value.str() +
                          " WHERE 1" + (kernel.empty() ? "" : " AND kernel = '" + kernel + "'") +
                          (shapes.empty() ? "" : " AND shapes = '" + shapes + "'");
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

class KernelTuningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ = std::filesystem::temp_directory_path() /
                 ("nimble_tuning_" + std::string(info->name()) + "_" + std::to_string(getpid()));
    std::filesystem::remove_all(directory_);
    database_ = (directory_ / "cache" / "tuning.db").string();
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  // Measures `module`'s sites, then rewrites the file so that `kernel` is
  // by far the fastest: a choice that follows can only come from the file.
  void MeasureThenFavour(const ir::IRModule& module, const CompileOptions& options,
                         const std::string& kernel) {
    ChooseMatMulKernels(module, options);
    SetSeconds(database_, 1.0);
    SetSeconds(database_, 1e-9, kernel);
  }

  CompileOptions Options(const std::string& kernels) const {
    CompileOptions options;
    options.kernels = kernels;
    options.tuning_database = database_;
    return options;
  }

  std::filesystem::path directory_;
  std::string database_;
};

// A generated kernel's records name its template configuration; a library
// kernel's say that it ran on the runtime's pool.
const std::string kGeneratedKey = "nn.dense.generated tile 4x3 dispatch/4";
const std::string kDnnlKey = "nn.dense.dnnl on the pool";
const std::string kOpenBlasKey = "nn.dense.openblas on the pool";

// The database key of a chosen kernel.
std::string KeyOf(const std::string& chosen) {
  if (chosen == kGeneratedKernel) return kGeneratedKey;
  return chosen == "nn.dense" ? chosen : chosen + " on the pool";
}

std::vector<std::string> Chosen(const KernelChoices& choices) {
  std::vector<std::string> kernels;
  for (const auto& [primitive, choice] : choices) kernels.push_back(choice.kernel);
  return kernels;
}

TEST_F(KernelTuningTest, AutoWeighsAllFourKernelsAndKeepsTheFastest) {
  const CompileOptions options = Options("auto");
  const KernelChoices choices = ChooseMatMulKernels(Lowered(kStatic, options), options);
  ASSERT_EQ(choices.size(), 1u);
  const std::map<std::string, double> rows = Rows(database_);
  EXPECT_THAT(rows, ElementsAre(Pair("nn.dense", testing::_), Pair(kDnnlKey, testing::_),
                                Pair(kGeneratedKey, testing::_), Pair(kOpenBlasKey, testing::_)));
  std::string fastest;
  for (const auto& [kernel, seconds] : rows) {
    EXPECT_GT(seconds, 0) << kernel;
    if (fastest.empty() || seconds < rows.at(fastest)) fastest = kernel;
  }
  EXPECT_EQ(KeyOf(choices.begin()->second.kernel), fastest);
}

TEST_F(KernelTuningTest, ALaterCompileReadsTheDatabaseInsteadOfMeasuring) {
  const CompileOptions options = Options("auto");
  const ir::IRModule module = Lowered(kStatic, options);
  MeasureThenFavour(module, options, kOpenBlasKey);
  EXPECT_THAT(Chosen(ChooseMatMulKernels(module, options)), ElementsAre("nn.dense.openblas"));
  SetSeconds(database_, 1e-10, kGeneratedKey);
  EXPECT_THAT(Chosen(ChooseMatMulKernels(module, options)), ElementsAre(kGeneratedKernel));
}

// Earlier builds recorded the libraries on their own threads under the bare
// kernel name: such a row is left alone, however fast it says they were.
TEST_F(KernelTuningTest, LibraryTimesFromBeforeThePoolAreNotRead) {
  const CompileOptions options = Options("auto");
  const ir::IRModule module = Lowered(kStatic, options);
  MeasureThenFavour(module, options, kGeneratedKey);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(database_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db,
                   "INSERT INTO kernel_measurements SELECT host, threads, 'nn.dense.openblas', "
                   "attrs, shapes, 1e-12, measured_at FROM kernel_measurements "
                   "WHERE kernel = 'nn.dense'",
                   nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  EXPECT_THAT(Chosen(ChooseMatMulKernels(module, options)), ElementsAre(kGeneratedKernel));
}

// The host key carries the kernels' revision: times that a build of
// another revision recorded (here, rows moved to the previous revision's
// key, which say OpenBLAS is by far the fastest) are left alone, and this
// build measures again.
TEST_F(KernelTuningTest, TimesOfAnotherKernelRevisionAreNotRead) {
  const std::string suffix = ", kernels r" + std::to_string(kKernelsRevision);
  ASSERT_TRUE(HostKey().ends_with(suffix)) << HostKey();
  const CompileOptions options = Options("auto");
  const ir::IRModule module = Lowered(kStatic, options);
  MeasureThenFavour(module, options, kOpenBlasKey);
  const std::string older = HostKey().substr(0, HostKey().size() - suffix.size()) + ", kernels r" +
                            std::to_string(kKernelsRevision - 1);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(database_.c_str(), &db), SQLITE_OK);
  const std::string sql = "UPDATE kernel_measurements SET host = '" + older + "'";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  ChooseMatMulKernels(module, options);
  // Measured again: the four kernels have rows under both revisions, and
  // the older ones are kept as they were.
  const std::vector<std::string> kernels = {"nn.dense", kDnnlKey, kGeneratedKey, kOpenBlasKey};
  EXPECT_EQ(KernelsWhere(database_, "host = '" + HostKey() + "'"), kernels);
  EXPECT_EQ(KernelsWhere(database_, "host = '" + older + "'"), kernels);
}

TEST_F(KernelTuningTest, TheChosenKernelRunsInTheExecutable) {
  const CompileOptions options = Options("auto");
  const ir::IRModule module = Lowered(kStatic, options);
  MeasureThenFavour(module, options, kOpenBlasKey);
  const vm::Executable chosen = CompileToExecutable(module, options);
  EXPECT_THAT(vm::KernelTableToString(chosen), HasSubstr("] nn.dense.openblas: library OpenBLAS"));
  CompileOptions builtin = options;
  builtin.kernels = "builtin";
  std::vector<float> x(8 * 32), w(24 * 32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) * 0.5f - 1;
  const std::vector<Ref<Object>> args = {
      TensorNode::FromVector<float>({8, 32}, DataType::Float32(), x),
      TensorNode::FromVector<float>({24, 32}, DataType::Float32(), w)};
  const auto run = [&](const vm::Executable& executable) {
    vm::VirtualMachine machine(executable);
    const Ref<Object> result = machine.Invoke("main", args);
    const auto* tensor = dynamic_cast<const TensorNode*>(result.get());
    return std::vector<float>(tensor->data<float>(), tensor->data<float>() + tensor->numel());
  };
  // Small integers and halves: every kernel's sums are exact.
  EXPECT_EQ(run(chosen), run(CompileToExecutable(module, builtin)));
}

// At a `?` site, auto weighs the libraries only at the large extents, where
// one may take over from the choice at the representative extent.
TEST_F(KernelTuningTest, ADynamicDimensionLeavesTheLibrariesToLargeExtentsUnderAuto) {
  const CompileOptions options = Options("auto");
  ChooseMatMulKernels(Lowered(kDynamic, options), options);
  EXPECT_THAT(KernelsAt(database_, "(64,32), (24,32)"), ElementsAre("nn.dense", kGeneratedKey));
  for (const char* shapes : {"(128,32), (24,32)", "(256,32), (24,32)"}) {
    EXPECT_THAT(KernelsAt(database_, shapes),
                ElementsAre("nn.dense", kDnnlKey, kGeneratedKey, kOpenBlasKey))
        << shapes;
  }
  const CompileOptions library = Options("library");
  EXPECT_THAT(Chosen(ChooseMatMulKernels(Lowered(kDynamic, library), library)),
              ElementsAre("nn.dense.openblas"));
}

// A product whose every dimension is `?` is 256^4 multiply-adds over three
// 64 MiB tensors at the largest extent: it measured there for 38 s at 1.1 GB
// before compiling. The extents past the bounds are not measured, and the
// compile says so.
TEST_F(KernelTuningTest, AllDynamicProductsAreMeasuredOnlyWithinTheBounds) {
  const CompileOptions options = Options("auto");
  ir::IRModule module = text::ParseModule(R"(#[version = "0.0.5"]
def @main(%a: Tensor[(?, ?, ?), float32], %b: Tensor[(?, ?, ?), float32]) {
  nn.batch_matmul(%a, %b)
}
)",
                                          "test.relay");
  typing::InferTypes(module);
  module = RunPasses(module, options);
  ::testing::internal::CaptureStderr();
  ChooseMatMulKernels(module, options);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(KernelsAt(database_, "(64,64,64), (64,64,64)"), testing::Not(IsEmpty()));
  EXPECT_THAT(KernelsAt(database_, "(128,128,128), (128,128,128)"), testing::Not(IsEmpty()));
  EXPECT_THAT(KernelsAt(database_, "(256,256,256), (256,256,256)"), IsEmpty());
  EXPECT_THAT(said, HasSubstr("nn.batch_matmul at (?,?,?), (?,?,?): kernels not measured with ? = "
                              "256 (4294967296 multiply-adds and 201326592 bytes a call"));
}

// A library takes over from the smallest large extent where it wins and
// keeps winning above it, by the margin; not where it wins only below.
TEST_F(KernelTuningTest, ALibraryTakesOverWhereItWinsUpToTheLargestExtent) {
  const CompileOptions options = Options("auto");
  const ir::IRModule module = Lowered(kDynamic, options);
  const auto large_of = [&]() -> std::optional<LargeExtentKernel> {
    const KernelChoices choices = ChooseMatMulKernels(module, options);
    EXPECT_EQ(choices.size(), 1u);
    EXPECT_EQ(choices.begin()->second.kernel, kGeneratedKernel);
    return choices.begin()->second.large;
  };
  MeasureThenFavour(module, options, kGeneratedKey);
  EXPECT_EQ(large_of(), std::nullopt);
  SetSeconds(database_, 1e-10, kOpenBlasKey, "(128,32), (24,32)");
  SetSeconds(database_, 1e-10, kOpenBlasKey, "(256,32), (24,32)");
  std::optional<LargeExtentKernel> large = large_of();
  ASSERT_TRUE(large);
  EXPECT_EQ(large->kernel, "nn.dense.openblas");
  EXPECT_EQ(large->from_extent, 128);
  EXPECT_EQ(large->arg, 0);
  EXPECT_EQ(large->axis, 0);
  SetSeconds(database_, 1e-11, kDnnlKey, "(256,32), (24,32)");
  large = large_of();
  ASSERT_TRUE(large);
  EXPECT_EQ(large->kernel, "nn.dense.dnnl");
  EXPECT_EQ(large->from_extent, 256);
  // Within the margin of the generated kernel: no switch.
  SetSeconds(database_, 1.0, kOpenBlasKey, "(256,32), (24,32)");
  SetSeconds(database_, 0.98e-9, kDnnlKey, "(256,32), (24,32)");
  SetSeconds(database_, 1e-9, kGeneratedKey, "(256,32), (24,32)");
  EXPECT_EQ(large_of(), std::nullopt);
}

// The switch in the executable: the generated kernel below the extent, the
// library from it, both giving the built-in kernel's values.
TEST_F(KernelTuningTest, TheExtentSwitchRunsTheLibraryFromItsExtent) {
  const CompileOptions options = Options("auto");
  const ir::IRModule module = Lowered(kDynamic, options);
  MeasureThenFavour(module, options, kGeneratedKey);
  SetSeconds(database_, 1e-10, kOpenBlasKey, "(128,32), (24,32)");
  SetSeconds(database_, 1e-10, kOpenBlasKey, "(256,32), (24,32)");
  const vm::Executable switched = CompileToExecutable(module, options);
  const std::string table = vm::KernelTableToString(switched);
  EXPECT_THAT(table, HasSubstr("] nn.dense.openblas: library OpenBLAS"));
  EXPECT_THAT(table,
              ::testing::ContainsRegex(
                  "vm.extent_switch: kernel\\[[0-9]+\\] below extent 128, kernel\\[[0-9]+\\] "
                  "from it"));
  CompileOptions builtin = options;
  builtin.kernels = "builtin";
  vm::VirtualMachine machine(switched);
  vm::VirtualMachine reference(CompileToExecutable(module, builtin));
  std::vector<float> w(24 * 32);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) * 0.5f - 1;
  const Tensor weight = TensorNode::FromVector<float>({24, 32}, DataType::Float32(), w);
  for (int64_t rows : {1, 127, 128, 200}) {
    std::vector<float> x(static_cast<size_t>(rows) * 32);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3;
    const std::vector<Ref<Object>> args = {
        TensorNode::FromVector<float>({rows, 32}, DataType::Float32(), x), weight};
    const auto values = [&](vm::VirtualMachine& vm) {
      const Tensor result = vm.Invoke("main", args).as<TensorNode>();
      return std::vector<float>(result->data<float>(), result->data<float>() + result->numel());
    };
    EXPECT_EQ(values(machine), values(reference)) << rows << " rows";
  }
}

TEST_F(KernelTuningTest, LibraryWeighsOnlyTheLibraries) {
  const CompileOptions options = Options("library");
  const KernelChoices choices = ChooseMatMulKernels(Lowered(kStatic, options), options);
  const std::map<std::string, double> rows = Rows(database_);
  EXPECT_THAT(rows, ElementsAre(Pair(kDnnlKey, testing::_), Pair(kOpenBlasKey, testing::_)));
  EXPECT_THAT(Chosen(choices),
              testing::AnyOf(ElementsAre("nn.dense.dnnl"), ElementsAre("nn.dense.openblas")));
}

TEST_F(KernelTuningTest, NothingIsChosenForOtherChoicesOrACrossTarget) {
  for (const std::string kernels : {"builtin", "generated"}) {
    const CompileOptions options = Options(kernels);
    EXPECT_THAT(ChooseMatMulKernels(Lowered(kStatic, options), options), IsEmpty()) << kernels;
  }
  CompileOptions cross = Options("auto");
#if defined(__x86_64__)
  cross.target = "arm";
#else
  cross.target = "intel";
#endif
  EXPECT_THAT(ChooseMatMulKernels(Lowered(kStatic, cross), cross), IsEmpty());
  EXPECT_FALSE(std::filesystem::exists(database_));
}

TEST_F(KernelTuningTest, AnUnusableDatabaseIsAnErrorNamingIt) {
  std::filesystem::create_directories(database_);  // a directory where the file should be
  const CompileOptions options = Options("auto");
  EXPECT_THAT(ErrorOf([&] { ChooseMatMulKernels(Lowered(kStatic, options), options); }),
              HasSubstr("tuning database " + database_));
}

TEST(DefaultTuningDatabaseTest, FollowsTheEnvironment) {
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  setenv("NIMBLE_TUNING_DB", "/somewhere/tuning.db", 1);
  EXPECT_EQ(DefaultTuningDatabase(), "/somewhere/tuning.db");
  unsetenv("NIMBLE_TUNING_DB");
  setenv("XDG_CACHE_HOME", "/cache", 1);
  EXPECT_EQ(DefaultTuningDatabase(), "/cache/nimble/tuning.db");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(DefaultTuningDatabase(), "/home/someone/.cache/nimble/tuning.db");
  setenv("HOME", home.c_str(), 1);
}

// A constant weight's layout is chosen by measurement too: the packed
// kernel's time against the fastest plain candidate's, from the database.
TEST_F(KernelTuningTest, AConstantWeightIsPackedWhenThePackedKernelMeasuresFastest) {
  const CompileOptions options = Options("auto");
  const text::ParamMap params{{"w", TensorNode::Empty({32, 8}, DataType::Float32())}};
  ir::IRModule module = text::ParseModule(R"(#[version = "0.0.5"]
def @main(%x: Tensor[(?, 8), float32]) {
  nn.dense(%x, meta[relay.Constant][w])
}
)",
                                          "test.relay", &params);
  typing::InferTypes(module);
  const auto lowered_ops = [&](const CompileOptions& with) {
    return vm::KernelTableToString(Compile(module, with));
  };
  lowered_ops(options);  // measures every candidate and the packed kernel
  EXPECT_THAT(Rows(database_), testing::Contains(Pair("nn.contrib_dense_pack", testing::_)));
  SetSeconds(database_, 1e-9);
  SetSeconds(database_, 1.0, "nn.contrib_dense_pack");
  EXPECT_THAT(lowered_ops(options), testing::Not(HasSubstr("nn.contrib_dense_pack")));
  SetSeconds(database_, 1.0);
  SetSeconds(database_, 1e-9, "nn.contrib_dense_pack");
  EXPECT_THAT(lowered_ops(options), HasSubstr("nn.contrib_dense_pack"));
  // Measuring a site compiles it on its own, whatever entry functions the
  // program's compile keeps.
  ir::IRModule library = text::ParseModule(R"(#[version = "0.0.5"]
def @main(%x: Tensor[(?, 8), float32]) {
  nn.dense(%x, meta[relay.Constant][w])
}
def @other(%x: Tensor[(?, 8), float32]) {
  tanh(@main(%x))
}
)",
                                           "test.relay", &params);
  typing::InferTypes(library);
  CompileOptions only_other = options;
  only_other.entry_functions = {"other"};
  EXPECT_THAT(vm::KernelTableToString(Compile(library, only_other)),
              HasSubstr("nn.contrib_dense_pack"));
  // A forced kernel choice and a cross compile keep the plain layout.
  EXPECT_THAT(lowered_ops(Options("builtin")), testing::Not(HasSubstr("nn.contrib_dense_pack")));
  CompileOptions arm = options;
  arm.target = "arm";
  EXPECT_THAT(lowered_ops(arm), testing::Not(HasSubstr("nn.contrib_dense_pack")));
}

// A program whose constants outgrow the caches (here one of 64 MiB and a
// float, which it returns and never reads) has its sites measured with
// their weights read from memory, under keys of their own, the packed
// candidate too; a program of small weights keeps the cached measurements.
TEST_F(KernelTuningTest, SitesOfAProgramLargerThanTheCachesAreMeasuredWithWeightsFromMemory) {
  const CompileOptions options = Options("auto");
  const int64_t large_numel = static_cast<int64_t>(kCachedWeightBytes / sizeof(float)) + 1;
  const text::ParamMap params{{"w", TensorNode::Empty({32, 8}, DataType::Float32())},
                              {"large", TensorNode::Empty({large_numel}, DataType::Float32())}};
  const auto parse = [&](const std::string& body) {
    ir::IRModule module = text::ParseModule(
        "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(?, 8), float32]) {\n  " + body + "\n}\n",
        "test.relay", &params);
    typing::InferTypes(module);
    return module;
  };
  const ir::IRModule large =
      parse("(nn.dense(%x, meta[relay.Constant][w]), meta[relay.Constant][large])");
  const ir::IRModule small = parse("nn.dense(%x, meta[relay.Constant][w])");
  EXPECT_EQ(ResidenceOfWeights(ir::ConstantBytes(large), true), WeightResidence::kMemory);
  EXPECT_EQ(ResidenceOfWeights(ir::ConstantBytes(small), true), WeightResidence::kCached);

  Compile(large, options);
  const std::string from_memory = "kernel LIKE '%, weights from memory'";
  EXPECT_THAT(KernelsWhere(database_, from_memory),
              testing::IsSupersetOf(std::vector<std::string>{
                  "nn.contrib_dense_pack, weights from memory", "nn.dense, weights from memory",
                  kGeneratedKey + ", weights from memory"}));
  EXPECT_THAT(KernelsWhere(database_, "NOT " + from_memory), IsEmpty());

  Compile(small, options);
  EXPECT_THAT(KernelsWhere(database_, "NOT " + from_memory),
              testing::IsSupersetOf(
                  std::vector<std::string>{"nn.contrib_dense_pack", "nn.dense", kGeneratedKey}));
}

// A product that runs once per run reads its weight from memory in a
// program of more than kOncePerRunCachedWeightBytes of constants; the same
// product in a recursion keeps it cached.
TEST_F(KernelTuningTest, AProductRunOncePerRunOfALargerProgramIsMeasuredFromMemory) {
  EXPECT_EQ(ResidenceOfWeights(kOncePerRunCachedWeightBytes + 4, false), WeightResidence::kMemory);
  EXPECT_EQ(ResidenceOfWeights(kOncePerRunCachedWeightBytes + 4, true), WeightResidence::kCached);
  EXPECT_EQ(ResidenceOfWeights(kOncePerRunCachedWeightBytes, false), WeightResidence::kCached);

  const CompileOptions options = Options("auto");
  const int64_t other_numel = static_cast<int64_t>(kOncePerRunCachedWeightBytes / sizeof(float));
  const text::ParamMap params{{"w", TensorNode::Empty({32, 8}, DataType::Float32())},
                              {"other", TensorNode::Empty({other_numel}, DataType::Float32())}};
  const auto parse = [&](const std::string& text) {
    ir::IRModule module =
        text::ParseModule("#[version = \"0.0.5\"]\n" + text, "test.relay", &params);
    typing::InferTypes(module);
    return module;
  };
  Compile(parse(R"(
def @main(%x: Tensor[(?, 8), float32]) {
  (nn.dense(%x, meta[relay.Constant][w]), meta[relay.Constant][other])
}
)"),
          options);
  const std::string from_memory = "kernel LIKE '%, weights from memory'";
  EXPECT_THAT(KernelsWhere(database_, from_memory),
              testing::IsSupersetOf(std::vector<std::string>{
                  "nn.contrib_dense_pack, weights from memory", "nn.dense, weights from memory"}));
  EXPECT_THAT(KernelsWhere(database_, "NOT " + from_memory), IsEmpty());

  Compile(parse(R"(
def @loop(%x: Tensor[(?, 8), float32], %n: int32) -> Tensor[(?, 32), float32] {
  if (less(%n, 1)) {
    nn.dense(%x, meta[relay.Constant][w])
  } else {
    @loop(%x, subtract(%n, 1))
  }
}

def @main(%x: Tensor[(?, 8), float32]) {
  (@loop(%x, 3), meta[relay.Constant][other])
}
)"),
          options);
  EXPECT_THAT(KernelsWhere(database_, "NOT " + from_memory),
              testing::IsSupersetOf(std::vector<std::string>{"nn.contrib_dense_pack", "nn.dense"}));
}

// The operand measured from memory: nn.dense's weight; of nn.batch_matmul's,
// the one without a `?` beside one with (BERT's projections take the
// weight first or second); none when both or neither have one.
TEST(MatMulSiteTest, TheWeightIsTheOperandWithoutASymbolicDimension) {
  const auto site = [](const std::string& op, std::vector<Shape> inputs) {
    MatMulSite result;
    result.op = op;
    result.input_class = std::move(inputs);
    return result;
  };
  EXPECT_EQ(site("nn.dense", {{kSymbolicDim, 768}, {768, 768}}).weight_input(), 1);
  EXPECT_EQ(site("nn.dense", {{8, 768}, {768, 768}}).weight_input(), 1);
  EXPECT_EQ(site("nn.batch_matmul", {{1, kSymbolicDim, 768}, {12, 64, 768}}).weight_input(), 1);
  EXPECT_EQ(site("nn.batch_matmul", {{12, 64, 768}, {1, kSymbolicDim, 768}}).weight_input(), 0);
  EXPECT_EQ(
      site("nn.batch_matmul", {{12, kSymbolicDim, 64}, {12, kSymbolicDim, 64}}).weight_input(), -1);
  EXPECT_EQ(site("nn.batch_matmul", {{1, 128, 768}, {12, 64, 768}}).weight_input(), -1);
}

// The loop IR of the generated products (dense, and batch_matmul read both
// ways) that kKernelsRevision's times were measured with, hashed (FNV-1a).
// Times from before a change to them (a schedule, the lowering, the
// simplifier) can rank the kernels wrongly, as revision 1's did for the
// outer-product form, so a change bumps the revision with the hash.
constexpr int kRevisionOfTheProducts = 2;
constexpr const char* kProductsHash = "25eee3aa3a86a459";

TEST(KernelsRevisionTest, TheGeneratedProductsAreThoseTheRevisionMeasured) {
  ir::IRModule module = text::ParseModule(R"(#[version = "0.0.5"]
def @main(%x: Tensor[(?, 32), float32], %w: Tensor[(24, 32), float32],
          %a: Tensor[(3, ?, 16), float32], %p: Tensor[(3, ?, ?), float32]) {
  (nn.dense(%x, %w), nn.batch_matmul(%a, %a), nn.batch_matmul(%p, %a, transpose_b=False))
}
)",
                                          "products.relay");
  typing::InferTypes(module);
  CompileOptions options;
  options.kernels = "generated";
  options.tuning_database = "";
  const PrimitiveKernels kernels = GenerateKernels(
      RunPasses(module, options), [](const ir::FunctionNode&) { return true; },
      [](const ir::FunctionNode&) { return te::MatMulKnobs{}; });
  ASSERT_EQ(kernels.kernels().size(), 3u);
  uint64_t hash = 0xcbf29ce484222325;
  for (const tir::PrimFunc& func : kernels.funcs()) {
    for (const char c : tir::ToString(func)) {
      hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3;
    }
  }
  std::ostringstream hex;
  hex << std::hex << std::setw(16) << std::setfill('0') << hash;
  EXPECT_EQ(hex.str(), kProductsHash)
      << "the generated products changed: bump kKernelsRevision (backend/matmul_sites.h) and set "
         "kRevisionOfTheProducts to it and kProductsHash to "
      << hex.str();
  EXPECT_EQ(kKernelsRevision, kRevisionOfTheProducts);
}

}  // namespace
}  // namespace nimble::backend
