#include "harness/cli/dim_bounds.h"

#include <charconv>
#include <system_error>

#include "nimble/vm/error.h"

namespace nimble::cli {

std::map<std::string, int64_t> ParseDimBounds(const std::vector<std::string>& texts) {
  std::map<std::string, int64_t> bounds;
  for (const std::string& text : texts) {
    const size_t equals = text.rfind('=');
    int64_t bound = 0;
    const char* digits = equals == std::string::npos ? nullptr : text.data() + equals + 1;
    const auto [end, error] = digits ? std::from_chars(digits, text.data() + text.size(), bound)
                                     : std::from_chars_result{nullptr, std::errc::invalid_argument};
    if (equals == 0 || error != std::errc() || end != text.data() + text.size() || bound < 1) {
      throw Error(
          "--dim-bound takes NAME=N, a named input dimension and its largest size (N >= 1), "
          "got '" +
          text + "'");
    }
    if (!bounds.emplace(text.substr(0, equals), bound).second) {
      throw Error("--dim-bound gives dimension '" + text.substr(0, equals) + "' twice");
    }
  }
  return bounds;
}

}  // namespace nimble::cli
