// The names of the figures `nimble-bench microbench dispatch` records
// (dispatch_microbench.h) and the report's Figure 3 reads back, so that
// both sides spell them one way.
#pragma once

#include <cstdint>
#include <string>

namespace nimble::bench {

// results.db's runs.model of a dispatch microbenchmark (kind 'microbench').
inline constexpr const char* kDispatchMicrobench = "dispatch";

// "dense_768x3072": nn.dense from `in` to `out` features.
inline std::string DenseShapeName(int64_t in, int64_t out) {
  return "dense_" + std::to_string(in) + "x" + std::to_string(out);
}

// "static" for the program compiled at each length, else "dispatch8".
inline std::string DispatchVariantName(int degree) {
  return degree == 0 ? "static" : "dispatch" + std::to_string(degree);
}

// "dense_768x3072.dispatch8_relative": `what` is us (µs per call, the mean
// over lengths), relative (the mean over lengths of the time over the
// static program's) or worst_relative (the largest such ratio).
inline std::string DispatchFigureName(int64_t in, int64_t out, int degree,
                                      const std::string& what) {
  return DenseShapeName(in, out) + "." + DispatchVariantName(degree) + "_" + what;
}

}  // namespace nimble::bench
