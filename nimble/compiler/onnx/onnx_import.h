// ONNX import: a model exported from PyTorch (an ONNX ModelProto, read with
// Debian's onnx and protobuf libraries) as a Nimble program.
//
// @main takes the graph's inputs that are not initialisers, in order, typed
// from the model: a dimension with a value is static, one with a name
// (`batch`, `sequence`) or none is `?` (`?<=N` with a bound in
// ImportOptions). Initialisers become named constants
// (`meta[relay.Constant][name]` when printed; their names made
// identifiers). Each node becomes calls of Nimble operators
// (onnx_converters.h); a value that only depends on what is known at import
// time (initialisers, constants, the shapes of static tensors) is computed
// there, so that PyTorch's shape arithmetic on `Shape` outputs folds away
// where shapes are static and stays as run-time shape computation where
// they are `?`. Recurrent layers (LSTM, GRU) become tail-recursive global
// functions over the sequence. @main returns the graph's outputs (a tuple
// when several).
//
// Opsets 11 to 21 of the default domain are accepted. Anything else is an
// error that names the cause: a file that is not a model, a graph that
// refers to a tensor nothing defines, a cycle, an operator, attribute or
// input form outside what the converters handle (naming the node, its op
// type and why).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "nimble/compiler/ir/module.h"

namespace nimble::onnx_import {

inline constexpr int64_t kMinOpset = 11;
inline constexpr int64_t kMaxOpset = 21;

struct ImportOptions {
  // Upper bounds of named input dimensions (an ONNX dim_param such as
  // "sequence" to 512): such a dimension is typed `?<=N` instead of `?`, so
  // that memory planning sizes the model's storage once, for the bound, and
  // the VM refuses a larger input. A name that no input dimension has is an
  // error that lists the names there are.
  std::map<std::string, int64_t> dim_bounds;
};

// Parses the ModelProto in `bytes`; `source_name` names it in errors.
ir::IRModule ImportOnnx(const std::string& bytes, const std::string& source_name,
                        const ImportOptions& options = {});

// Reads and imports the file at `path`.
ir::IRModule ImportOnnxFile(const std::string& path, const ImportOptions& options = {});

}  // namespace nimble::onnx_import
