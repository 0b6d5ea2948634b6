// Keyword attributes of an operator call (`axis=-1`, `newshape=[1, -1]`,
// `dtype="int64"`). Each operator declares a schema of the attributes it takes
// (compiler/op/op.h); calls carry them normalised against it, defaults filled
// in. They live in the runtime because kernels are bound to them when an
// executable is loaded.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "nimble/vm/dtype.h"

namespace nimble {

// std::monostate is Relay's `None`.
using AttrValue = std::variant<std::monostate, bool, int64_t, double, std::string,
                               std::vector<int64_t>, DataType>;

// kIntOrIntList keeps whichever was written: `split(indices_or_sections=3)`
// (sections) means something else than `indices_or_sections=[3]` (indices).
enum class AttrKind : uint8_t { kBool, kInt, kFloat, kString, kIntList, kIntOrIntList, kDType };

std::string AttrKindName(AttrKind kind);
// The value in Relay text syntax: `True`, `-1`, `0.5f`, `"same"`, `[1, 2]`, `"int64"`, `None`.
std::string AttrValueToString(const AttrValue& value);
// Shortest decimal text that reads back as the same double, always with a '.'
// or exponent ("1.0", "0.1", "1e-05"), so it never reads as an integer.
std::string FormatFloatLiteral(double value);

class Attrs {
 public:
  Attrs() = default;

  bool Has(const std::string& name) const { return Find(name) != nullptr; }
  // Null when absent.
  const AttrValue* Find(const std::string& name) const;
  void Set(const std::string& name, AttrValue value);

  // Typed reads of a present attribute; they throw nimble::Error naming the
  // attribute when it is absent or of another kind. An int reads as a float.
  bool GetBool(const std::string& name) const;
  int64_t GetInt(const std::string& name) const;
  double GetFloat(const std::string& name) const;
  const std::string& GetString(const std::string& name) const;
  const std::vector<int64_t>& GetIntList(const std::string& name) const;
  DataType GetDType(const std::string& name) const;
  // True when the attribute is absent or None.
  bool IsNone(const std::string& name) const;

  const std::vector<std::pair<std::string, AttrValue>>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  bool operator==(const Attrs& other) const { return entries_ == other.entries_; }

 private:
  const AttrValue& Get(const std::string& name) const;
  std::vector<std::pair<std::string, AttrValue>> entries_;  // in schema order
};

}  // namespace nimble
