// ONNX control flow as Nimble compiles control flow (paper §3): `If` becomes
// a Relay `if` over its two branch graphs, and `Loop` and `Scan` a
// tail-recursive global function over the body graph, so that the VM runs
// it with tail calls and planned memory.
//
// A branch or body reads values of the graphs around it by name: those not
// known at import time become variables (let-bound around an `if`, extra
// parameters of a loop's function), known ones stay constants so that what
// depends on them still folds. A loop-carried value whose shape changes
// between iterations is typed with `?` in that dimension (found by
// importing the body until its types are a fixed point), and branches of
// different shapes join to `?`; the VM checks the shapes at run time. Scan
// outputs are concatenated along a new axis of `?` length; a Scan reads its
// inputs one slice an iteration, in either direction.
#pragma once

#include <vector>

#include "nimble/compiler/onnx/onnx_converters.h"

namespace nimble::onnx_import {

// The node's outputs, in order; errors name the node and the branch or body.
std::vector<Value> ConvertIf(const NodeContext& context);
std::vector<Value> ConvertLoop(const NodeContext& context);
std::vector<Value> ConvertScan(const NodeContext& context);

}  // namespace nimble::onnx_import
