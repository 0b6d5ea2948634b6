// The Relay text format parser (version 0.0.5; syntax in docs/text-format.md).
// It reads whole programs (type definitions and global functions, in any
// order, recursion included) and single expressions or types for tests and
// tools. Names resolve to the nodes bound in scope, so `%x` means the
// innermost binding of x, and a TVM graph binding `%0 = e;` makes every later
// `%0` the same node: DAG sharing survives printing and parsing. Operator
// calls go through op::MakeOpCall, so their attributes come out normalised.
//
// Every node the parser creates carries its source span. Errors throw
// nimble::Error "source_name:line:col: message", where the message says what
// was expected and what was found, or names the undefined variable, unknown
// operator, constructor, type or constant, the bad attribute or the wrong
// argument count.
#pragma once

#include <map>
#include <string>

#include "nimble/compiler/ir/module.h"
#include "nimble/vm/tensor.h"

namespace nimble::text {

// Named tensors: the values of `meta[relay.Constant][name]` (a params file).
using ParamMap = std::map<std::string, Tensor>;

// Parses a program. `params` gives the non-scalar constants it mentions; a
// constant absent from it (or any constant, when it is null) is an error.
ir::IRModule ParseModule(const std::string& text, const std::string& source_name,
                         const ParamMap* params = nullptr);

// Parses one expression (with its lets and graph bindings). Globals,
// constructors and types resolve in `module`; when null, an empty module.
ir::Expr ParseExpr(const std::string& text, const std::string& source_name = "<expr>",
                   ir::IRModule module = nullptr);

// Parses a type such as "Tensor[(?, 2), float32]" or "fn [A](A) -> A".
ir::Type ParseType(const std::string& text);

}  // namespace nimble::text
