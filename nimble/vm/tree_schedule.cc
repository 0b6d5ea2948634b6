#include "nimble/vm/tree_schedule.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <unordered_map>
#include <utility>

#include "nimble/vm/adt.h"
#include "nimble/vm/device.h"
#include "nimble/vm/error.h"
#include "nimble/vm/tensor.h"

namespace nimble::vm {

namespace {

std::string PayloadType(const DataType& dtype, std::span<const int64_t> shape) {
  return "Tensor[" + ShapeToString(shape) + ", " + dtype.name() + "]";
}

// One node of the tree, as the walk finds it.
struct Node {
  const ADTNode* adt = nullptr;
  std::vector<size_t> children;  // indices into the walk's nodes
  int64_t height = 0;
  size_t post_order = 0;
};

// Every payload the layout lists for `adt`'s tag is one of its tensor
// fields: the tables have a row for each node of the tag. (Its tensor fields
// are checked against the layout as the walk reads them.)
void CheckHasPayloads(const ADTNode& adt, const TreeScheduleLayout& layout) {
  for (const TreeScheduleLayout::Payload& payload : layout.payloads) {
    if (payload.tag != adt.tag()) continue;
    const auto field = static_cast<size_t>(payload.field);
    if (field < adt.size() && dynamic_cast<const TensorNode*>(adt.fields()[field].get())) continue;
    throw Error("tree_schedule: node with tag " + std::to_string(adt.tag()) +
                " has no tensor field " + std::to_string(field) + " (it has " +
                std::to_string(adt.size()) + " fields), but the layout expects " +
                PayloadType(payload.dtype, payload.shape) + " there");
  }
}

}  // namespace

std::vector<int64_t> EncodeTreeScheduleLayout(const TreeScheduleLayout& layout) {
  std::vector<int64_t> encoded;
  for (const TreeScheduleLayout::Payload& payload : layout.payloads) {
    encoded.insert(encoded.end(),
                   {payload.tag, payload.field, static_cast<int64_t>(payload.dtype.code()),
                    payload.dtype.bits(), static_cast<int64_t>(payload.shape.size())});
    encoded.insert(encoded.end(), payload.shape.begin(), payload.shape.end());
  }
  return encoded;
}

TreeScheduleLayout DecodeTreeScheduleLayout(int64_t max_children,
                                            std::span<const int64_t> encoded) {
  // Bounded like the ids in the children table, which are int32s.
  if (max_children < 0 || max_children > INT32_MAX) {
    throw Error("tree_schedule: max_children must be in [0, 2^31), got " +
                std::to_string(max_children));
  }
  TreeScheduleLayout layout{.max_children = max_children, .payloads = {}};
  size_t at = 0;
  const auto next = [&](const char* what) {
    if (at >= encoded.size()) {
      throw Error(std::string("tree_schedule: the layout ends before a payload's ") + what);
    }
    return encoded[at++];
  };
  while (at < encoded.size()) {
    TreeScheduleLayout::Payload payload;
    const int64_t tag = next("tag");
    const int64_t field = next("field");
    const int64_t code = next("dtype code");
    const int64_t bits = next("dtype bits");
    const int64_t rank = next("rank");
    if (tag < 0 || tag > INT32_MAX || field < 0 || field > INT32_MAX) {
      throw Error("tree_schedule: a payload's tag and field must be non-negative int32s, got " +
                  std::to_string(tag) + " and " + std::to_string(field));
    }
    // Only the dtypes that have a name (no float8, no 32-bit bool).
    const bool in_range = code >= 0 && code <= static_cast<int64_t>(DataType::Code::kBFloat) &&
                          bits > 0 && bits <= 64;
    const DataType dtype =
        in_range ? DataType(static_cast<DataType::Code>(code), static_cast<uint8_t>(bits))
                 : DataType();
    DataType known;
    if (!in_range || !DataType::TryParse(dtype.name(), &known) || known != dtype) {
      throw Error("tree_schedule: a payload's dtype (code " + std::to_string(code) + ", " +
                  std::to_string(bits) + " bits) is not one");
    }
    if (rank < 0 || rank > kMaxRank) {
      throw Error("tree_schedule: a payload's rank " + std::to_string(rank) + " is out of range");
    }
    payload.tag = static_cast<int32_t>(tag);
    payload.field = static_cast<int32_t>(field);
    payload.dtype = dtype;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t dim = next("dimension");
      if (dim < 0) throw Error("tree_schedule: a payload's dimension is negative");
      payload.shape.push_back(dim);
    }
    for (const TreeScheduleLayout::Payload& other : layout.payloads) {
      if (other.tag == payload.tag && other.field == payload.field) {
        throw Error("tree_schedule: tag " + std::to_string(tag) + " field " +
                    std::to_string(field) + " is in the layout twice");
      }
    }
    layout.payloads.push_back(std::move(payload));
  }
  return layout;
}

Ref<Object> ScheduleTree(const Ref<Object>& tree, const TreeScheduleLayout& layout) {
  const auto* root = dynamic_cast<const ADTNode*>(tree.get());
  if (!root) throw Error("tree_schedule: the tree is not an ADT value");
  // Which payload table each (tag, field) fills.
  const auto payload_of = [&](int32_t tag, size_t field) -> int {
    for (size_t p = 0; p < layout.payloads.size(); ++p) {
      if (layout.payloads[p].tag == tag && static_cast<size_t>(layout.payloads[p].field) == field) {
        return static_cast<int>(p);
      }
    }
    return -1;
  };

  // Post-order walk with an explicit stack: a node is finished once all its
  // children are.
  std::vector<Node> nodes;
  std::unordered_map<const ADTNode*, size_t> index;
  std::vector<std::pair<size_t, size_t>> stack;  // (node, next field to visit)
  const auto visit = [&](const ADTNode* adt) {
    const auto [it, inserted] = index.try_emplace(adt, nodes.size());
    if (inserted) {
      nodes.push_back(Node{.adt = adt, .children = {}, .height = 0, .post_order = 0});
      stack.emplace_back(it->second, 0);
    }
    return it->second;
  };
  visit(root);
  size_t finished = 0;
  while (!stack.empty()) {
    const size_t current = stack.back().first;
    const size_t at = stack.back().second;
    const ADTNode& adt = *nodes[current].adt;
    if (at == adt.size()) {
      CheckHasPayloads(adt, layout);
      Node& node = nodes[current];
      for (const size_t child : node.children) {
        node.height = std::max(node.height, nodes[child].height + 1);
      }
      node.post_order = finished++;
      stack.pop_back();
      continue;
    }
    ++stack.back().second;
    const Object* value = adt.fields()[at].get();
    const std::string where = "tree_schedule: node with tag " + std::to_string(adt.tag()) +
                              " has field " + std::to_string(at);
    if (const auto* child = dynamic_cast<const ADTNode*>(value)) {
      if (static_cast<int64_t>(nodes[current].children.size()) == layout.max_children) {
        throw Error(where + " beyond the layout's " + std::to_string(layout.max_children) +
                    " children");
      }
      const size_t id = visit(child);  // may grow `nodes`: index it afresh
      nodes[current].children.push_back(id);
      continue;
    }
    const auto* tensor = dynamic_cast<const TensorNode*>(value);
    if (!tensor) throw Error(where + " that is neither a tensor nor an ADT value");
    const int p = payload_of(adt.tag(), at);
    if (p < 0) {
      throw Error(where + " of type " + tensor->TypeString() +
                  ", which the layout has no table for");
    }
    const TreeScheduleLayout::Payload& payload = layout.payloads[p];
    if (tensor->dtype() != payload.dtype || tensor->shape() != payload.shape) {
      throw Error(where + " of type " + tensor->TypeString() + ", but the layout expects " +
                  PayloadType(payload.dtype, payload.shape));
    }
  }
  std::vector<size_t> order(nodes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Node& x = nodes[a];
    const Node& y = nodes[b];
    if (x.height != y.height) return x.height < y.height;
    if (x.adt->tag() != y.adt->tag()) return x.adt->tag() < y.adt->tag();
    return x.post_order < y.post_order;
  });
  std::vector<int32_t> id(nodes.size());
  for (size_t k = 0; k < order.size(); ++k) id[order[k]] = static_cast<int32_t>(k);

  const int64_t count = static_cast<int64_t>(nodes.size());
  std::vector<int32_t> groups;
  std::vector<int32_t> children(static_cast<size_t>(count * layout.max_children), -1);
  std::unordered_map<int32_t, int32_t> seen_of_tag;
  std::vector<std::vector<const Node*>> payload_nodes(layout.payloads.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const Node& node = nodes[order[k]];
    const int32_t tag = node.adt->tag();
    int32_t& seen = seen_of_tag[tag];
    const bool starts_group = k == 0 || nodes[order[k - 1]].height != node.height ||
                              nodes[order[k - 1]].adt->tag() != tag;
    if (starts_group) groups.insert(groups.end(), {tag, static_cast<int32_t>(k), 0, seen});
    ++groups[groups.size() - 2];
    ++seen;
    for (size_t c = 0; c < node.children.size(); ++c) {
      children[k * static_cast<size_t>(layout.max_children) + c] = id[node.children[c]];
    }
    for (size_t p = 0; p < layout.payloads.size(); ++p) {
      if (layout.payloads[p].tag == tag) payload_nodes[p].push_back(&node);
    }
  }

  std::vector<Ref<Object>> fields{
      TensorNode::FromVector<int32_t>({static_cast<int64_t>(groups.size() / 4), 4},
                                      DataType::Int32(), groups),
      TensorNode::FromVector<int32_t>({count, layout.max_children}, DataType::Int32(), children)};
  for (size_t p = 0; p < layout.payloads.size(); ++p) {
    const TreeScheduleLayout::Payload& payload = layout.payloads[p];
    Shape shape{static_cast<int64_t>(payload_nodes[p].size())};
    for (const int64_t dim : payload.shape) shape.push_back(dim);
    Tensor table = TensorNode::Empty(shape, payload.dtype);
    const size_t row_bytes = static_cast<size_t>(ShapeBytes(payload.shape, payload.dtype));
    auto* out = static_cast<char*>(table->raw_data());
    for (size_t r = 0; r < payload_nodes[p].size(); ++r) {
      const auto& value = static_cast<const TensorNode&>(
          *payload_nodes[p][r]->adt->fields()[static_cast<size_t>(payload.field)]);
      // Device placement may have left a payload on the accelerator; the
      // tables are host values, like every instruction's result.
      if (value.device().type == DeviceType::kCPU) {
        std::memcpy(out + r * row_bytes, value.raw_data(), row_bytes);
      } else {
        DeviceAPI::Get(value.device())
            ->Copy(out + r * row_bytes, Device{DeviceType::kCPU, 0}, value.raw_data(),
                   value.device(), row_bytes);
      }
    }
    fields.push_back(std::move(table));
  }
  return MakeTuple(std::move(fields));
}

}  // namespace nimble::vm
