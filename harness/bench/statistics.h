// Order statistics of timings: benchmarks report medians, which one slow
// repetition on a shared host does not move.
#pragma once

#include <algorithm>
#include <vector>

namespace nimble::bench {

// The median of `values` (the mean of the middle two for an even count);
// `values` must not be empty.
inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace nimble::bench
