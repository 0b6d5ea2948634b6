// Loading a program for `nimble check` and `nimble run`: the text is parsed,
// its params file bound in, and its types inferred. Errors come out located
// in the program file ("prog.relay:3:5: message").
#pragma once

#include <string>
#include <vector>

#include "nimble/compiler/ir/module.h"

namespace nimble::cli {

// Reads and parses `program_path`; a `.onnx` file is imported instead
// (nimble/compiler/onnx/onnx_import.h), its weights inside it. The tensors of `params_path` (an
// .npz; no file when empty) are (a) the values of `meta[relay.Constant][name]` in the text and (b)
// bound into the parameters of the global `entry` that share their names, which thereby stop being
// parameters. Then infers types.
// `dim_bounds` ("NAME=N", from --dim-bound) bound an ONNX model's named
// input dimensions (onnx_import::ImportOptions); they are an error for a
// program, whose text writes `?<=N` itself.
ir::IRModule LoadProgram(const std::string& program_path, const std::string& params_path,
                         const std::string& entry, const std::vector<std::string>& dim_bounds = {});

// Prefixes `message` with the file when it starts with a bare "line:col:", as
// errors of type inference and evaluation do.
std::string LocateInFile(const std::string& message, const std::string& file);

}  // namespace nimble::cli
