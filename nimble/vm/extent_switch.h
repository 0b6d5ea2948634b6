// A kernel that chooses between two others by a size at run time: `below`
// while dimension `axis` of argument `arg` is under `extent`, `from` once it
// reaches it. A matrix product at a `?` site runs the generated kernel on
// short sequences and a library's on long ones, where the library is faster
// but its per-shape set-up and fixed costs would lose on short ones
// (backend/kernel_tuning.h measures where each wins).
//
// In an executable it is the primitive kExtentSwitch with integer attributes
// "below" and "from" (indices of two other primitives, which take the same
// arguments), "arg", "axis" and "extent".
#pragma once

#include <vector>

#include "nimble/vm/attrs.h"
#include "nimble/vm/kernel.h"

namespace nimble::vm {

inline constexpr const char* kExtentSwitch = "vm.extent_switch";

// The switch `attrs` describe, over `kernels` (bound by primitive index; a
// switch's own entries are not yet bound and may not be chosen). Throws
// nimble::Error naming the attribute that is missing or out of range.
Kernel BindExtentSwitch(const Attrs& attrs, const std::vector<Kernel>& kernels,
                        const std::vector<bool>& is_switch);

}  // namespace nimble::vm
