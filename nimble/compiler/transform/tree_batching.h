// Batches the independent calls of a recursive function over a tree
// [Cortex, MLSys'21; ACRoBat, MLSys'24; DyNet's autobatching]. A Tree-LSTM
// written as `match (%tree) { Leaf(..) => .., Node(%l, %r) => f(@state(%l),
// @state(%r)) }` runs one matrix-vector product per node, each reading the
// whole weight; the nodes of one height do not depend on each other, so they
// can share one matrix product over their rows.
//
// A function qualifies when its body is a complete `match` on its first
// parameter, of a monomorphic ADT whose constructor fields are that ADT or
// statically shaped tensors; each constructor has one clause binding its
// fields to variables; every tree field is passed to a recursive call whose
// other arguments are the function's own parameters, unchanged (calls whose
// arguments depend on another call's result are not independent: such a
// function is left alone); the result is a static tensor or a tuple of them;
// and the clauses compute it with row-wise operators only (elementwise and
// broadcasting ones, nn.dense on a fixed weight, split, concatenate,
// expand_dims, squeeze, take, softmax, bias_add and reductions along an
// axis). Its body becomes: adt.tree_schedule of the tree (the nodes grouped
// by height and constructor, docs/codegen.md), then a tail-recursive loop
// over the groups that runs the group's clause once over all its nodes
// (every value gets a leading batch axis: children's results are gathered
// from tables of the finished nodes' results, payloads from the schedule)
// and appends the rows to the tables; the root's row is the result. The
// function keeps its name and type, so callers are unchanged. The pipeline
// runs it only under CompileOptions::batch_trees (--batch-trees): at batch 1
// on SST's deep trees a group averages under two nodes, too few to pay for
// its bookkeeping (docs/codegen.md).
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module; returns it with every qualifying function
// batched as above, type-checked again (the same module when none
// qualifies). The loop of function @f is the new global @f_batched_groups.
ir::IRModule BatchTreeRecursion(const ir::IRModule& module);

}  // namespace nimble::transform
