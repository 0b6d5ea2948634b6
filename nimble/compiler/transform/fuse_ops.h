// Operator fusion: turns the operator calls of a program into primitive
// functions (`Primitive=1` function literals in callee position,
// docs/memory-dialect.md §1), the unit memory manifestation allocates for and
// the VM calls as one kernel. Fusing neighbouring ops into one primitive saves
// the intermediate tensors and their allocations, and the kernel launches.
//
// Groups form as in TVM's FuseOps (post-dominator tree and three phases, by
// OpDef::pattern), within one straight-line `let` chain: a function body, an
// `if` branch or a `match` clause. An out-elementwise-fusable op (nn.dense)
// takes its elementwise/broadcast epilogue; elementwise and broadcast ops fuse
// into the injective, reduction or anchored group that post-dominates them;
// injective ops fuse into injective consumers once the anchors are done. A
// group has at most one anchor (one nn.dense-like op or one reduction, which
// the code generator composes one per kernel) and at most `max_group_ops`
// ops. Its other ops' values may be used outside it only after its last op:
// the primitive then returns them too, after the last op's value, so that an
// LSTM cell is one kernel returning both h' and c'. Ops that keep a group of
// their own: opaque ones, data-dependent and upper-bound shape functions
// (whose shape function would have to read a fused intermediate), and ops
// with tuple arguments or results (concatenate, split; SliceSplits turns a
// split's fields into slices first).
#pragma once

#include <functional>

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

struct FuseOptions {
  // Off: every operator call gets a primitive of its own.
  bool enabled = true;
  // The most ops one primitive may hold; 1 also disables fusion.
  int max_group_ops = 256;
  // Calls for which it returns false keep a primitive of their own (null:
  // every call may fuse). The compiler passes what code generation supports,
  // since only a generated kernel can run a fused primitive.
  std::function<bool(const ir::CallNode&)> fusible = nullptr;
  // On: an nn.dense-like op's group also takes the injective ops on the way
  // to its post-dominator and what they feed (an LSTM cell, which slices its
  // gates out of the product), as TVM does not, and an injective op whose
  // post-dominator is in such a group (the LSTM step's take of its input
  // row). The code generator writes
  // the product where its readers find it whatever their indices (on the GPU
  // it may compute it inside them: te/lower.h), so the cell costs no kernel
  // of its own; but a product fused so is no single-op primitive that
  // measurement could give a library kernel, so only where products are
  // generated anyway.
  bool anchors_take_injective = false;
};

// Expects a type-checked module in A-normal form after lambda lifting;
// returns a new one, type-checked again. A primitive of one op has one
// parameter per argument of the call; a fused primitive has one per distinct
// input of the group (scalar constants stay in its body), a body that binds
// the group's ops in order, and the attribute `Fused="nn.dense+add+tanh"`
// naming them; one that also returns other ops' values ends in a tuple of
// them, bound after the call by `let`s of its fields. The memory dialect's ops and the calls the VM
// runs as instructions (op::RunsAsVMInstruction: shape_of, scalar control arithmetic) stay as they
// are, and so do primitive functions, so a second run changes nothing. Throws nimble::Error for a
// module without types or max_group_ops < 1.
ir::IRModule FuseOps(const ir::IRModule& module, const FuseOptions& options = {});

}  // namespace nimble::transform
