// Text helpers shared by every layer (the runtime is the lowest one).
#pragma once

#include <string>
#include <vector>

namespace nimble {

// "a, b, c" for {"a", "b", "c"} with separator ", ".
inline std::string JoinStrings(const std::vector<std::string>& words,
                               const std::string& separator) {
  std::string joined;
  for (const std::string& word : words) joined += (joined.empty() ? "" : separator) + word;
  return joined;
}

}  // namespace nimble
