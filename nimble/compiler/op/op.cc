#include "nimble/compiler/op/op.h"

#include <mutex>
#include <unordered_map>

#include "nimble/vm/error.h"

namespace nimble::op {

std::string OpPatternName(OpPattern pattern) {
  switch (pattern) {
    case OpPattern::kElemWise:
      return "elemwise";
    case OpPattern::kBroadcast:
      return "broadcast";
    case OpPattern::kInjective:
      return "injective";
    case OpPattern::kCommReduce:
      return "reduction";
    case OpPattern::kOutEWiseFusable:
      return "out-elemwise-fusable";
    case OpPattern::kTuple:
      return "tuple";
    case OpPattern::kOpaque:
      return "opaque";
  }
  return "?";
}

namespace {

// Takes each op's shape function from its runtime definition, the one the VM
// runs, so the compiler and the runtime cannot disagree on output shapes.
void LinkRuntimeHalves(OpRegistry& registry) {
  for (const std::string& name : registry.Names()) {
    OpDef& def = *registry.FindMutable(name);
    if (def.dialect) continue;
    const vm::OpKernelDef* runtime = vm::OpKernelRegistry::Global().Find(name);
    if (!runtime) throw Error("operator '" + name + "' has no runtime definition");
    def.shape_func = runtime->shape_func;
    def.shape_mode = runtime->shape_mode;
    def.shape_rule = runtime->shape_rule;
  }
}

}  // namespace

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry registry = [] {
    OpRegistry built;
    RegisterUnaryOps(built);
    RegisterBinaryOps(built);
    RegisterNnOps(built);
    RegisterConvOps(built);
    RegisterReduceOps(built);
    RegisterTransformOps(built);
    RegisterCreationOps(built);
    RegisterDynamicOps(built);
    RegisterIndexOps(built);
    RegisterMemoryOps(built);
    RegisterTreeScheduleOp(built);
    LinkRuntimeHalves(built);
    return built;
  }();
  return registry;
}

OpDef& OpRegistry::Register(const std::string& name) {
  auto [it, inserted] = ops_.try_emplace(name, std::make_unique<OpDef>());
  if (!inserted) throw Error("operator '" + name + "' is registered twice");
  it->second->name = name;
  return *it->second;
}

const OpDef* OpRegistry::Find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

OpDef* OpRegistry::FindMutable(const std::string& name) {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

std::vector<std::string> OpRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, def] : ops_) names.push_back(name);
  return names;
}

ir::Op GetOp(const std::string& name) {
  static std::mutex mutex;
  static std::unordered_map<std::string, ir::Op> interned;
  const OpDef* def = OpRegistry::Global().Find(name);
  if (!def) throw Error("unknown operator '" + name + "'");
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = interned.try_emplace(name);
  if (inserted) it->second = Make<ir::OpNode>(name, def);
  return it->second;
}

namespace {

bool MatchesKind(const ir::AttrValue& value, ir::AttrKind kind) {
  switch (kind) {
    case ir::AttrKind::kBool:
      return std::holds_alternative<bool>(value);
    case ir::AttrKind::kInt:
      return std::holds_alternative<int64_t>(value);
    case ir::AttrKind::kFloat:
      return std::holds_alternative<double>(value);
    case ir::AttrKind::kString:
      return std::holds_alternative<std::string>(value);
    case ir::AttrKind::kIntList:
      return std::holds_alternative<std::vector<int64_t>>(value);
    case ir::AttrKind::kIntOrIntList:
      return std::holds_alternative<int64_t>(value) ||
             std::holds_alternative<std::vector<int64_t>>(value);
    case ir::AttrKind::kDType:
      return std::holds_alternative<DataType>(value);
  }
  return false;
}

// Converts the spellings the text format allows into the schema's kind: an int
// where a float is expected, a single int where a list is expected (`axis=1`
// for `axis=[1]`), a string where a dtype is expected.
ir::AttrValue Coerce(const OpDef& def, const AttrSpec& spec, const ir::AttrValue& value) {
  if (std::holds_alternative<std::monostate>(value)) {
    if (spec.nullable || std::holds_alternative<std::monostate>(spec.default_value)) return value;
  } else if (MatchesKind(value, spec.kind)) {
    return value;
  } else if (spec.kind == ir::AttrKind::kFloat && std::holds_alternative<int64_t>(value)) {
    return static_cast<double>(std::get<int64_t>(value));
  } else if (spec.kind == ir::AttrKind::kIntList && std::holds_alternative<int64_t>(value)) {
    return std::vector<int64_t>{std::get<int64_t>(value)};
  } else if (spec.kind == ir::AttrKind::kBool && std::holds_alternative<int64_t>(value)) {
    return std::get<int64_t>(value) != 0;
  } else if (spec.kind == ir::AttrKind::kDType && std::holds_alternative<std::string>(value)) {
    DataType dtype;
    if (DataType::TryParse(std::get<std::string>(value), &dtype)) return dtype;
  }
  throw Error("operator '" + def.name + "': attribute '" + spec.name + "' expects a " +
              ir::AttrKindName(spec.kind) + ", got " + ir::AttrValueToString(value));
}

}  // namespace

ir::Attrs NormalizeAttrs(const OpDef& def, const ir::Attrs& given) {
  for (const auto& [name, value] : given.entries()) {
    bool known = false;
    for (const AttrSpec& spec : def.attrs) known |= spec.name == name;
    if (!known) {
      std::string expected;
      for (const AttrSpec& spec : def.attrs) expected += (expected.empty() ? "" : ", ") + spec.name;
      throw Error("operator '" + def.name + "' has no attribute '" + name + "'" +
                  (expected.empty() ? " (it takes none)" : " (it takes " + expected + ")"));
    }
  }
  ir::Attrs normalized;
  for (const AttrSpec& spec : def.attrs) {
    const ir::AttrValue* value = given.Find(spec.name);
    if (!value) {
      if (spec.required) {
        throw Error("operator '" + def.name + "' requires attribute '" + spec.name + "'");
      }
      normalized.Set(spec.name, spec.default_value);
    } else {
      normalized.Set(spec.name, Coerce(def, spec, *value));
    }
  }
  return normalized;
}

ir::Call MakeOpCall(const std::string& op_name, std::vector<ir::Expr> args, ir::Attrs attrs) {
  ir::Op op = GetOp(op_name);
  const int count = static_cast<int>(args.size());
  if (count < op->def->min_inputs || count > op->def->max_inputs) {
    std::string expected = std::to_string(op->def->min_inputs);
    if (op->def->max_inputs != op->def->min_inputs) {
      expected += " to " + std::to_string(op->def->max_inputs);
    }
    throw Error("operator '" + op_name + "' takes " + expected + " argument(s), got " +
                std::to_string(count));
  }
  return Make<ir::CallNode>(std::move(op), std::move(args), NormalizeAttrs(*op->def, attrs));
}

}  // namespace nimble::op
