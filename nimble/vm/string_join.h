// Joining strings, for every layer (the runtime is the lowest one). Not
// "strings.h": nimble/vm is on some include paths, where that name would
// shadow the C library's header.
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
