// Peer baselines end to end: each framework's variants on a small model,
// Nimble's outputs checked in the framework's own interpreter, found the way
// `nimble-bench baseline` finds it (scripts/install-peers.sh's environments
// first). A framework whose environment is absent is skipped, saying how to
// install it; nothing is installed here.
#include "harness/baselines/peer_baseline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/agent/child_process.h"
#include "harness/bench/scratch_dir.h"
#include "nimble/vm/error.h"

namespace nimble::baselines {
namespace {

using ::testing::HasSubstr;

// Tiny models: a run's cost is the frameworks' start-up, not the models.
bench::BenchOptions SmallModel(const std::string& model) {
  bench::BenchOptions options;
  options.model = model;
  options.dataset.count = 3;
  options.warmup = 1;
  options.repeat = 2;
  options.lstm.input_size = options.treelstm.input_size = 8;
  options.lstm.hidden_size = options.treelstm.hidden_size = 16;
  options.bert.layers = 1;
  options.bert.hidden_size = 32;
  options.bert.heads = 2;
  options.bert.ffn_size = 64;
  return options;
}

PeerOptions Peer(const std::string& framework) {
  PeerOptions options;
  options.framework = framework;
  options.threads = 1;
  return options;
}

const bench::Progress kQuiet = [](const std::string&, size_t, size_t) {};

double Figure(const PeerResult& result, const std::string& name) {
  for (const bench::Measurement& measurement : result.measurements) {
    if (measurement.name == name) return measurement.value;
  }
  ADD_FAILURE() << result.variant << " has no figure " << name;
  return 0;
}

struct FrameworkModel {
  std::string framework;
  std::string model;
};

std::vector<FrameworkModel> Baselines() {
  std::vector<FrameworkModel> baselines;
  for (const std::string& framework : PeerFrameworks()) {
    for (const char* model : {"lstm", "treelstm", "bert"}) {
      if (!PeerVariants(framework, model).empty()) baselines.push_back({framework, model});
    }
  }
  return baselines;
}

class PeerBaseline : public ::testing::TestWithParam<FrameworkModel> {};

// Every variant runs, in the order PeerVariants names them, each with its
// outputs within the tolerance its run states and its precision recorded.
TEST_P(PeerBaseline, EveryVariantMatchesNimble) {
  const auto& [framework, model] = GetParam();
  std::vector<PeerResult> results;
  try {
    results = RunPeerBaseline(SmallModel(model), Peer(framework), kQuiet);
  } catch (const Error& error) {
    const std::string message = error.what();
    if (message.find("is not installed") != std::string::npos ||
        message.find("is not importable") != std::string::npos) {
      GTEST_SKIP() << message;
    }
    throw;
  }
  std::vector<std::string> variants;
  for (const PeerResult& result : results) {
    variants.push_back(result.variant);
    SCOPED_TRACE(framework + "/" + result.variant);
    EXPECT_FALSE(result.version.empty());
    ASSERT_TRUE(result.configuration.contains("precision"));
    const std::string precision = result.configuration["precision"].get<std::string>();
    // f32 is held to the protocol's tolerance; less states its own.
    const double atol = precision == "f32" ? 1e-4 : result.configuration.at("atol").get<double>();
    EXPECT_LE(Figure(result, "max_abs_error"), atol + 1e-3);
    EXPECT_GT(Figure(result, "us_per_token"), 0);
    EXPECT_EQ(Figure(result, "sentences"), 3);
    std::cout << framework << " " << model << " " << result.variant << " " << result.version << " "
              << result.configuration.dump() << ": " << Figure(result, "us_per_token")
              << " us/token, max_abs_error " << Figure(result, "max_abs_error") << "\n";
  }
  EXPECT_EQ(variants, PeerVariants(framework, model));
}

INSTANTIATE_TEST_SUITE_P(Frameworks, PeerBaseline, ::testing::ValuesIn(Baselines()),
                         [](const auto& info) {
                           return info.param.framework + "_" + info.param.model;
                         });

TEST(PeerBaselineErrors, AModelWithoutABaselineSaysWhy) {
  const auto Why = [](const std::string& framework, const std::string& model) {
    try {
      RunPeerBaseline(SmallModel(model), Peer(framework), kQuiet);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(Why("openvino", "treelstm"),
              HasSubstr("OpenVINO has no Tree-LSTM baseline: the model recurses over a tree"));
  EXPECT_THAT(Why("tvm", "lstm"), HasSubstr("TVM has no LSTM baseline: TVM 0.27's Relax ONNX "
                                            "importer has no LSTM operator"));
  EXPECT_THAT(Why("mxnet", "treelstm"), HasSubstr("MXNet has no Tree-LSTM baseline"));
  EXPECT_THAT(Why("dynet", "bert"), HasSubstr("DyNet has no BERT baseline"));
  EXPECT_THAT(Why("fold", "treelstm"), HasSubstr("unknown framework 'fold' (pytorch, "));
  EXPECT_TRUE(PeerVariants("tvm", "lstm").empty());
}

TEST(PeerBaselineErrors, AMissingEnvironmentNamesTheInstallCommand) {
  const char* old_dir = getenv("NIMBLE_PEERS_DIR");
  const std::string saved = old_dir ? old_dir : "";
  setenv("NIMBLE_PEERS_DIR", "/nonexistent/peers", 1);
  EXPECT_EQ(PeersDir(), "/nonexistent/peers");
  std::string message = "no error";
  try {
    RunPeerBaseline(SmallModel("lstm"), Peer("mxnet"), kQuiet);
  } catch (const Error& error) {
    message = error.what();
  }
  old_dir ? setenv("NIMBLE_PEERS_DIR", saved.c_str(), 1) : unsetenv("NIMBLE_PEERS_DIR");
  // Where python3 itself has MXNet, the lookup finds it there instead.
  if (message == "no error") GTEST_SKIP() << "python3 on PATH imports mxnet";
  EXPECT_THAT(message, HasSubstr("MXNet is not installed: there is no /nonexistent/peers/mxnet/"
                                 "bin/python"));
  EXPECT_THAT(message, HasSubstr("scripts/install-peers.sh mxnet"));
}

// A run that cannot end in its time limit fails with that reason after one
// timed pass rather than being killed or recording a partial figure.
TEST(PeerBaselineErrors, ARunPastItsTimeLimitFailsSayingSo) {
  bench::BenchOptions model = SmallModel("lstm");
  model.repeat = 1000000;
  PeerOptions options = Peer("pytorch");
  options.time_limit_s = 60;
  std::string message = "no error";
  try {
    RunPeerBaseline(model, options, kQuiet);
  } catch (const Error& error) {
    message = error.what();
  }
  if (message.find("torch is not importable") != std::string::npos) GTEST_SKIP() << message;
  EXPECT_THAT(message, HasSubstr("pytorch/native: 1000000 timed passes of"));
  EXPECT_THAT(message, HasSubstr("past the time limit; measured none"));
}

// Through the real binary into results.db (whose framework column admits
// the new peers): a reduced-precision variant's run carries its precision
// and the looser tolerance it was checked with, and its compile time.
TEST(PeerBaselineCli, ARunRecordsItsPrecisionAndTolerance) {
  const bench::ScratchDir dir("peer_baseline_test_");
  agent::ChildOptions child;
  child.timeout_s = 600;
  const agent::ChildResult result =
      agent::RunChild({NIMBLE_BENCH_BINARY, "baseline", "--framework", "openvino", "--model",
                       "lstm", "--hidden-size", "16", "--sentences", "3", "--warmup", "1",
                       "--repeat", "2", "--threads", "1", "--db", dir.File("results.db"), "--json"},
                      child);
  if (result.err_tail.find("is not installed") != std::string::npos) {
    GTEST_SKIP() << result.err_tail;
  }
  ASSERT_TRUE(result.ok()) << result.Describe();
  std::vector<std::string> seen;
  for (const nlohmann::json& run : nlohmann::json::parse(result.out)) {
    const nlohmann::json& configuration = run.at("configuration");
    const std::string precision = configuration.at("precision");
    seen.push_back(configuration.at("variant").get<std::string>() + " " + precision);
    // The host's own precision needs a looser check, stated in the run.
    EXPECT_EQ(configuration.contains("atol"), precision != "f32") << configuration.dump();
    EXPECT_EQ(run.at("measurements").at("compile_s").at("unit"), "s");
  }
  ASSERT_EQ(seen.size(), 2u) << result.out;
  EXPECT_EQ(seen[0], "f32 f32");
  EXPECT_THAT(seen[1], ::testing::StartsWith("default "));
}

}  // namespace
}  // namespace nimble::baselines
