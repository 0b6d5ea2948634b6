// --dim-bound NAME=N, the option of `nimble` and `nimble-bench run` that
// bounds an ONNX model's named input dimensions (onnx_import::ImportOptions).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace nimble::cli {

// {"sequence=512"} as {{"sequence", 512}}. Throws nimble::Error naming the
// text that is not NAME=N with N >= 1, or a name given twice.
std::map<std::string, int64_t> ParseDimBounds(const std::vector<std::string>& texts);

}  // namespace nimble::cli
