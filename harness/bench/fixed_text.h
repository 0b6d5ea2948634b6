// Numbers as the command line and the reports print them.
#pragma once

#include <cstdio>
#include <string>

namespace nimble::bench {

// `value` with exactly `decimals` digits after the point: Fixed(1.02349, 3)
// is "1.023".
inline std::string Fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

}  // namespace nimble::bench
