#include "harness/cli/random_tensors.h"

#include <charconv>
#include <random>

#include "nimble/vm/error.h"

namespace nimble::cli {

namespace {

std::vector<std::string> SplitOn(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end - begin));
    if (end == std::string::npos) return parts;
    begin = end + 1;
  }
}

Shape ParseShape(const std::string& text, const std::string& spec) {
  if (text == "scalar") return {};
  Shape shape;
  for (const std::string& part : SplitOn(text, 'x')) {
    int64_t dim = -1;
    const auto [end, status] = std::from_chars(part.data(), part.data() + part.size(), dim);
    if (part.empty() || status != std::errc() || end != part.data() + part.size() || dim < 0) {
      throw Error("bad shape '" + text + "' in tensor spec '" + spec +
                  "' (expected dimensions joined by 'x', like 5x8, or 'scalar')");
    }
    shape.push_back(dim);
  }
  ShapeNumel(shape);  // rejects shapes too large to allocate
  return shape;
}

// A double uniform in [0, 1) from the top 53 bits of one draw; spelled out
// (rather than std::uniform_real_distribution) so files are the same with
// every standard library.
double UnitInterval(std::mt19937_64& engine) {
  return static_cast<double>(engine() >> 11) * 0x1.0p-53;
}

double RandomValue(DataType dtype, std::mt19937_64& engine) {
  if (dtype.is_float()) return 2.0 * UnitInterval(engine) - 1.0;
  if (dtype.is_bool()) return static_cast<double>(engine() & 1);
  if (dtype.code() == DataType::Code::kUInt) return static_cast<double>(engine() % 9);
  return static_cast<double>(engine() % 9) - 4.0;
}

}  // namespace

TensorSpec ParseTensorSpec(const std::string& spec) {
  const std::vector<std::string> parts = SplitOn(spec, ':');
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty()) {
    throw Error("bad tensor spec '" + spec +
                "' (expected NAME:SHAPE[:DTYPE], like w:16x8:float32)");
  }
  TensorSpec result{parts[0], ParseShape(parts[1], spec), DataType::Float32()};
  if (parts.size() == 3 && !DataType::TryParse(parts[2], &result.dtype)) {
    throw Error("unknown dtype '" + parts[2] + "' in tensor spec '" + spec + "'");
  }
  return result;
}

std::vector<std::pair<std::string, Tensor>> RandomTensors(const std::vector<TensorSpec>& specs,
                                                          uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const TensorSpec& spec : specs) {
    Tensor tensor = TensorNode::Empty(spec.shape, spec.dtype);
    for (int64_t i = 0; i < tensor->numel(); ++i) {
      tensor->SetFromDouble(i, RandomValue(spec.dtype, engine));
    }
    tensors.emplace_back(spec.name, std::move(tensor));
  }
  return tensors;
}

}  // namespace nimble::cli
