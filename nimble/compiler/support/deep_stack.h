// Runs compiler work on a thread with a large stack. The IR is a tree that
// programs make deep (an LSTM unrolled to 10,000 `let`s, a 10,000-deep nested
// call), and every pass, the parser, the printer and the evaluator recurse over
// it; rather than bend each of them into an explicit-stack form, entry points
// run their body through RunWithDeepStack. Reentrant: nested calls run inline.
#pragma once

#include <exception>
#include <functional>
#include <optional>
#include <type_traits>

namespace nimble {

// Runs `body` to completion on a thread whose stack has `kDeepStackBytes`
// (reserved, committed only as touched); rethrows what it throws.
void RunOnDeepStack(const std::function<void()>& body);

inline constexpr size_t kDeepStackBytes = size_t{1} << 30;

// Whether the deep stack this runs on has less than kDeepStackReserve left:
// a recursion that goes on (a program's unbounded recursion, run by the
// evaluator) checks it to fail with an error instead of overflowing the
// stack. False off the deep stack.
bool DeepStackNearlyFull();

inline constexpr size_t kDeepStackReserve = size_t{32} << 20;

template <typename F>
auto RunWithDeepStack(F&& body) -> std::invoke_result_t<F> {
  using R = std::invoke_result_t<F>;
  if constexpr (std::is_void_v<R>) {
    RunOnDeepStack([&] { body(); });
  } else {
    std::optional<R> result;
    RunOnDeepStack([&] { result.emplace(body()); });
    return std::move(*result);
  }
}

}  // namespace nimble
