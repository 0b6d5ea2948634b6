#include "nimble/compiler/op/tree_schedule.h"

#include <sstream>
#include <string>
#include <vector>

#include "nimble/compiler/ir/type.h"
#include "nimble/compiler/op/op.h"
#include "nimble/vm/error.h"

namespace nimble::op {

namespace {

std::vector<std::string> SplitNames(const std::string& names) {
  std::vector<std::string> parts;
  if (names.empty()) return parts;
  std::stringstream stream(names);
  for (std::string part; std::getline(stream, part, ',');) parts.push_back(part);
  return parts;
}

// Tuple(groups (?, 4), children (?, max_children), one (?, *shape) table a payload).
bool TreeScheduleRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                          TypeReporter& reporter) {
  const ir::Type& tree = types[0];
  if (!tree || tree->kind == ir::TypeKind::kIncomplete || tree->kind == ir::TypeKind::kTypeVar) {
    return false;
  }
  if (tree->kind != ir::TypeKind::kGlobalTypeVar && tree->kind != ir::TypeKind::kTypeCall) {
    throw Error("adt.tree_schedule takes a value of an ADT, got " + ir::TypeToString(tree));
  }
  const vm::TreeScheduleLayout layout = TreeScheduleLayoutOf(attrs);
  std::vector<ir::Type> fields{
      ir::MakeTensorType({ir::Dim::Any(), 4}, DataType::Int32()),
      ir::MakeTensorType({ir::Dim::Any(), layout.max_children}, DataType::Int32())};
  for (const vm::TreeScheduleLayout::Payload& payload : layout.payloads) {
    std::vector<ir::Dim> shape{ir::Dim::Any()};
    for (const int64_t dim : payload.shape) shape.emplace_back(dim);
    fields.push_back(ir::MakeTensorType(std::move(shape), payload.dtype));
  }
  reporter.Assign(types.back(), ir::MakeTupleType(std::move(fields)));
  return true;
}

}  // namespace

vm::TreeScheduleLayout TreeScheduleLayoutOf(const ir::Attrs& attrs) {
  const std::vector<int64_t>& tags = attrs.GetIntList("payload_tags");
  const std::vector<int64_t>& fields = attrs.GetIntList("payload_fields");
  const std::vector<int64_t>& ranks = attrs.GetIntList("payload_ranks");
  const std::vector<int64_t>& dims = attrs.GetIntList("payload_shapes");
  const std::vector<std::string> dtypes = SplitNames(attrs.GetString("payload_dtypes"));
  if (fields.size() != tags.size() || ranks.size() != tags.size() || dtypes.size() != tags.size()) {
    throw Error(
        "adt.tree_schedule: payload_tags, payload_fields, payload_ranks and "
        "payload_dtypes must name as many payloads, got " +
        std::to_string(tags.size()) + ", " + std::to_string(fields.size()) + ", " +
        std::to_string(ranks.size()) + " and " + std::to_string(dtypes.size()));
  }
  std::vector<int64_t> encoded;
  size_t at = 0;
  for (size_t p = 0; p < tags.size(); ++p) {
    const DataType dtype = DataType::Parse(dtypes[p]);
    encoded.insert(encoded.end(), {tags[p], fields[p], static_cast<int64_t>(dtype.code()),
                                   dtype.bits(), ranks[p]});
    if (ranks[p] < 0 || at + static_cast<size_t>(ranks[p]) > dims.size()) {
      throw Error("adt.tree_schedule: payload_ranks need " + std::to_string(at + ranks[p]) +
                  " dims of payload_shapes, which has " + std::to_string(dims.size()));
    }
    encoded.insert(encoded.end(), dims.begin() + static_cast<std::ptrdiff_t>(at),
                   dims.begin() + static_cast<std::ptrdiff_t>(at + ranks[p]));
    at += static_cast<size_t>(ranks[p]);
  }
  if (at != dims.size()) {
    throw Error("adt.tree_schedule: payload_shapes has " + std::to_string(dims.size()) +
                " dims, the ranks " + std::to_string(at));
  }
  return vm::DecodeTreeScheduleLayout(attrs.GetInt("max_children"), encoded);
}

ir::Call MakeTreeScheduleCall(ir::Expr tree, const vm::TreeScheduleLayout& layout) {
  std::vector<int64_t> tags, fields, ranks, dims;
  std::string dtypes;
  for (const vm::TreeScheduleLayout::Payload& payload : layout.payloads) {
    tags.push_back(payload.tag);
    fields.push_back(payload.field);
    ranks.push_back(static_cast<int64_t>(payload.shape.size()));
    dims.insert(dims.end(), payload.shape.begin(), payload.shape.end());
    dtypes += (dtypes.empty() ? "" : ",") + payload.dtype.name();
  }
  ir::Attrs attrs;
  attrs.Set("max_children", layout.max_children);
  attrs.Set("payload_tags", std::move(tags));
  attrs.Set("payload_fields", std::move(fields));
  attrs.Set("payload_ranks", std::move(ranks));
  attrs.Set("payload_shapes", std::move(dims));
  attrs.Set("payload_dtypes", std::move(dtypes));
  return MakeOpCall("adt.tree_schedule", {std::move(tree)}, std::move(attrs));
}

void RegisterTreeScheduleOp(OpRegistry& registry) {
  OpDef& def = registry.Register("adt.tree_schedule");
  def.description =
      "The schedule of a tree value for a batched recursive function: its nodes grouped by "
      "height and constructor, each node's children and the payload tensors of each "
      "constructor stacked (vm/tree_schedule.h).";
  def.min_inputs = def.max_inputs = 1;
  const auto int_list = [](const char* name) {
    return AttrSpec{
        .name = name, .kind = ir::AttrKind::kIntList, .default_value = std::vector<int64_t>{}};
  };
  def.attrs = {
      {.name = "max_children", .kind = ir::AttrKind::kInt, .default_value = {}, .required = true},
      int_list("payload_tags"),
      int_list("payload_fields"),
      int_list("payload_ranks"),
      int_list("payload_shapes"),
      {.name = "payload_dtypes", .kind = ir::AttrKind::kString, .default_value = std::string()}};
  def.relation = TreeScheduleRelation;
  def.pattern = OpPattern::kOpaque;
  def.dialect = true;
}

}  // namespace nimble::op
