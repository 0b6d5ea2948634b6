// Test programs too large to keep as files, generated here so that the
// evaluator's tests and the differential test (evaluator vs. VM) run the same
// ones: long chains that check nothing recurses once per binding, wide sharing
// that checks shared nodes are evaluated once, and a recursive let-bound
// closure, which the text format cannot write.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/expr.h"
#include "nimble/compiler/ir/module.h"
#include "nimble/compiler/op/op.h"
#include "nimble/vm/dtype.h"

namespace nimble::test {

// @main(%x: float64) doubling %x `count` times through graph bindings that
// each use the previous one twice: evaluated once per path rather than once
// per node, it would take 2^count adds. Returns 2^count * x.
inline std::string SharedDoublingProgram(int count) {
  std::string program = "def @main(%x: Tensor[(), float64]) {\n  %0 = add(%x, %x);\n";
  for (int i = 1; i < count; ++i) {
    program += "  %" + std::to_string(i) + " = add(%" + std::to_string(i - 1) + ", %" +
               std::to_string(i - 1) + ");\n";
  }
  program += "  %" + std::to_string(count - 1) + "\n}\n";
  return program;
}

// @main(%x: float32) adding 1 `depth` times through a chain of graph bindings.
inline std::string GraphBindingChainProgram(int depth) {
  std::string program = "def @main(%x: Tensor[(), float32]) {\n  %0 = add(%x, 1f);\n";
  for (int i = 1; i < depth; ++i) {
    program += "  %" + std::to_string(i) + " = add(%" + std::to_string(i - 1) + ", 1f);\n";
  }
  program += "  %" + std::to_string(depth - 1) + "\n}\n";
  return program;
}

// @main(%x: float32) computing (depth + 1) * x through `depth` nested lets.
inline std::string LetChainProgram(int depth) {
  std::string program = "def @main(%x: Tensor[(), float32]) {\n  let %v0 = %x;\n";
  for (int i = 1; i <= depth; ++i) {
    program += "  let %v" + std::to_string(i) + " = add(%v" + std::to_string(i - 1) + ", %x);\n";
  }
  program += "  %v" + std::to_string(depth) + "\n}\n";
  return program;
}

// @main(%n: int32) returning 2^n through a let-bound closure that calls
// itself (built in memory, since the text format has no recursive let):
//   let %loop = fn (%i, %acc) { if (%i < %n) %loop(%i + 1, %acc * 2) else %acc };
//   %loop(0, 1)
inline ir::IRModule RecursiveLetClosureModule() {
  ir::IRModule module = ir::MakeModule();
  const ir::Type scalar_i32 = ir::MakeTensorType({}, DataType::Int32());
  ir::Var n = ir::MakeVar("n", scalar_i32);
  ir::Var loop = ir::MakeVar("loop");
  ir::Var i = ir::MakeVar("i");
  ir::Var acc = ir::MakeVar("acc");
  auto call = [](ir::Expr callee, std::vector<ir::Expr> args) {
    return Make<ir::CallNode>(std::move(callee), std::move(args));
  };
  ir::Expr body = Make<ir::IfNode>(
      op::MakeOpCall("less", {i, n}),
      call(loop, {op::MakeOpCall("add", {i, ir::MakeScalar(DataType::Int32(), 1)}),
                  op::MakeOpCall("multiply", {acc, ir::MakeScalar(DataType::Int32(), 2)})}),
      acc);
  ir::Expr function = Make<ir::FunctionNode>(std::vector<ir::Var>{i, acc}, body, nullptr,
                                             std::vector<ir::TypeVar>{});
  ir::Expr main_body = Make<ir::LetNode>(
      loop, function,
      call(loop, {ir::MakeScalar(DataType::Int32(), 0), ir::MakeScalar(DataType::Int32(), 1)}));
  module->Add(module->GetGlobalVar("main"),
              Make<ir::FunctionNode>(std::vector<ir::Var>{n}, main_body, nullptr,
                                     std::vector<ir::TypeVar>{}));
  return module;
}

}  // namespace nimble::test
