// The Relay text format printer (version 0.0.5; syntax in docs/text-format.md).
// Its output parses back (text/parser.h) into the same program, and printing
// that again gives the same text:
//   - distinct variables get distinct names (`%x`, `%x1`), whatever their hints;
//   - an expression used more than once (other than a variable, global,
//     operator, constructor or constant) is printed once, as a graph binding
//     `%0 = ...;` in the innermost block that encloses all its uses, before
//     the first of them, so DAG sharing survives the round trip;
//   - scalar constants print inline (`1f`, `2i64`, `True`); other constants as
//     `meta[relay.Constant][name]`, an unnamed one getting a fresh `cN`.
// Nested blocks indent two spaces per level, lets one per line; the output is
// deterministic.
#pragma once

#include <string>

#include "nimble/compiler/ir/module.h"
#include "nimble/compiler/text/parser.h"

namespace nimble::text {

struct PrintOptions {
  // Print the types inference found (parameters, let binders, return types),
  // falling back to the annotations; this is how `nimble check` shows a
  // typed program.
  bool show_types = false;
  // When given, receives every constant printed as `meta[relay.Constant][name]`,
  // so that it and the text make a program and its params file.
  ParamMap* constants_out = nullptr;
};

// The module with its version header, type definitions and functions; ends
// with a newline.
std::string PrintModule(const ir::IRModule& module, const PrintOptions& options = {});

// One expression, its lets one per line (no header, no final newline).
std::string PrintExpr(const ir::Expr& expr, const PrintOptions& options = {});

}  // namespace nimble::text
