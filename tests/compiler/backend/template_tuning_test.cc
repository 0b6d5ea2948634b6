// The template tuner: its search space and configuration names, the sites it
// finds, a measuring task's records, the choice best on average, a tuning
// that records as it goes, resumes, splits failed tasks and records a
// failing configuration once, and compiles that take the tuned choice.
#include "nimble/compiler/backend/template_tuning.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "nimble/compiler/backend/kernel_tuning.h"
#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/thread_pool.h"
#include "nimble/vm/vm.h"
#include "tests/error_of.h"

namespace nimble::backend {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr const char* kTwoDenseAndABatchedProduct = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(?, 32), float32], %w: Tensor[(24, 32), float32],
          %v: Tensor[(24, 32), float32], %a: Tensor[(2, ?, 8), float32],
          %b: Tensor[(2, 6, 8), float32]) {
  (nn.dense(%x, %w), nn.dense(%x, %v), nn.batch_matmul(%a, %b))
}
)";

ir::IRModule Lowered(const std::string& text) {
  ir::IRModule module = text::ParseModule(text, "test.relay");
  typing::InferTypes(module);
  CompileOptions options;
  options.tuning_database.clear();
  return RunPasses(module, options);
}

TuningHost ThisHost() {
  return {HostKey(), ThreadPool::Global().num_threads()};
}

TuningRecord Timed(const std::string& configuration, int64_t extent, double seconds) {
  return {ThisHost(), "intel", {"nn.dense", "", "(?,32), (24,32)"}, configuration, extent,
          seconds,    ""};
}

TEST(TemplateSearchSpace, EveryTileWithinTheLimitsOnceTheDefaultFirst) {
  const std::vector<te::MatMulKnobs> space = TemplateSearchSpace();
  ASSERT_FALSE(space.empty());
  EXPECT_EQ(GeneratedConfiguration(space.front()), GeneratedConfiguration(te::MatMulKnobs{}));
  std::set<std::string> names;
  size_t expected = 0;
  for (int rows = 1; rows <= 16; ++rows) {
    for (int cols = 1; cols <= 16; ++cols) expected += rows * cols <= 64 ? 1 : 0;
  }
  for (const te::MatMulKnobs& knobs : space) {
    EXPECT_NO_THROW(te::CheckMatMulKnobs(knobs)) << GeneratedConfiguration(knobs);
    names.insert(GeneratedConfiguration(knobs));
  }
  EXPECT_EQ(names.size(), space.size());
  EXPECT_EQ(space.size(), expected);
  // The order is fixed, so that runs of --trials N agree.
  EXPECT_EQ(GeneratedConfiguration(TemplateSearchSpace()[5]), GeneratedConfiguration(space[5]));
}

TEST(GeneratedConfiguration, NamesAndParsesATile) {
  EXPECT_EQ(GeneratedConfiguration({6, 8, 0}), "generated tile 6x8");
  const std::optional<te::MatMulKnobs> knobs = ParseGeneratedConfiguration("generated tile 6x8");
  ASSERT_TRUE(knobs);
  EXPECT_EQ(knobs->tile_rows, 6);
  EXPECT_EQ(knobs->tile_cols, 8);
  EXPECT_EQ(knobs->dispatch, 0);
  for (const char* other : {"nn.dense", "generated tile 6x8 dispatch/2", "generated tile 6", ""}) {
    EXPECT_FALSE(ParseGeneratedConfiguration(other)) << other;
  }
}

TEST(TunableSites, OnePerShapeClassWithAProgramOfItsOwn) {
  const std::vector<TunableSite> sites = TunableSites(Lowered(kTwoDenseAndABatchedProduct));
  ASSERT_THAT(sites, SizeIs(2));
  EXPECT_EQ(sites[0].key.op, "nn.dense");
  EXPECT_EQ(sites[0].key.shapes, "(?,32), (24,32)");
  EXPECT_TRUE(sites[0].dynamic);
  EXPECT_EQ(sites[1].key.op, "nn.batch_matmul");
  EXPECT_EQ(sites[1].key.shapes, "(2,?,8), (2,6,8)");
  for (const TunableSite& site : sites) {
    // The program compiles to the same one site.
    const std::vector<TunableSite> again = TunableSites(Lowered(site.program));
    ASSERT_THAT(again, SizeIs(1)) << site.program;
    EXPECT_EQ(again[0].key.op, site.key.op);
    EXPECT_EQ(again[0].key.attrs, site.key.attrs);
    EXPECT_EQ(again[0].key.shapes, site.key.shapes);
  }
}

class TemplateTuningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ =
        std::filesystem::temp_directory_path() /
        ("nimble_template_tuning_" + std::string(info->name()) + "_" + std::to_string(getpid()));
    std::filesystem::remove_all(directory_);
    database_ = (directory_ / "tuning.db").string();
    site_ = TunableSites(Lowered(kTwoDenseAndABatchedProduct)).front();
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  static TuneOptions SmallTuning() {
    TuneOptions options;
    options.trials = 4;
    options.top_k = 2;
    options.extents = {1, 3, 8};
    options.representative_extent = 8;
    options.batch = 3;
    return options;
  }

  // Measures in this process, counting tasks and the configurations asked
  // for; a task holding `failing` fails as a whole, as a crashed child would.
  TaskRunner CountingRunner(const std::string& failing = "") {
    return [this, failing](const TuningTask& task) {
      ++tasks_;
      for (const std::string& configuration : task.configurations) asked_.push_back(configuration);
      TaskOutcome outcome;
      for (const std::string& configuration : task.configurations) {
        if (configuration == failing) {
          outcome.error = "killed by signal 11 (SIGSEGV)";
          return outcome;
        }
      }
      outcome.records = MeasureTuningTask(task);
      return outcome;
    };
  }

  std::filesystem::path directory_;
  std::string database_;
  TunableSite site_;
  int tasks_ = 0;
  std::vector<std::string> asked_;
};

TEST_F(TemplateTuningTest, ATaskTimesEveryConfigurationAtEveryExtent) {
  const TuningTask task{
      "intel", site_.program, {"generated tile 4x3", "generated tile 2x8", "nn.dense"}, {1, 5}};
#if !defined(__x86_64__)
  GTEST_SKIP() << "measures target intel";
#endif
  const std::vector<TuningRecord> records = MeasureTuningTask(task);
  ASSERT_THAT(records, SizeIs(6));
  std::set<std::pair<std::string, int64_t>> seen;
  for (const TuningRecord& record : records) {
    ASSERT_TRUE(record.seconds) << record.configuration << ": " << record.error;
    EXPECT_GT(*record.seconds, 0);
    EXPECT_EQ(record.site.shapes, site_.key.shapes);
    EXPECT_EQ(record.host.host, HostKey());
    seen.insert({record.configuration, record.extent});
  }
  EXPECT_THAT(seen, SizeIs(6));
}

TEST_F(TemplateTuningTest, AConfigurationThatCannotRunIsARecordWithItsReason) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "measures target intel";
#endif
  const std::vector<TuningRecord> records = MeasureTuningTask(
      {"intel",
       site_.program,
       {"generated tile 16x16", "nn.no_such_kernel", "nn.dense.openblas", "nn.dense on the pool"},
       {4}});
  ASSERT_THAT(records, SizeIs(4));
  EXPECT_FALSE(records[0].seconds);
  EXPECT_THAT(records[0].error, HasSubstr("a tile's elements must be between 1 and 64"));
  EXPECT_FALSE(records[1].seconds);
  EXPECT_THAT(records[1].error, HasSubstr("nn.no_such_kernel"));
  // A library runs on the pool, and is named so.
  EXPECT_FALSE(records[2].seconds);
  EXPECT_THAT(records[2].error,
              HasSubstr("'nn.dense.openblas' is not a configuration (a library's is named "
                        "'KERNEL on the pool')"));
  EXPECT_FALSE(records[3].seconds);
  EXPECT_THAT(records[3].error, HasSubstr("'nn.dense on the pool' is not a configuration"));
}

TEST_F(TemplateTuningTest, ATaskRefusesAnotherTargetAndAProgramThatIsNotOneSite) {
#if defined(__x86_64__)
  const std::string foreign = "arm";
#else
  const std::string foreign = "intel";
#endif
  EXPECT_THAT(ErrorOf([&] {
                MeasureTuningTask({foreign, site_.program, {"nn.dense"}, {4}});
              }),
              HasSubstr("cannot be measured on this host"));
  const std::string own = foreign == "arm" ? "intel" : "arm";
  EXPECT_THAT(ErrorOf([&] {
                MeasureTuningTask({own, kTwoDenseAndABatchedProduct, {"nn.dense"}, {4}});
              }),
              HasSubstr("has 3 such sites"));
}

TEST(BestOnAverage, TheBestMeanRatioWinsNotTheFastestAnywhere) {
  // a: fastest at 1 by far, slow at 256; b: close to the best at both.
  const std::vector<TuningRecord> records = {
      Timed("generated tile 1x1", 1, 1.0), Timed("generated tile 1x1", 256, 300.0),
      Timed("generated tile 2x2", 1, 1.5), Timed("generated tile 2x2", 256, 110.0),
      Timed("nn.dense", 1, 2.0),           Timed("nn.dense", 256, 100.0),
      Timed("generated tile 3x3", 1, 0.5)};  // not at every extent: out
  const std::optional<TunedSite> best = BestOnAverage(records, {1, 256});
  ASSERT_TRUE(best);
  EXPECT_EQ(best->kernel, "generated tile 2x2");  // (1.5 + 1.1) / 2 = 1.3
  EXPECT_EQ(best->generated, "generated tile 2x2");
  EXPECT_NEAR(best->mean_relative, 1.3, 1e-9);
  EXPECT_EQ(best->configurations, 4);
}

TEST(BestOnAverage, AFailedConfigurationNeverWins) {
  TuningRecord failed = Timed("generated tile 1x1", 1, 0);
  failed.seconds.reset();
  failed.error = "timed out after 300 s";
  const std::optional<TunedSite> best =
      BestOnAverage({Timed("generated tile 1x1", 4, 0.1), failed, Timed("nn.dense", 1, 5.0),
                     Timed("nn.dense", 4, 5.0)},
                    {1, 4});
  ASSERT_TRUE(best);
  EXPECT_EQ(best->kernel, "nn.dense");
  EXPECT_EQ(best->generated, "");
  EXPECT_FALSE(BestOnAverage({failed}, {1}));
}

TEST_F(TemplateTuningTest, TuningRecordsChoosesAndResumesWithoutMeasuringAgain) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "tunes target intel";
#endif
  TuningDatabase database(database_);
  const TuneOptions options = SmallTuning();
  const TuneResult first = TuneSite(site_, options, ThisHost(), database, CountingRunner(), {});
  // 4 trials at 8, then the top 2 and the built-in kernel at 1 and 3 (8 is
  // already recorded for the top 2).
  EXPECT_EQ(first.measured, 4 + 2 * 2 + 3);
  EXPECT_EQ(first.failed, 0);
  EXPECT_THAT(database.Records(ThisHost(), site_.key), SizeIs(4 + 2 * 2 + 3));
  const std::optional<TunedSite> tuned = database.FindTuned(ThisHost(), site_.key);
  ASSERT_TRUE(tuned);
  EXPECT_EQ(tuned->kernel, first.tuned.kernel);
  EXPECT_GE(tuned->mean_relative, 1.0);
  EXPECT_EQ(tuned->configurations, 3);
  EXPECT_TRUE(ParseGeneratedConfiguration(tuned->generated)) << tuned->generated;

  const int tasks = tasks_;
  const TuneResult again = TuneSite(site_, options, ThisHost(), database, CountingRunner(), {});
  EXPECT_EQ(tasks_, tasks);  // everything was recorded
  EXPECT_EQ(again.measured, 0);
  EXPECT_EQ(again.tuned.kernel, first.tuned.kernel);
}

TEST_F(TemplateTuningTest, AFailingConfigurationIsMeasuredAloneAndRecordedOnce) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "tunes target intel";
#endif
  TuningDatabase database(database_);
  const TuneOptions options = SmallTuning();
  const std::string failing = GeneratedConfiguration(TemplateSearchSpace()[1]);
  const TuneResult result =
      TuneSite(site_, options, ThisHost(), database, CountingRunner(failing), {});
  EXPECT_EQ(result.failed, 1);
  EXPECT_NE(result.tuned.kernel, failing);
  // Its batch of 3 failed, then each of the 3 ran alone.
  EXPECT_EQ(std::count(asked_.begin(), asked_.end(), failing), 2);
  bool recorded = false;
  for (const TuningRecord& record : database.Records(ThisHost(), site_.key)) {
    if (record.configuration != failing) continue;
    recorded = true;
    EXPECT_FALSE(record.seconds);
    EXPECT_EQ(record.error, "killed by signal 11 (SIGSEGV)");
  }
  EXPECT_TRUE(recorded);
  asked_.clear();
  TuneSite(site_, options, ThisHost(), database, CountingRunner(failing), {});
  EXPECT_THAT(asked_, ::testing::Not(Contains(failing)));
}

TEST_F(TemplateTuningTest, RecordsOfAnotherHostFailTheTask) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "tunes target intel";
#endif
  TuningDatabase database(database_);
  TuneOptions options = SmallTuning();
  options.trials = 1;
  const TaskRunner elsewhere = [](const TuningTask& task) {
    TaskOutcome outcome{MeasureTuningTask(task), ""};
    for (TuningRecord& record : outcome.records) record.host.threads += 1;
    return outcome;
  };
  EXPECT_THAT(ErrorOf([&] { TuneSite(site_, options, ThisHost(), database, elsewhere, {}); }),
              HasSubstr("no candidate ran at every extent"));
  const std::vector<TuningRecord> records = database.Records(ThisHost(), site_.key);
  ASSERT_FALSE(records.empty());
  EXPECT_THAT(records.front().error, HasSubstr("threads, expected"));
}

TEST_F(TemplateTuningTest, ACompileTakesTheTunedChoice) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "tunes target intel";
#endif
  const ir::IRModule module = Lowered(kTwoDenseAndABatchedProduct);
  {
    TuningDatabase database(database_);
    database.RecordTuned(ThisHost(), "intel", site_.key,
                         {"generated tile 2x8", "generated tile 2x8", 1.0, 5});
  }
  CompileOptions options;
  options.tuning_database = database_;
  for (const std::string kernels : {"auto", "generated"}) {
    options.kernels = kernels;
    const KernelChoices choices = ChooseMatMulKernels(module, options);
    int tuned = 0;
    for (const auto& [primitive, choice] : choices) {
      if (choice.matmul.tile_rows == 2 && choice.matmul.tile_cols == 8) {
        ++tuned;
        EXPECT_EQ(choice.kernel, kGeneratedKernel);
      }
    }
    EXPECT_EQ(tuned, 2) << kernels;  // both dense calls share the shape class
  }
  // A library kernel chosen by tuning runs where auto compiles.
  {
    TuningDatabase database(database_);
    database.RecordTuned(ThisHost(), "intel", site_.key,
                         {"nn.dense", "generated tile 2x8", 1.0, 5});
  }
  options.kernels = "auto";
  int library = 0;
  for (const auto& [primitive, choice] : ChooseMatMulKernels(module, options)) {
    library += choice.kernel == "nn.dense" ? 1 : 0;
  }
  EXPECT_EQ(library, 2);
  // A library tuned on the pool is taken; one tuned under its bare name
  // (on its own threads, before the pool) is not: the site is measured.
  for (const auto& [tuned_kernel, taken] :
       {std::pair{"nn.dense.openblas on the pool", 2}, std::pair{"nn.dense.openblas", 0}}) {
    {
      TuningDatabase database(database_);
      database.RecordTuned(ThisHost(), "intel", site_.key,
                           {tuned_kernel, "generated tile 2x8", 1.0, 5});
    }
    int openblas = 0;
    for (const auto& [primitive, choice] : ChooseMatMulKernels(module, options)) {
      openblas += choice.kernel == "nn.dense.openblas" ? 1 : 0;
    }
    EXPECT_EQ(openblas, taken) << tuned_kernel;
  }
  // An explicit tile wins over tuning.
  options.tuned_matmul = false;
  for (const auto& [primitive, choice] : ChooseMatMulKernels(module, options)) {
    EXPECT_EQ(choice.matmul.tile_rows, te::MatMulKnobs{}.tile_rows);
  }
  // And the executable it gives computes what the built-in kernels do.
  options.tuned_matmul = true;
  options.kernels = "generated";
  CompileOptions builtin = options;
  builtin.kernels = "builtin";
  ir::IRModule program = text::ParseModule(kTwoDenseAndABatchedProduct, "test.relay");
  typing::InferTypes(program);
  std::vector<Ref<Object>> args;
  for (const Shape& shape : std::vector<Shape>{{5, 32}, {24, 32}, {24, 32}, {2, 5, 8}, {2, 6, 8}}) {
    Tensor tensor = TensorNode::Empty(shape, DataType::Float32());
    for (int64_t i = 0; i < tensor->numel(); ++i) tensor->data<float>()[i] = (i % 7) * 0.25f - 0.5f;
    args.push_back(tensor);
  }
  const auto outputs = [&](const CompileOptions& compile) {
    vm::VirtualMachine machine(Compile(program, compile));
    const Ref<Object> result = machine.Invoke("main", args);
    std::vector<std::vector<float>> values;
    for (const Ref<Object>& field : result.as<ADTNode>()->fields()) {
      const Tensor tensor = field.as<TensorNode>();
      values.emplace_back(tensor->data<float>(), tensor->data<float>() + tensor->numel());
    }
    return values;
  };
  const std::vector<std::vector<float>> tuned_values = outputs(options);
  const std::vector<std::vector<float>> builtin_values = outputs(builtin);
  ASSERT_EQ(tuned_values.size(), 3u);
  for (size_t i = 0; i < tuned_values.size(); ++i) {
    ASSERT_EQ(tuned_values[i].size(), builtin_values[i].size());
    for (size_t j = 0; j < tuned_values[i].size(); ++j) {
      EXPECT_NEAR(tuned_values[i][j], builtin_values[i][j], 1e-4) << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace nimble::backend
