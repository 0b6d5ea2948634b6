// Merging a GPU kernel's consecutive thread loops. Lowering gives each stage
// of a fused primitive a gpu_threads loop of its own, and each loop is a
// launch: an LSTM cell's four elementwise stages were four launches per
// token, each a few microseconds of a GPU that waits on the host. Where the
// next loop has the same extent and reads what the loops before it wrote
// only at its own iteration (thread i reads element i, which thread i
// wrote), the two run as one loop, a thread doing both iterations in order.
#pragma once

#include "nimble/compiler/tir/stmt.h"

namespace nimble::tir {

// `stmt` with each run of consecutive kGpuThreads loops that may share their
// threads merged into one loop. Merging needs equal extents; each buffer the
// earlier loops store to stored and read later only at the loop variable;
// and no buffer the earlier loops touch stored by the later one.
Stmt MergeGpuThreadLoops(const Stmt& stmt);

}  // namespace nimble::tir
