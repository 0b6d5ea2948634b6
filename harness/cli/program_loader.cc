#include "harness/cli/program_loader.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "harness/cli/dim_bounds.h"
#include "nimble/compiler/ir/bind_params.h"
#if NIMBLE_HAVE_ONNX
#include "nimble/compiler/onnx/onnx_import.h"
#endif
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"
#include "nimble/vm/npy.h"

namespace nimble::cli {

namespace {

std::string ReadTextFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// Whether `text` starts with "<digits>:<digits>:".
bool StartsWithLineColumn(const std::string& text) {
  size_t i = 0;
  for (int field = 0; field < 2; ++field) {
    const size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == start || i >= text.size() || text[i] != ':') return false;
    ++i;
  }
  return true;
}

}  // namespace

std::string LocateInFile(const std::string& message, const std::string& file) {
  return StartsWithLineColumn(message) ? file + ":" + message : message;
}

ir::IRModule LoadProgram(const std::string& program_path, const std::string& params_path,
                         const std::string& entry, const std::vector<std::string>& dim_bounds) {
  const std::map<std::string, int64_t> bounds = ParseDimBounds(dim_bounds);
  if (program_path.ends_with(".onnx")) {
    if (!params_path.empty()) throw Error(params_path + ": an ONNX model carries its weights");
#if NIMBLE_HAVE_ONNX
    return onnx_import::ImportOnnxFile(program_path, {.dim_bounds = bounds});
#else
    throw Error(program_path + ": ONNX import is not in this build (libonnx-dev, libprotobuf-dev)");
#endif
  }
  if (!bounds.empty()) {
    throw Error(program_path +
                ": --dim-bound applies to ONNX models (a program's text writes `?<=N` itself)");
  }
  text::ParamMap params;
  if (!params_path.empty()) {
    for (auto& [name, tensor] : ReadNpz(params_path)) params[name] = std::move(tensor);
  }
  ir::IRModule module = text::ParseModule(ReadTextFile(program_path), program_path, &params);
  if (ir::Function function = module->Lookup(entry)) {
    try {
      module->Add(module->GetGlobalVar(entry), ir::BindParamsByName(function, params));
    } catch (const Error& error) {
      throw Error(params_path + ": " + error.what());
    }
  }
  try {
    typing::InferTypes(module);
  } catch (const Error& error) {
    throw Error(LocateInFile(error.what(), program_path));
  }
  return module;
}

}  // namespace nimble::cli
