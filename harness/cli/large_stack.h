// Running a command on a stack deep enough for deeply nested programs.
#pragma once

#include <cstddef>
#include <functional>

namespace nimble::cli {

// The stack the `nimble` command runs on: the compiler's passes and the
// evaluator recurse along an expression's nesting, which a program's graph
// bindings make as deep as its chain of bindings (100,000 chained `negative`s
// overflowed the main thread's 8 MiB in a pass that visits the program).
// Reserved address space, touched only as deep as a program needs.
inline constexpr size_t kCommandStackBytes = size_t{1} << 30;

// `fn`'s result, run on a thread of its own with a stack of `bytes`, its
// exception rethrown here. Runs it on the calling thread where no such
// thread can be made (an address-space limit below `bytes`).
int RunWithStack(size_t bytes, const std::function<int()>& fn);

}  // namespace nimble::cli
