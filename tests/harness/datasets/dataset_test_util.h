// Helpers of the harness_datasets suite: scratch files, the real data in
// ../shared/data (tests skip without it), error expectations and the summary
// statistics the synthetic generators are held to.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "nimble/vm/error.h"

namespace nimble::datasets::testing {

inline std::string SharedData(const std::string& relative) {
  return std::string(NIMBLE_SOURCE_DIR) + "/../shared/data/" + relative;
}

#define SKIP_WITHOUT_SHARED_DATA()                                             \
  if (!std::filesystem::exists(::nimble::datasets::testing::SharedData(""))) { \
    GTEST_SKIP() << "../shared/data is absent";                                \
  }

// A fresh directory for the running test.
inline std::string ScratchDirectory() {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / "nimble_datasets" /
                               (std::string(test->test_suite_name()) + "." + test->name());
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path.string();
}

inline std::string WriteFile(const std::string& directory, const std::string& name,
                             const std::string& content) {
  std::string path = (std::filesystem::path(directory) / name).string();
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The message of the nimble::Error `action` throws ("" if it throws none).
inline std::string ErrorOf(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

struct Summary {
  double mean = 0;
  int min = 0;
  int p50 = 0;
  int p95 = 0;
  int max = 0;
};

// Nearest-rank percentiles.
inline Summary Summarize(std::vector<int> values) {
  std::sort(values.begin(), values.end());
  const auto rank = [&](double p) {
    return values[static_cast<size_t>(std::ceil(p * values.size())) - 1];
  };
  return {std::accumulate(values.begin(), values.end(), 0.0) / values.size(), values.front(),
          rank(0.5), rank(0.95), values.back()};
}

// "first..last: c c c ...", the form docs/datasets.md and the generators'
// constants use.
inline std::string Histogram(const std::vector<int>& values) {
  std::map<int, int> counts;
  for (int v : values) ++counts[v];
  std::string out =
      std::to_string(counts.begin()->first) + ".." + std::to_string(counts.rbegin()->first) + ":";
  for (int v = counts.begin()->first; v <= counts.rbegin()->first; ++v) {
    out += " " + std::to_string(counts.contains(v) ? counts[v] : 0);
  }
  return out;
}

}  // namespace nimble::datasets::testing
