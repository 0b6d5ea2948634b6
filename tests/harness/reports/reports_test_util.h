// What the report and gate suites share: cells as the renderers get them, a
// fully described run to record, and a per-test scratch directory for the
// real results.db files the tests fill.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "harness/bench/results_db.h"
#include "harness/reports/report.h"

namespace nimble::reports::test_util {

inline Cell PlainCell(const std::string& text) {
  Cell cell;
  cell.text = text;
  return cell;
}

inline Cell GapCell(const std::string& text) {
  Cell cell = PlainCell(text);
  cell.gap = true;
  return cell;
}

inline Cell MeasuredCell(const std::string& text, double value, int64_t run) {
  Cell cell = PlainCell(text);
  cell.value = value;
  cell.run = run;
  return cell;
}

// A finished Nimble run of `model` on `host`, Intel, one thread, with every
// column set; tests change what they compare.
inline bench::RunInfo RunInfoOf(
    const std::string& model = "lstm",
    const std::string& configuration = R"({"input_size":300,"hidden_size":512,"layers":1})",
    const std::string& host = "box-1") {
  bench::RunInfo info;
  info.started_at = "2021-03-01T10:00:00.000Z";
  info.commit_id = "abc1234";
  info.host = host;
  info.cpu_model = "Xeon Platinum 8259CL";
  info.cpu_flags = "avx2 avx512f fma";
  info.cores = 8;
  info.threads = 1;
  info.target = "intel";
  info.model = model;
  info.configuration = configuration;
  info.dataset = "synthetic";
  info.split = "test";
  info.sentences = 10;
  info.warmup = 1;
  info.repeat = 3;
  info.arch = "x86_64";
  return info;
}

// A fresh directory per test, named after it, removed afterwards unless the
// test failed (so its files can be looked at).
class ScratchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("nimble_reports_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

// A scratch directory with a fresh results.db in it, closed before the
// directory goes.
class ResultsDbTest : public ScratchTest {
 protected:
  void SetUp() override {
    ScratchTest::SetUp();
    db_ = std::make_unique<bench::ResultsDb>(Path("results.db"));
  }
  void TearDown() override {
    db_.reset();
    ScratchTest::TearDown();
  }

  std::unique_ptr<bench::ResultsDb> db_;
};

}  // namespace nimble::reports::test_util
