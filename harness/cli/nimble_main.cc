// The `nimble` command line:
//   nimble check PROG.relay [--params W.npz]
//   nimble run PROG.relay [--params W.npz] [--input a.npy ...] [--out DIR] [--function main]
//   nimble random -o OUT --seed N --tensor NAME:SHAPE[:DTYPE] ...
//   nimble dump EXE.nimble [--bytecode] [--constants]   (at least one of the two)
// Exit status: 0 on success, 1 on a user error (one line "error: ..." on
// stderr), 2 on bad usage (CLI11's message).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "harness/cli/program_loader.h"
#include "harness/cli/random_tensors.h"
#include "harness/cli/result_output.h"
#include "nimble/compiler/eval/evaluator.h"
#include "nimble/compiler/text/printer.h"
#include "nimble/vm/error.h"
#include "nimble/vm/executable.h"
#include "nimble/vm/npy.h"

namespace nimble::cli {

namespace {

constexpr int kUserError = 1;
constexpr int kUsageError = 2;
// Values shown per output in the run summary.
constexpr size_t kSummaryValues = 8;

struct CheckOptions {
  std::string program;
  std::string params;
};

struct RunOptions {
  std::string program;
  std::string params;
  std::vector<std::string> inputs;
  std::string out_dir;
  std::string function = "main";
};

struct RandomOptions {
  std::string out;
  uint64_t seed = 0;
  std::vector<std::string> tensors;
};

struct DumpOptions {
  std::string executable;
  bool constants = false;
};

void Check(const CheckOptions& options) {
  ir::IRModule module = LoadProgram(options.program, options.params, "main");
  std::cout << text::PrintModule(module, text::PrintOptions{.show_types = true});
}

std::string JoinParamNames(const std::vector<ir::Var>& params) {
  std::string names;
  for (const ir::Var& param : params) names += (names.empty() ? "%" : ", %") + param->name_hint;
  return names;
}

void Run(const RunOptions& options) {
  ir::IRModule module = LoadProgram(options.program, options.params, options.function);
  const ir::Function entry = module->Lookup(options.function);
  if (!entry) throw Error(options.program + ": no function @" + options.function);
  if (entry->params.size() != options.inputs.size()) {
    throw Error("@" + options.function + " needs " + std::to_string(entry->params.size()) +
                " --input file(s) (for " + JoinParamNames(entry->params) + "), got " +
                std::to_string(options.inputs.size()));
  }
  std::vector<Ref<Object>> args;
  for (const std::string& input : options.inputs) args.push_back(ReadNpy(input));

  std::vector<Tensor> outputs;
  try {
    outputs = FlattenResult(eval::Evaluate(module, options.function, args));
  } catch (const Error& error) {
    throw Error(LocateInFile(error.what(), options.program));
  }
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

// The tables and the bytecode always print, since the code refers to the tables;
// `constants` adds the constants' values.
void Dump(const DumpOptions& options) {
  std::cout << vm::ExecutableToString(vm::Executable::LoadFromFile(options.executable),
                                      options.constants);
}

// Error messages are one line, so that scripts can rely on "error: " + one line.
std::string OneLine(std::string message) {
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  return message;
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

  RunOptions run;
  CLI::App* run_command = app.add_subcommand(
      "run", "Evaluate a program with the reference evaluator; print and write its outputs");
  run_command->add_option("program", run.program, "The program (.relay text)")->required();
  run_command->add_option("--params", run.params,
                          "An .npz of named tensors: meta[relay.Constant][NAME] values and "
                          "parameters of the function bound by name");
  run_command->add_option("--input", run.inputs,
                          "A .npy per remaining parameter of the function, in order");
  run_command->add_option("--out", run.out_dir,
                          "Directory to write the outputs to, as 0.npy, 1.npy, ... (tuple and "
                          "constructor fields flattened depth-first)");
  run_command->add_option("--function", run.function, "The global function to run")
      ->capture_default_str();

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
  CLI::App* dump_command =
      app.add_subcommand("dump", "Print a compiled executable: its tables and bytecode");
  dump_command->add_option("executable", dump.executable, "The executable (.nimble file)")
      ->required();
  CLI::Option_group* dump_contents =
      dump_command->add_option_group("contents", "What to print (at least one)");
  dump_contents->add_flag("--bytecode")
      ->description(
          "Print the devices, kernels, constant types, messages and every function's bytecode");
  dump_contents->add_flag("--constants", dump.constants,
                          "Print all of --bytecode, with the constants' first values");
  dump_contents->require_option();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : kUsageError;
  }

  try {
    if (*check_command) Check(check);
    if (*run_command) Run(run);
    if (*random_command) Random(random);
    if (*dump_command) Dump(dump);
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
