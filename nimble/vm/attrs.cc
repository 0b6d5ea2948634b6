#include "nimble/vm/attrs.h"

#include <cstdio>
#include <cstdlib>

#include "nimble/vm/error.h"

namespace nimble {

std::string AttrKindName(AttrKind kind) {
  switch (kind) {
    case AttrKind::kBool:
      return "bool";
    case AttrKind::kInt:
      return "int";
    case AttrKind::kFloat:
      return "float";
    case AttrKind::kString:
      return "string";
    case AttrKind::kIntList:
      return "int list";
    case AttrKind::kIntOrIntList:
      return "int or int list";
    case AttrKind::kDType:
      return "dtype";
  }
  return "?";
}

std::string AttrValueToString(const AttrValue& value) {
  struct Printer {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return FormatFloatLiteral(v) + "f"; }
    std::string operator()(const std::string& v) const { return "\"" + v + "\""; }
    std::string operator()(const std::vector<int64_t>& v) const {
      std::string text = "[";
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) text += ", ";
        text += std::to_string(v[i]);
      }
      return text + "]";
    }
    std::string operator()(DataType v) const { return "\"" + v.name() + "\""; }
  };
  return std::visit(Printer{}, value);
}

std::string FormatFloatLiteral(double value) {
  char buffer[64];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  std::string text = buffer;
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

const AttrValue* Attrs::Find(const std::string& name) const {
  for (const auto& [key, value] : entries_) {
    if (key == name) return &value;
  }
  return nullptr;
}

void Attrs::Set(const std::string& name, AttrValue value) {
  for (auto& [key, existing] : entries_) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  entries_.emplace_back(name, std::move(value));
}

const AttrValue& Attrs::Get(const std::string& name) const {
  const AttrValue* value = Find(name);
  if (!value) throw Error("missing attribute '" + name + "'");
  return *value;
}

bool Attrs::IsNone(const std::string& name) const {
  const AttrValue* value = Find(name);
  return !value || std::holds_alternative<std::monostate>(*value);
}

namespace {

template <typename T>
const T& GetAs(const AttrValue& value, const std::string& name, const char* kind) {
  if (const T* typed = std::get_if<T>(&value)) return *typed;
  throw Error("attribute '" + name + "' is " + AttrValueToString(value) + ", expected a " + kind);
}

}  // namespace

bool Attrs::GetBool(const std::string& name) const {
  return GetAs<bool>(Get(name), name, "bool");
}
int64_t Attrs::GetInt(const std::string& name) const {
  return GetAs<int64_t>(Get(name), name, "int");
}
double Attrs::GetFloat(const std::string& name) const {
  const AttrValue& value = Get(name);
  if (const int64_t* integer = std::get_if<int64_t>(&value)) return static_cast<double>(*integer);
  return GetAs<double>(value, name, "float");
}
const std::string& Attrs::GetString(const std::string& name) const {
  return GetAs<std::string>(Get(name), name, "string");
}
const std::vector<int64_t>& Attrs::GetIntList(const std::string& name) const {
  return GetAs<std::vector<int64_t>>(Get(name), name, "list of ints");
}
DataType Attrs::GetDType(const std::string& name) const {
  return GetAs<DataType>(Get(name), name, "dtype");
}

}  // namespace nimble
