// The schedule of a tree value that a batched recursive function runs by
// (transform/tree_batching.h): the tree's nodes grouped so that each group's
// nodes depend only on earlier groups, with what each node reads. Computed at
// run time, by the TreeSchedule instruction (and the reference evaluator), as
// one walk over the tree: the compiler cannot know a tree's shape.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "nimble/vm/dtype.h"
#include "nimble/vm/object.h"
#include "nimble/vm/shape.h"

namespace nimble::vm {

// What the tree's nodes hold: fields that are ADT values are children (at
// most `max_children` a node); each tensor field must be one of `payloads`,
// by the node's tag and the field's index, of exactly that dtype and shape.
struct TreeScheduleLayout {
  struct Payload {
    int32_t tag = 0;
    int32_t field = 0;
    DataType dtype;
    Shape shape;
    bool operator==(const Payload&) const = default;
  };
  int64_t max_children = 0;
  std::vector<Payload> payloads;
  bool operator==(const TreeScheduleLayout&) const = default;
};

// The layout as the instruction's list of integers (bytecode.h): per payload
// its tag, field, dtype code, dtype bits, rank and dims.
std::vector<int64_t> EncodeTreeScheduleLayout(const TreeScheduleLayout& layout);
// Its inverse; throws nimble::Error naming what is malformed.
TreeScheduleLayout DecodeTreeScheduleLayout(int64_t max_children, std::span<const int64_t> encoded);

// The schedule of `tree` as a tuple of tensors, all int32 but the payloads:
// the nodes (distinct ADT objects: a shared subtree is one node) are numbered
// by (height, tag, post-order), a leaf's height 0 and a node's one more than
// its highest child's, so children come before parents and the root is last.
//   0: groups (G, 4): per run of equal (height, tag), in order: the tag, the
//      first node, the count, and the index of the first node among the
//      nodes of its tag (its row in that tag's payload tables);
//   1: children (N, max_children): each node's children, in field order,
//      padded with -1;
//   2...: per layout payload, the payloads of its tag's nodes stacked in
//      node order, (nodes of the tag, *shape).
// Every tensor is new and on the CPU (payloads are copied from wherever they
// are). Walks without recursion (a chain of 100,000 nodes is fine). Throws
// nimble::Error "tree_schedule: ..." for a node the layout does not allow: a
// field neither a tensor nor an ADT value, a tensor field the layout has no
// table for or of another dtype or shape, a payload of the layout missing,
// more than max_children children.
Ref<Object> ScheduleTree(const Ref<Object>& tree, const TreeScheduleLayout& layout);

}  // namespace nimble::vm
