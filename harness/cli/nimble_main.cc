// The `nimble` command line:
//   nimble check PROG.relay [--params W.npz]
//   nimble compile PROG.relay [--params W.npz] [--target intel|arm|nvidia] [--function f ...]
//                  -o PROG.nimble
//   nimble run PROG.relay|PROG.nimble [--params W.npz] [--input a.npy ...] [--out DIR]
//              [--function main] [--engine ref|vm] [--profile]
//   nimble random -o OUT --seed N --tensor NAME:SHAPE[:DTYPE] ...
//   nimble dump EXE.nimble [--bytecode] [--constants]
//   nimble dump PROG.relay [--params W.npz] --ir-after PASS
//   nimble dump PROG.relay [--params W.npz] --tir KERNEL|all [--target T] [--generated]
//   nimble export-model lstm|treelstm|bert -o PROG.relay --params W.npz [--layers N]
//                       [--seed S] [--weights IN.npz]
//   nimble import MODEL.onnx -o PROG.relay --params W.npz   (run, check, compile also take .onnx)
// Exit status: 0 on success, 1 on a user error (one line "error: ..." on
// stderr), 2 on bad usage (CLI11's message).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/cli/program_loader.h"
#include "harness/cli/random_tensors.h"
#include "harness/cli/result_output.h"
#include "models/bert/bert.h"
#include "models/lstm/lstm.h"
#include "models/model.h"
#include "models/treelstm/treelstm.h"
#include "nimble/compiler/backend/kernel_tuning.h"
#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/backend/vm_compiler.h"
#include "nimble/compiler/eval/evaluator.h"
#include "nimble/compiler/text/printer.h"
#include "nimble/compiler/tir/printer.h"
#include "nimble/compiler/transform/allocation_stats.h"
#include "nimble/vm/error.h"
#include "nimble/vm/executable.h"
#include "nimble/vm/npy.h"
#include "nimble/vm/vm.h"

namespace nimble::cli {

namespace {

constexpr int kUserError = 1;
constexpr int kUsageError = 2;
// Values shown per output in the run summary.
constexpr size_t kSummaryValues = 8;

struct CheckOptions {
  std::string program;
  std::string params;
  std::vector<std::string> dim_bounds;  // an ONNX model's --dim-bound NAME=N
};

// Which kernels run the program's ops (backend::CompileOptions::kernels) and
// whether they fuse; shared by every command that compiles.
struct KernelChoice {
  std::string kernels = "auto";
  bool fusion = true;
  std::string tuning_db = backend::DefaultTuningDatabase();
  te::MatMulKnobs matmul;
  std::string precision = "fp32";
  bool batch_trees = false;
};

// `choose_kernels` off: only --no-fusion (`dump --kernels` lists kernels).
void AddKernelOptions(CLI::App* command, KernelChoice& choice, bool choose_kernels = true) {
  if (choose_kernels) {
    command
        ->add_option("--kernels", choice.kernels,
                     "Which kernels run the ops: generated (LLVM), builtin (the runtime's), "
                     "auto (generated; each nn.dense and nn.batch_matmul runs the generated, "
                     "built-in, oneDNN or OpenBLAS kernel, whichever measures fastest here), or "
                     "library (as auto, choosing between oneDNN and OpenBLAS)")
        ->check(CLI::IsMember({"auto", "generated", "builtin", "library"}))
        ->capture_default_str();
    command
        ->add_option("--tuning-db", choice.tuning_db,
                     "The SQLite file that keeps kernel measurements for later compiles "
                     "($NIMBLE_TUNING_DB, else under $XDG_CACHE_HOME or ~/.cache; '' keeps none)")
        ->capture_default_str();
    command->add_option_function<std::string>(
        "--matmul-tile",
        [&choice](const std::string& text) {
          int rows = 0, cols = 0;
          char end = 0;
          if (std::sscanf(text.c_str(), "%dx%d%c", &rows, &cols, &end) != 2) {
            throw CLI::ValidationError("--matmul-tile", "expected ROWSxCOLS, got '" + text + "'");
          }
          choice.matmul.tile_rows = rows;
          choice.matmul.tile_cols = cols;
          te::CheckMatMulKnobs(choice.matmul);
        },
        "Generated matrix products: ROWSxCOLS outputs per register tile (default 4x3)");
    command
        ->add_option("--dispatch", choice.matmul.dispatch,
                     "Generated matrix products with a symbolic row count: kernel copies by "
                     "the row count's residue (1 to 64; default: the tile's rows, full "
                     "dispatch)")
        ->check(CLI::Range(1, 64));
    command
        ->add_option("--precision", choice.precision,
                     "fp32, or bf16: constant dense weights in bfloat16 and their products in "
                     "bf16 with float32 sums (x86-64 hosts with avx512_bf16; AMX where present)")
        ->check(CLI::IsMember({"fp32", "bf16"}))
        ->capture_default_str();
    command->add_flag("--batch-trees", choice.batch_trees,
                      "Run a recursive function's independent calls on a tree in batches, the "
                      "nodes of one height at a time (off: one node at a time)");
  }
  command->add_flag("!--no-fusion", choice.fusion,
                    "Give every op a kernel of its own (no operator fusion)");
}

backend::CompileOptions WithKernels(backend::CompileOptions options, const KernelChoice& choice) {
  options.fuse_ops = choice.fusion;
  options.kernels = choice.kernels;
  options.tuning_database = choice.tuning_db;
  options.matmul = choice.matmul;
  options.precision = choice.precision;
  options.batch_trees = choice.batch_trees;
  return options;
}

struct CompileOptions {
  std::string program;
  std::string params;
  std::vector<std::string> dim_bounds;
  std::string target = "intel";
  // The functions the executable keeps (with what they call); empty: @main,
  // or every function of a module without @main.
  std::vector<std::string> functions;
  std::string out;
  KernelChoice kernels;
};

struct RunOptions {
  std::string program;
  std::string params;
  std::vector<std::string> dim_bounds;
  std::vector<std::string> inputs;
  std::string out_dir;
  std::string function = "main";
  std::string engine = "vm";
  bool profile = false;
  int warmup = 0;
  bool plan_memory = true;
  KernelChoice kernels;
};

struct RandomOptions {
  std::string out;
  uint64_t seed = 0;
  std::vector<std::string> tensors;
};

struct DumpOptions {
  std::string file;
  std::string params;
  bool bytecode = false;
  bool constants = false;
  bool allocations = false;
  bool kernel_table = false;
  std::string ir_after;
  std::string tir_kernel;
  std::string target = "intel";
  KernelChoice kernels;
};

struct ExportOptions {
  std::string model;
  std::string out;
  std::string params;
  std::optional<int> layers;   // the builder's default when absent
  std::optional<int> seq_len;  // bert: a static length instead of `?<=512`
  uint64_t seed = 1;
  std::string weights;  // load instead of seeding
};

bool IsExecutableFile(const std::string& path) {
  return std::filesystem::path(path).extension() == ".nimble";
}

void Check(const CheckOptions& options) {
  ir::IRModule module = LoadProgram(options.program, options.params, "main", options.dim_bounds);
  std::cout << text::PrintModule(module, text::PrintOptions{.show_types = true});
}

// One --input per parameter of the function run, named in the error.
void CheckInputCount(const std::string& function, const std::vector<std::string>& params,
                     size_t inputs) {
  if (params.size() == inputs) return;
  std::string names;
  for (const std::string& param : params) names += (names.empty() ? "%" : ", %") + param;
  throw Error("@" + function + " needs " + std::to_string(params.size()) +
              " --input file(s) (for " + names + "), got " + std::to_string(inputs));
}

// `function` of `module`, or an error naming the program.
ir::Function EntryOf(const ir::IRModule& module, const std::string& path,
                     const std::string& function) {
  const ir::Function entry = module->Lookup(function);
  if (!entry) throw Error(path + ": no function @" + function);
  return entry;
}

void Compile(const CompileOptions& options) {
  const ir::IRModule module =
      LoadProgram(options.program, options.params, "main", options.dim_bounds);
  try {
    backend::Compile(module, WithKernels({.target = options.target,
                                          .entry_functions = options.functions,
                                          .source_name = options.program},
                                         options.kernels))
        .SaveToFile(options.out);
  } catch (const Error& error) {
    throw Error(LocateInFile(error.what(), options.program));
  }
}

// The executable to run: loaded, or compiled in memory from a program.
vm::Executable LoadOrCompile(const RunOptions& options) {
  const std::string& path = options.program;
  if (IsExecutableFile(path)) {
    if (!options.params.empty()) {
      throw Error(path + ": --params applies to programs, not executables");
    }
    if (!options.plan_memory) throw Error(path + ": --no-memory-plan applies to programs");
    if (!options.dim_bounds.empty()) throw Error(path + ": --dim-bound applies to ONNX models");
    if (options.kernels.kernels != "auto" || !options.kernels.fusion ||
        options.kernels.tuning_db != backend::DefaultTuningDatabase() ||
        options.kernels.precision != "fp32" || options.kernels.batch_trees) {
      throw Error(path +
                  ": --kernels, --no-fusion, --tuning-db, --precision and --batch-trees apply to "
                  "programs");
    }
    return vm::Executable::LoadFromFile(path);
  }
  const ir::IRModule module =
      LoadProgram(path, options.params, options.function, options.dim_bounds);
  EntryOf(module, path, options.function);
  try {
    return backend::Compile(module, WithKernels({.entry_functions = {options.function},
                                                 .source_name = path,
                                                 .plan_memory = options.plan_memory},
                                                options.kernels));
  } catch (const Error& error) {
    throw Error(LocateInFile(error.what(), path));
  }
}

Ref<Object> RunOnVM(const RunOptions& options, const std::vector<Ref<Object>>& args) {
  vm::VirtualMachine machine(
      LoadOrCompile(options),
      vm::VMOptions{.devices = {}, .extra_kernels = {}, .profiling = options.profile});
  const vm::Executable& executable = machine.executable();
  const vm::VMFunction& entry = executable.functions[executable.FunctionIndex(options.function)];
  std::vector<std::string> params;
  for (const vm::Param& param : entry.params) params.push_back(param.name);
  if (!params.empty()) CheckInputCount(options.function, params, args.size());
  // Warm-up runs leave caches, pools and first-use set-up behind, so the
  // profile shows the steady state.
  for (int run = 0; run < options.warmup; ++run) machine.Invoke(options.function, args);
  if (options.profile) machine.profiler()->Reset();
  Ref<Object> result = machine.Invoke(options.function, args);
  if (options.profile) std::cerr << machine.profiler()->Report();
  return result;
}

Ref<Object> RunOnEvaluator(const RunOptions& options, const std::vector<Ref<Object>>& args) {
  if (IsExecutableFile(options.program)) {
    throw Error(options.program +
                ": the reference evaluator runs programs (.relay), not executables");
  }
  if (options.profile) throw Error("--profile needs --engine vm");
  if (options.warmup > 0) throw Error("--warmup needs --engine vm");
  const ir::IRModule module =
      LoadProgram(options.program, options.params, options.function, options.dim_bounds);
  std::vector<std::string> params;
  for (const ir::Var& param : EntryOf(module, options.program, options.function)->params) {
    params.push_back(param->name_hint);
  }
  CheckInputCount(options.function, params, args.size());
  try {
    return eval::Evaluate(module, options.function, args);
  } catch (const Error& error) {
    throw Error(LocateInFile(error.what(), options.program));
  }
}

void Run(const RunOptions& options) {
  std::vector<Ref<Object>> args;
  for (const std::string& input : options.inputs) args.push_back(ReadNpy(input));
  const bool use_vm = options.engine == "vm";
  const std::vector<Tensor> outputs =
      FlattenResult(use_vm ? RunOnVM(options, args) : RunOnEvaluator(options, args));
  if (!options.out_dir.empty()) std::filesystem::create_directories(options.out_dir);
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::cout << i << ": " << SummarizeTensor(outputs[i], kSummaryValues) << "\n";
    if (!options.out_dir.empty()) {
      WriteNpy((std::filesystem::path(options.out_dir) / (std::to_string(i) + ".npy")).string(),
               outputs[i]);
    }
  }
}

void Random(const RandomOptions& options) {
  std::vector<TensorSpec> specs;
  std::set<std::string> names;
  for (const std::string& text : options.tensors) {
    specs.push_back(ParseTensorSpec(text));
    if (!names.insert(specs.back().name).second) {
      throw Error("tensor '" + specs.back().name + "' is given twice");
    }
  }
  const auto tensors = RandomTensors(specs, options.seed);
  if (std::filesystem::path(options.out).extension() == ".npy") {
    if (tensors.size() != 1) {
      throw Error(options.out + ": a .npy file holds one tensor, but " +
                  std::to_string(tensors.size()) + " were given (write an .npz instead)");
    }
    WriteNpy(options.out, tensors[0].second);
  } else {
    WriteNpz(options.out, tensors);
  }
}

// The allocations a program makes as written, before and after memory
// planning: how much planning saves.
void PrintAllocations(const ir::IRModule& manifested, const ir::IRModule& planned) {
  std::cout << "stage              allocations   static bytes   sized at run time\n";
  auto row = [](const char* stage, const transform::AllocationStats& stats) {
    std::cout << std::left << std::setw(16) << stage << std::right << std::setw(14)
              << stats.allocations << std::setw(15) << stats.static_bytes << std::setw(20)
              << stats.dynamic_allocations << "\n";
  };
  row("manifested", transform::CountAllocations(manifested));
  row("planned", transform::CountAllocations(planned));
}

// The loop IR of the generated kernel or shape function named `name`, or of
// all of them for "all".
void PrintKernelLoops(const backend::PrimitiveKernels& kernels, const std::string& name) {
  bool found = false;
  for (const tir::PrimFunc& func : kernels.funcs()) {
    if (name != "all" && func.name != name) continue;
    std::cout << tir::ToString(func) << "\n";
    found = true;
  }
  if (found) return;
  std::string names;
  for (const tir::PrimFunc& func : kernels.funcs())
    names += (names.empty() ? "" : ", ") + func.name;
  throw Error("--tir: no generated kernel named '" + name + "'" +
              (names.empty() ? std::string(" (this program has none)")
                             : "; the generated kernels are " + names));
}

// An executable: the tables and the bytecode always print, since the code
// refers to the tables; `constants` adds the constants' values. A program:
// the IR after a pass of the pipeline.
void Dump(const DumpOptions& options) {
  if (options.allocations) {
    if (IsExecutableFile(options.file)) throw Error("--allocations needs a program (.relay)");
    const ir::IRModule module = LoadProgram(options.file, options.params, "main");
    const backend::CompileOptions compile =
        WithKernels({.target = options.target}, options.kernels);
    try {
      PrintAllocations(backend::RunPasses(module, compile, "manifest-alloc"),
                       backend::RunPasses(module, compile));
    } catch (const Error& error) {
      throw Error(LocateInFile(error.what(), options.file));
    }
    return;
  }
  if (!options.ir_after.empty()) {
    if (IsExecutableFile(options.file)) throw Error("--ir-after needs a program (.relay)");
    if (options.bytecode || options.constants) {
      throw Error("--ir-after prints IR; --bytecode and --constants print executables");
    }
    const ir::IRModule module = LoadProgram(options.file, options.params, "main");
    try {
      std::cout << text::PrintModule(
          backend::RunPasses(module, WithKernels({.target = options.target}, options.kernels),
                             options.ir_after),
          text::PrintOptions{.show_types = true});
    } catch (const Error& error) {
      throw Error(LocateInFile(error.what(), options.file));
    }
    return;
  }
  if (!options.tir_kernel.empty()) {
    if (IsExecutableFile(options.file)) throw Error("--tir needs a program (.relay)");
    const ir::IRModule module = LoadProgram(options.file, options.params, "main");
    const backend::CompileOptions compile =
        WithKernels({.target = options.target}, options.kernels);
    try {
      PrintKernelLoops(backend::GeneratedKernels(backend::RunPasses(module, compile), compile),
                       options.tir_kernel);
    } catch (const Error& error) {
      throw Error(LocateInFile(error.what(), options.file));
    }
    return;
  }
  if (!IsExecutableFile(options.file)) {
    throw Error(options.file +
                ": --bytecode, --constants and --kernels need an executable (.nimble)");
  }
  if (options.kernel_table) {
    std::cout << vm::KernelTableToString(vm::Executable::LoadFromFile(options.file));
    return;
  }
  std::cout << vm::ExecutableToString(vm::Executable::LoadFromFile(options.file),
                                      options.constants);
}

// The model builder's output for `options`, at the paper's sizes.
models::Model BuildModel(const ExportOptions& options) {
  if (options.seq_len && options.model != "bert") throw Error("--seq-len applies to bert");
  if (options.model == "lstm") {
    models::LstmOptions lstm;
    lstm.layers = options.layers.value_or(lstm.layers);
    lstm.seed = options.seed;
    lstm.weights_path = options.weights;
    return models::BuildLstm(lstm);
  }
  if (options.model == "treelstm") {
    if (options.layers) throw Error("--layers applies to lstm and bert, not treelstm");
    models::TreeLstmOptions treelstm;
    treelstm.seed = options.seed;
    treelstm.weights_path = options.weights;
    return models::BuildTreeLstm(treelstm);
  }
  models::BertOptions bert;
  bert.layers = options.layers.value_or(bert.layers);
  bert.seq_len = options.seq_len.value_or(bert.seq_len);
  bert.seed = options.seed;
  bert.weights_path = options.weights;
  return models::BuildBert(bert);
}

// Writes the model's program and weights, checked by parsing and typing them
// together first, and says how to run them: one command per entry function
// (@main, @main_arrays, ...) whose inputs are all tensors, which is what
// `nimble run --input` reads.
void ExportModel(const ExportOptions& options) {
  const models::Model model = BuildModel(options);
  const ir::IRModule module = model.Module();
  std::ofstream program(options.out, std::ios::binary);
  program << model.program;
  program.close();
  if (!program) throw Error(options.out + ": cannot write the program");
  models::SaveWeights(model, options.params);
  std::cout << "wrote " << options.out << " and " << options.params << " (" << model.weights.size()
            << " weights)\n";
  for (const auto& [global, function] : module->functions()) {
    if (!global->name.starts_with("main")) continue;
    std::string inputs;
    bool all_tensors = true;
    for (const ir::Var& param : function->params) {
      all_tensors = all_tensors && param->checked_type->kind == ir::TypeKind::kTensor;
      inputs += " --input " + param->name_hint + ".npy";
    }
    if (!all_tensors) continue;
    std::cout << "run: nimble run " << options.out << " --params " << options.params
              << (global->name == "main" ? "" : " --function " + global->name) << inputs << "\n";
  }
}

struct ImportOptions {
  std::string model;   // .onnx
  std::string out;     // .relay
  std::string params;  // .npz
  std::vector<std::string> dim_bounds;
};

// Writes an ONNX model as a program and its weights, which then run, dump
// and compile like any other (the printed program parses back to the same).
void ImportModel(const ImportOptions& options) {
  const ir::IRModule module = LoadProgram(options.model, "", "main", options.dim_bounds);
  text::ParamMap weights;
  const std::string program = text::PrintModule(module, {.constants_out = &weights});
  std::ofstream out(options.out, std::ios::binary);
  out << program;
  out.close();
  if (!out) throw Error(options.out + ": cannot write the program");
  WriteNpz(options.params, {weights.begin(), weights.end()});
  std::cout << "wrote " << options.out << " and " << options.params << " (" << weights.size()
            << " weights)\nrun: nimble run " << options.out << " --params " << options.params;
  for (const ir::Var& param : module->Lookup("main")->params) {
    std::cout << " --input " << param->name_hint << ".npy";
  }
  std::cout << "\n";
}

// Error messages are one line, so that scripts can rely on "error: " + one line.
std::string OneLine(std::string message) {
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  return message;
}

// --dim-bound on a subcommand that reads an ONNX model.
void AddDimBoundOption(CLI::App* command, std::vector<std::string>& dim_bounds) {
  command->add_option("--dim-bound", dim_bounds,
                      "An ONNX model: NAME=N types its input dimension NAME (a dim_param such as "
                      "'sequence') `?<=N`, so that storage is planned once for N; repeatable");
}

int Main(int argc, char** argv) {
  CLI::App app{"nimble: a compiler and virtual machine for dynamic neural networks"};
  app.require_subcommand(1);

  CheckOptions check;
  CLI::App* check_command =
      app.add_subcommand("check", "Parse and type-check a program; print it with its types");
  check_command->add_option("program", check.program, "The program (.relay text)")->required();
  check_command->add_option("--params", check.params,
                            "An .npz of named tensors: meta[relay.Constant][NAME] values and "
                            "@main parameters bound by name");
  AddDimBoundOption(check_command, check.dim_bounds);

  CompileOptions compile;
  CLI::App* compile_command =
      app.add_subcommand("compile", "Compile a program into an executable for the VM");
  compile_command->add_option("program", compile.program, "The program (.relay text)")->required();
  compile_command->add_option("--params", compile.params,
                              "An .npz of named tensors: meta[relay.Constant][NAME] values and "
                              "@main parameters bound by name (they become constants)");
  compile_command->add_option("--target", compile.target, "The target hosts")
      ->check(CLI::IsMember({"intel", "arm", "nvidia"}))
      ->capture_default_str();
  compile_command->add_option("--function", compile.functions,
                              "A function the executable keeps, with what it calls; repeatable "
                              "(default: main, or every function of a program without @main)");
  AddKernelOptions(compile_command, compile.kernels);
  AddDimBoundOption(compile_command, compile.dim_bounds);
  compile_command->add_option("-o,--output", compile.out, "The executable to write (.nimble)")
      ->required();

  RunOptions run;
  CLI::App* run_command =
      app.add_subcommand("run", "Run a program or an executable; print and write its outputs");
  run_command
      ->add_option("program", run.program,
                   "The program (.relay text, compiled in memory) or executable (.nimble)")
      ->required();
  run_command->add_option("--params", run.params,
                          "An .npz of named tensors: meta[relay.Constant][NAME] values and "
                          "parameters of the function bound by name");
  AddDimBoundOption(run_command, run.dim_bounds);
  run_command->add_option("--input", run.inputs,
                          "A .npy per remaining parameter of the function, in order");
  run_command->add_option("--out", run.out_dir,
                          "Directory to write the outputs to, as 0.npy, 1.npy, ... (tuple and "
                          "constructor fields flattened depth-first)");
  run_command->add_option("--function", run.function, "The global function to run")
      ->capture_default_str();
  run_command
      ->add_option("--engine", run.engine,
                   "vm: compile (a program) and run on the virtual machine; ref: the reference "
                   "evaluator (programs only)")
      ->check(CLI::IsMember({"vm", "ref"}))
      ->capture_default_str();
  AddKernelOptions(run_command, run.kernels);
  run_command->add_flag("--profile", run.profile,
                        "Print the VM's profile to stderr: kernel time vs the rest, "
                        "instructions by kind, allocations");
  run_command
      ->add_option("--warmup", run.warmup,
                   "Runs before the one whose outputs are printed and profiled (vm engine)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  run_command->add_flag("!--no-memory-plan", run.plan_memory,
                        "Compile the program without memory planning (to measure it)");

  RandomOptions random;
  CLI::App* random_command = app.add_subcommand(
      "random", "Write seeded random tensors (floats in [-1, 1), ints in [-4, 4]) to .npy/.npz");
  random_command
      ->add_option("-o,--output", random.out,
                   "Output file: a .npy for a single tensor, otherwise an .npz")
      ->required();
  random_command->add_option("--seed", random.seed, "Seed of the mt19937_64 generator")
      ->capture_default_str();
  random_command
      ->add_option("--tensor", random.tensors,
                   "NAME:SHAPE[:DTYPE], e.g. w:16x8 or n:scalar:int32 (dtype float32 if omitted)")
      ->required();

  DumpOptions dump;
  CLI::App* dump_command = app.add_subcommand(
      "dump", "Print an executable's tables and bytecode, or a program's IR after a pass");
  dump_command->add_option("file", dump.file, "An executable (.nimble) or a program (.relay text)")
      ->required();
  dump_command->add_option("--params", dump.params,
                           "With --ir-after: the program's .npz of named tensors");
  AddKernelOptions(dump_command, dump.kernels, /*choose_kernels=*/false);
  dump_command->add_flag_callback(
      "--generated", [&dump] { dump.kernels.kernels = "generated"; },
      "With --tir, --ir-after or --allocations: compile as --kernels generated does (every op "
      "code generation supports generated, matrix products fused with what follows them)");
  dump_command->add_option("--target", dump.target, "With --ir-after: the target hosts")
      ->check(CLI::IsMember({"intel", "arm", "nvidia"}))
      ->capture_default_str();
  CLI::Option_group* dump_contents =
      dump_command->add_option_group("contents", "What to print (at least one)");
  dump_contents->add_flag("--bytecode", dump.bytecode,
                          "Print the devices, kernels, constant types, messages and every "
                          "function's bytecode");
  dump_contents->add_flag("--kernels", dump.kernel_table,
                          "List an executable's kernels: generated (with the ops each fuses and "
                          "its signature, ? for a symbolic dimension), library or built-in");
  dump_contents->add_flag("--constants", dump.constants,
                          "Print all of --bytecode, with the constants' first values");
  dump_contents->add_flag("--allocations", dump.allocations,
                          "Count a program's allocations (as written) and their static bytes "
                          "before and after memory planning");
  dump_contents->add_option("--ir-after", dump.ir_after,
                            "Print the program's IR after this pass of the compile pipeline");
  dump_contents->add_option("--tir", dump.tir_kernel,
                            "Print the loop IR of this generated kernel or shape function "
                            "(a name from --kernels, or 'all')");
  dump_contents->require_option();

  ExportOptions export_model;
  CLI::App* export_command = app.add_subcommand(
      "export-model", "Write a model's program (.relay) and weights (.npz) for `nimble run`");
  export_command->add_option("model", export_model.model, "The model")
      ->check(CLI::IsMember({"lstm", "treelstm", "bert"}))
      ->required();
  export_command->add_option("-o,--output", export_model.out, "The program to write (.relay)")
      ->required();
  export_command->add_option("--params", export_model.params, "The weights to write (.npz)")
      ->required();
  export_command->add_option("--layers", export_model.layers,
                             "Layers (lstm: 1 to 8, default 1; bert: default 12)");
  export_command
      ->add_option("--seq-len", export_model.seq_len,
                   "BERT: a program for this one length (static shapes), as "
                   "`nimble-bench run --static-seq-len` compiles it")
      ->check(CLI::Range(1, 512));
  export_command->add_option("--seed", export_model.seed, "Seed of the random weights")
      ->capture_default_str();
  export_command->add_option("--weights", export_model.weights,
                             "Weights to load (.npz, named as the PyTorch state_dict) instead of "
                             "seeding them");

  ImportOptions import_model;
  CLI::App* import_command = app.add_subcommand(
      "import", "Write an ONNX model as a program (.relay) and its weights (.npz)");
  import_command->add_option("model", import_model.model, "The ONNX model (.onnx)")->required();
  import_command->add_option("-o,--output", import_model.out, "The program to write (.relay)")
      ->required();
  import_command->add_option("--params", import_model.params, "The weights to write (.npz)")
      ->required();
  AddDimBoundOption(import_command, import_model.dim_bounds);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : kUsageError;
  }

  try {
    if (*check_command) Check(check);
    if (*compile_command) Compile(compile);
    if (*run_command) Run(run);
    if (*random_command) Random(random);
    if (*dump_command) Dump(dump);
    if (*export_command) ExportModel(export_model);
    if (*import_command) ImportModel(import_model);
  } catch (const std::exception& error) {
    std::cout.flush();
    std::cerr << "error: " << OneLine(error.what()) << "\n";
    return kUserError;
  }
  return 0;
}

}  // namespace

}  // namespace nimble::cli

int main(int argc, char** argv) {
  try {
    return nimble::cli::Main(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << "error: " << nimble::cli::OneLine(error.what()) << "\n";
  } catch (...) {
    std::cerr << "error: unexpected failure\n";
  }
  return 1;
}
