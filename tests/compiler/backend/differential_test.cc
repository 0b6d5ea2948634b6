// The differential test of the compile pipeline (issue 4): every program of
// tests/programs and examples/ runs on the reference evaluator and, compiled
// by backend::Compile, on the VM, each on several argument sets, and the two
// must agree: the same values structurally (tensors: dtype, shape, values;
// ADTs: tag and fields; closures: both closures), or both failing. The few
// evaluator programs that type inference rejects (the evaluator is
// dynamically typed) say so in the table, which checks that error instead.
//
// The evaluator is the oracle, so inputs whose values do not matter are
// seeded random; dynamic dimensions take several sizes, 0 and 1 among them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/eval/evaluator.h"
#include "nimble/compiler/ir/bind_params.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/closure.h"
#include "nimble/vm/error.h"
#include "nimble/vm/npy.h"
#include "nimble/vm/vm.h"
#include "tests/cuda_device.h"
#include "tests/error_of.h"
#include "tests/programs/generated_programs.h"
#include "tests/programs/test_programs.h"

namespace nimble::backend {
namespace {

using ::testing::HasSubstr;

using Args = std::vector<Ref<Object>>;

// One call of a case's entry function.
struct ArgSet {
  std::string label;  // names the set in failure messages
  Args values;
};

struct Case {
  std::string name{};  // the test's name
  // The program, relative to the source root; empty for a generated one.
  std::string file{};
  // An .npz relative to the source root, bound as `nimble run --params` does.
  std::string params{};
  // Builds a generated program (when `file` is empty).
  std::function<ir::IRModule()> generate{};
  std::string entry = "main";
  // For a program outside what the compiler takes (the evaluator is
  // dynamically typed; the compiler needs a typed module): what type
  // inference says. Only that is checked then; it cannot run on the VM.
  std::string type_error{};
  // A difference between the engines not fixed yet: the case is skipped with
  // this reason, so the gap stays listed in every test run.
  std::string known_gap{};
  // Why the program cannot run on the GPU (an operator without a GPU kernel):
  // its GPU case is skipped with this reason.
  std::string gpu_gap{};
  // The absolute difference allowed for float values that cancel to near
  // zero (CloseEnough).
  double absolute_floor = 1e-6;
  // The argument sets; they get the parsed module for its constructors' tags.
  std::function<std::vector<ArgSet>(const ir::IRModule&)> args{};
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << c.name;
}

std::string SourcePath(const std::string& relative) {
  return std::string(NIMBLE_SOURCE_DIR) + "/" + relative;
}

// ---- Arguments ----------------------------------------------------------------

Tensor F32(const Shape& shape, const std::vector<float>& values) {
  return TensorNode::FromVector(shape, DataType::Float32(), values);
}

Tensor I32(int32_t value) {
  return TensorNode::Scalar(DataType::Int32(), value);
}

Tensor Bool(bool value) {
  return TensorNode::Scalar(DataType::Bool(), value);
}

// Floats uniform in [-1, 1), integers in [-4, 4], bools 0 or 1.
Tensor Random(const Shape& shape, DataType dtype, std::mt19937& rng) {
  Tensor tensor = TensorNode::Empty(shape, dtype);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> integer(dtype.is_bool() ? 0 : -4, dtype.is_bool() ? 1 : 4);
  for (int64_t i = 0; i < tensor->numel(); ++i) {
    tensor->SetFromDouble(i, dtype.is_float() ? real(rng) : integer(rng));
  }
  return tensor;
}

Tensor RandomF32(const Shape& shape, std::mt19937& rng) {
  return Random(shape, DataType::Float32(), rng);
}

Tensor ExampleData(const std::string& file) {
  return ReadNpy(SourcePath("examples/data/" + file));
}

// Argument sets that do not depend on the module.
std::function<std::vector<ArgSet>(const ir::IRModule&)> Sets(std::vector<ArgSet> sets) {
  return [sets = std::move(sets)](const ir::IRModule&) { return sets; };
}

// The sets `make(rows, rng)` gives for each row count of a dynamic dimension.
template <typename Make>
std::vector<ArgSet> ForRows(const std::vector<int64_t>& row_counts, Make make) {
  std::mt19937 rng(7);
  std::vector<ArgSet> sets;
  for (int64_t rows : row_counts) sets.push_back({std::to_string(rows) + " rows", make(rows, rng)});
  return sets;
}

// A value of `List[(int32, int32)]` built from the module's List constructors.
Ref<Object> PairList(const ir::IRModule& module, const std::vector<std::pair<int, int>>& pairs) {
  Ref<Object> list = Make<ADTNode>(module->LookupConstructor("Nil")->tag, Args{});
  for (auto it = pairs.rbegin(); it != pairs.rend(); ++it) {
    list = Make<ADTNode>(module->LookupConstructor("Cons")->tag,
                         Args{MakeTuple({I32(it->first), I32(it->second)}), list});
  }
  return list;
}

// ---- The table ------------------------------------------------------------------

std::string Program(const std::string& name) {
  return "tests/programs/" + name + ".relay";
}

std::function<ir::IRModule()> Generated(std::function<std::string()> text) {
  return [text = std::move(text)] { return text::ParseModule(text(), "generated.relay"); };
}

std::vector<Case> Cases() {
  std::mt19937 rng(1);
  return {
      // ---- Basics
      {.name = "concat_dynamic_rows",
       .file = Program("concat_dynamic_rows"),
       .args = Sets(ForRows({0, 1, 2, 7},
                            [](int64_t rows, std::mt19937& r) -> Args {
                              return {RandomF32({rows, 2}, r), RandomF32({1, 2}, r)};
                            }))},
      // A row's sum of 300 values in [-1, 1) that cancels to near zero keeps
      // the rounding of partial sums of up to ~10, whose order follows the
      // host's vector width: 1.6e-6 apart on a Zen 4 EPYC (AVX-512).
      {.name = "long_reductions",
       .file = Program("long_reductions"),
       .absolute_floor = 1e-5,
       .args = Sets(ForRows({1, 5, 33},
                            [](int64_t rows, std::mt19937& r) -> Args {
                              return {RandomF32({rows, 300}, r),
                                      Random({rows, 64}, DataType::Int32(), r),
                                      RandomF32({3, 10 * rows}, r), RandomF32({300}, r),
                                      RandomF32({300}, r)};
                            }))},
      {.name = "lets_and_scalars",
       .file = Program("lets_and_scalars"),
       .args = Sets({{"given", {F32({2}, {1, 10})}}, {"random", {RandomF32({2}, rng)}}})},
      {.name = "graph_bindings",
       .file = Program("graph_bindings"),
       .args = Sets({{"given", {F32({2}, {1, 2})}}, {"random", {RandomF32({2}, rng)}}})},
      {.name = "shared_doubling_60",
       .generate = Generated([] { return test::SharedDoublingProgram(60); }),
       .args = Sets({{"one", {TensorNode::Scalar(DataType::Float64(), 1.0)}},
                     {"random", {Random({}, DataType::Float64(), rng)}}})},
      {.name = "graph_binding_chain_10000",
       .generate = Generated([] { return test::GraphBindingChainProgram(10000); }),
       .args = Sets({{"half", {F32({}, {0.5f})}}})},
      {.name = "let_chain_10000",
       .generate = Generated([] { return test::LetChainProgram(10000); }),
       .args = Sets({{"half", {F32({}, {0.5f})}}})},
      {.name = "split_and_project",
       .file = Program("split_and_project"),
       .args = Sets(ForRows({0, 1, 2, 5},
                            [](int64_t rows, std::mt19937& r) -> Args {
                              return {RandomF32({rows, 3}, r)};
                            }))},
      // ---- Control flow
      {.name = "if_branch_shapes",
       .file = Program("if_branch_shapes"),
       .args = Sets({{"true", {Bool(true)}}, {"false", {Bool(false)}}})},
      {.name = "if_untyped_condition",
       .file = Program("if_untyped_condition"),
       .args = Sets({{"true", {Bool(true)}}, {"false", {Bool(false)}}})},
      {.name = "if_untyped_condition_rejected",
       .file = Program("if_untyped_condition"),
       .args = Sets({{"int32 condition", {I32(1)}},
                     {"bool vector condition",
                      {TensorNode::FromVector<int>({2}, DataType::Bool(), {1, 0})}}})},
      {.name = "tail_recursive_loop",
       .file = Program("tail_recursive_loop"),
       .args = Sets({{"n=0", {I32(0)}}, {"n=1", {I32(1)}}, {"n=10000", {I32(10000)}}})},
      {.name = "grow_tensor_loop",
       .file = Program("grow_tensor_loop"),
       .args = Sets({{"given", {F32({1, 2}, {9, 9})}}, {"random", {RandomF32({1, 2}, rng)}}})},
      {.name = "storage_reuse",
       .file = Program("storage_reuse"),
       .args = Sets(
           ForRows({0, 1, 3, 7},
                   [](int64_t rows, std::mt19937& r) -> Args {
                     return {RandomF32({rows, 4}, r), RandomF32({4, 4}, r), Bool(rows % 2 == 1)};
                   }))},
      {.name = "non_tail_recursion",
       .file = Program("non_tail_recursion"),
       .entry = "count",
       .args = Sets({{"n=0", {I32(0)}}, {"n=1", {I32(1)}}, {"n=10000", {I32(10000)}}})},
      {.name = "mutual_recursion_even",
       .file = Program("mutual_recursion"),
       .entry = "even",
       .args = Sets({{"n=0", {I32(0)}}, {"n=7", {I32(7)}}, {"n=10", {I32(10)}}})},
      {.name = "mutual_recursion_odd",
       .file = Program("mutual_recursion"),
       .entry = "odd",
       .args = Sets({{"n=0", {I32(0)}}, {"n=10001", {I32(10001)}}})},
      // ---- Closures
      {.name = "closures_capture",
       .file = Program("closures_capture"),
       .args = Sets({{"given", {F32({}, {1})}}, {"random", {RandomF32({}, rng)}}})},
      {.name = "return_closure",
       .file = Program("return_closure"),
       .type_error = "cannot infer the type of %x"},
      {.name = "return_typed_closure",
       .file = Program("return_typed_closure"),
       .args = Sets({{"given", {F32({}, {2})}}})},
      {.name = "recursive_let_closure",
       .generate = test::RecursiveLetClosureModule,
       .args = Sets({{"n=0", {I32(0)}}, {"n=1", {I32(1)}}, {"n=10", {I32(10)}}})},
      // ---- ADTs and match
      {.name = "list_map_fold",
       .file = Program("list_map_fold"),
       .args = Sets({{"given", {F32({}, {10})}}, {"random", {RandomF32({}, rng)}}})},
      {.name = "list_range_sum",
       .file = Program("list_range_sum"),
       .args = Sets({{"n=0", {I32(0)}}, {"n=1", {I32(1)}}, {"n=10000", {I32(10000)}}})},
      {.name = "constructor_tags",
       .file = Program("constructor_tags"),
       .args = Sets({{"given", {F32({}, {2})}}, {"random", {RandomF32({}, rng)}}})},
      {.name = "constructors_as_values",
       .file = Program("constructors_as_values"),
       .args = Sets({{"none", {}}})},
      {.name = "match_pattern_kinds",
       .file = Program("match_pattern_kinds"),
       .entry = "classify",
       .gpu_gap = "an ADT argument keeps its tensors on the CPU, and device placement reads "
                  "them on the GPU (plan_devices' limit: tensors inside ADTs are never copied)",
       .args =
           [](const ir::IRModule& module) {
             return std::vector<ArgSet>{
                 {"empty", {PairList(module, {})}},
                 {"one pair", {PairList(module, {{7, 8}})}},
                 {"two pairs", {PairList(module, {{7, 8}, {1, 2}})}},
                 {"three pairs", {PairList(module, {{7, 8}, {1, 2}, {3, 4}})}},
             };
           }},
      {.name = "incomplete_match",
       .file = Program("incomplete_match"),
       .args = Sets({{"no clause for Nil", {F32({}, {1})}}})},
      {.name = "tuples_and_projections",
       .file = Program("tuples_and_projections"),
       .args = Sets({{"given", {F32({}, {1}), F32({2}, {2, 3})}},
                     {"random", {RandomF32({}, rng), RandomF32({2}, rng)}}})},
      // ---- Errors
      {.name = "entry_checks_arguments",
       .file = Program("entry_checks_arguments"),
       .args = Sets({{"7 rows", {RandomF32({7, 2}, rng), I32(1)}},
                     {"0 rows", {RandomF32({0, 2}, rng), I32(1)}},
                     {"1 row", {RandomF32({1, 2}, rng), I32(1)}},
                     {"missing argument", {RandomF32({3, 2}, rng)}}})},
      {.name = "entry_checks_arguments_rejected",
       .file = Program("entry_checks_arguments"),
       .args = Sets({{"wrong static dimension", {RandomF32({3, 3}, rng), I32(1)}},
                     {"wrong rank", {RandomF32({2}, rng), I32(1)}},
                     {"wrong dtype", {RandomF32({3, 2}, rng), F32({}, {1})}},
                     {"tuple for a tensor", {MakeTuple({}), I32(1)}}})},
      {.name = "entry_checks_arguments_missing_entry",
       .file = Program("entry_checks_arguments"),
       .entry = "missing",
       .args = Sets({{"none", {}}})},
      {.name = "call_checks_annotations",
       .file = Program("call_checks_annotations"),
       .type_error = "argument 0 of @f: expected Tensor[(2,), float32], got Tensor[(?,), float32]"},
      {.name = "runtime_shape_mismatch",
       .file = Program("runtime_shape_mismatch"),
       .args = Sets({{"3 and 3 rows", {RandomF32({3, 2}, rng), RandomF32({3, 2}, rng)}},
                     {"0 and 0 rows", {RandomF32({0, 2}, rng), RandomF32({0, 2}, rng)}},
                     {"1 row broadcast", {RandomF32({1, 2}, rng), RandomF32({3, 2}, rng)}},
                     {"3 and 4 rows", {RandomF32({3, 2}, rng), RandomF32({4, 2}, rng)}}})},
      {.name = "error_in_callee",
       .file = Program("error_in_callee"),
       .args = Sets({{"4 and 4", {RandomF32({4}, rng), RandomF32({4}, rng)}},
                     {"0 and 0", {RandomF32({0}, rng), RandomF32({0}, rng)}},
                     {"1 broadcast", {RandomF32({1}, rng), RandomF32({5}, rng)}},
                     {"2 and 3", {RandomF32({2}, rng), RandomF32({3}, rng)}}})},
      {.name = "operator_on_closure",
       .file = Program("operator_on_closure"),
       .type_error = "add: argument 0 must be a tensor"},
      {.name = "call_non_function",
       .file = Program("call_non_function"),
       .type_error = "cannot infer the type of %x"},
      {.name = "call_wrong_arity",
       .file = Program("call_wrong_arity"),
       .type_error = "cannot infer the type of %f"},
      // ---- The examples, with their data files and more row counts
      {.name = "example_dynamic_concat",
       .file = "examples/dynamic_concat.relay",
       .args =
           [](const ir::IRModule&) {
             std::vector<ArgSet> sets =
                 ForRows({0, 1, 8}, [](int64_t rows, std::mt19937& r) -> Args {
                   return {RandomF32({rows, 2}, r), RandomF32({1, 2}, r)};
                 });
             sets.push_back(
                 {"data files",
                  {ExampleData("dynamic_concat_x.npy"), ExampleData("dynamic_concat_y.npy")}});
             return sets;
           }},
      {.name = "example_grow_loop",
       .file = "examples/grow_loop.relay",
       .args =
           [](const ir::IRModule&) {
             std::mt19937 r(3);
             return std::vector<ArgSet>{{"data file", {ExampleData("grow_loop_row.npy")}},
                                        {"random", {RandomF32({1, 2}, r)}}};
           }},
      {.name = "example_list_fold",
       .file = "examples/list_fold.relay",
       .args =
           [](const ir::IRModule&) {
             std::vector<ArgSet> sets =
                 ForRows({0, 1, 6}, [](int64_t rows, std::mt19937& r) -> Args {
                   return {RandomF32({rows, 4}, r), RandomF32({}, r)};
                 });
             sets.push_back({"data files",
                             {ExampleData("list_fold_x.npy"), ExampleData("list_fold_scale.npy")}});
             return sets;
           }},
      {.name = "example_lstm_cell",
       .file = "examples/lstm_cell.relay",
       .params = "examples/data/lstm_cell.npz",
       .args =
           [](const ir::IRModule&) {
             std::vector<ArgSet> sets =
                 ForRows({0, 1, 12}, [](int64_t rows, std::mt19937& r) -> Args {
                   return {RandomF32({rows, 8}, r)};
                 });
             sets.push_back({"data file", {ExampleData("lstm_sequence.npy")}});
             return sets;
           }},
  };
}

// Programs in the directories that are not programs of their own: preludes
// that others append with `// uses:`.
const std::set<std::string> kLibraries = {"tests/programs/list_prelude.relay"};

// ---- Running both sides -------------------------------------------------------------

// Parses the case's program and binds its params the way `nimble run` does
// (harness/cli/program_loader.cc, which cannot be reused as it reads the file
// itself and infers types, and the evaluator must also see ill-typed programs).
ir::IRModule LoadCase(const Case& c) {
  if (c.file.empty()) return c.generate();
  text::ParamMap params;
  if (!c.params.empty()) {
    for (auto& [name, tensor] : ReadNpz(SourcePath(c.params))) params[name] = std::move(tensor);
  }
  ir::IRModule module =
      text::ParseModule(test::ReadProgramFile(SourcePath(c.file)), c.file, &params);
  if (ir::Function function = module->Lookup(c.entry)) {
    module->Add(module->GetGlobalVar(c.entry), ir::BindParamsByName(function, params));
  }
  return module;
}

// A result, or the message of the nimble::Error that came instead.
struct Outcome {
  Ref<Object> value;
  std::optional<std::string> error;
};

template <typename Fn>
Outcome Capture(Fn&& fn) {
  try {
    return {fn(), std::nullopt};
  } catch (const Error& error) {
    return {nullptr, error.what()};
  }
}

// The VM gets its own copies, so that neither side can see the other write
// into an argument (the evaluator may return an argument itself).
// A copy of `value` whose tensors are on the CPU: the VM returns the tensors
// inside ADTs where they were made, on the GPU for target nvidia.
Ref<Object> DeepCopy(const Ref<Object>& value) {
  if (Tensor tensor = value.as<TensorNode>()) return tensor->CopyTo(Device{DeviceType::kCPU, 0});
  if (ADT adt = value.as<ADTNode>()) {
    Args fields;
    for (const Ref<Object>& field : adt->fields()) fields.push_back(DeepCopy(field));
    return Make<ADTNode>(adt->tag(), std::move(fields));
  }
  return value;
}

std::string Describe(const Ref<Object>& value) {
  if (Tensor tensor = value.as<TensorNode>()) return tensor->TypeString();
  if (ADT adt = value.as<ADTNode>()) {
    return "ADT with tag " + std::to_string(adt->tag()) + " and " + std::to_string(adt->size()) +
           " field(s)";
  }
  if (value.as<eval::ClosureNode>() || value.as<vm::ClosureNode>()) return "a closure";
  return value ? "an unknown object" : "null";
}

// Float results may differ in the last bits: the VM's kernels sum in other
// orders and precisions, and approximate exp, tanh, sigmoid and erf within a
// few ulps (vector_math.h) where the evaluator rounds the exact value; later
// ops carry both on, so no per-element ulp bound holds for a program. Relative
// 1e-5, with an absolute floor for values that cancel to near zero.
bool CloseEnough(double expected, double actual, double absolute_floor) {
  if (std::isnan(expected) || std::isnan(actual)) return std::isnan(expected) && std::isnan(actual);
  if (expected == actual) return true;  // infinities
  return std::abs(expected - actual) <=
         std::max(1e-5 * std::max(std::abs(expected), std::abs(actual)), absolute_floor);
}

void ExpectSameTensor(const Tensor& expected, const Tensor& actual, const std::string& where,
                      double absolute_floor) {
  if (expected->dtype() != actual->dtype() || expected->shape() != actual->shape()) {
    ADD_FAILURE() << where << ": the evaluator gives " << expected->TypeString() << ", the VM "
                  << actual->TypeString();
    return;
  }
  const bool is_float = expected->dtype().is_float();
  int mismatches = 0;
  for (int64_t i = 0; i < expected->numel(); ++i) {
    const bool same =
        is_float ? CloseEnough(expected->GetAsDouble(i), actual->GetAsDouble(i), absolute_floor)
                 : expected->GetAsInt64(i) == actual->GetAsInt64(i);
    if (same) continue;
    if (++mismatches > 5) {
      ADD_FAILURE() << where << ": more elements differ";
      return;
    }
    ADD_FAILURE() << where << " element " << i << ": the evaluator gives "
                  << expected->GetAsDouble(i) << ", the VM " << actual->GetAsDouble(i);
  }
}

// `where` names the part compared, e.g. "result.1.0" for field 0 of field 1.
void ExpectSameValue(const Ref<Object>& expected, const Ref<Object>& actual,
                     const std::string& where, double absolute_floor) {
  const Tensor expected_tensor = expected.as<TensorNode>();
  const Tensor actual_tensor = actual.as<TensorNode>();
  const ADT expected_adt = expected.as<ADTNode>();
  const ADT actual_adt = actual.as<ADTNode>();
  if (expected_tensor && actual_tensor) {
    ExpectSameTensor(expected_tensor, actual_tensor, where, absolute_floor);
  } else if (expected_adt && actual_adt) {
    if (expected_adt->tag() != actual_adt->tag() || expected_adt->size() != actual_adt->size()) {
      ADD_FAILURE() << where << ": the evaluator gives " << Describe(expected) << ", the VM "
                    << Describe(actual);
      return;
    }
    for (size_t i = 0; i < expected_adt->size(); ++i) {
      ExpectSameValue(expected_adt->field(i), actual_adt->field(i), where + "." + std::to_string(i),
                      absolute_floor);
    }
  } else if (!expected.as<eval::ClosureNode>() || !actual.as<vm::ClosureNode>()) {
    ADD_FAILURE() << where << ": the evaluator gives " << Describe(expected) << ", the VM "
                  << Describe(actual);
  }
}

class Differential : public ::testing::TestWithParam<Case> {};

void ExpectVMAgreesWithEvaluator(const Case& c, const ir::IRModule& module,
                                 const vm::Executable& executable);

TEST_P(Differential, VMAgreesWithEvaluator) {
  const Case& c = GetParam();
  if (!c.known_gap.empty()) GTEST_SKIP() << "known gap: " << c.known_gap;
  ir::IRModule module = LoadCase(c);
  if (!c.type_error.empty()) {
    EXPECT_THAT(ErrorOf([&] { typing::InferTypes(module); }), HasSubstr(c.type_error));
    return;
  }
  try {
    typing::InferTypes(module);
  } catch (const Error& error) {
    FAIL() << "type inference fails: " << error.what();
  }
  // A well-typed program must compile, even one that fails at run time: with
  // the kernels measurement chooses, and with every supported op generated
  // (products fused with what follows them).
  for (const char* kernels : {"auto", "generated"}) {
    SCOPED_TRACE(std::string("--kernels ") + kernels);
    std::optional<vm::Executable> executable;
    try {
      executable = Compile(module, {.kernels = kernels});
    } catch (const Error& error) {
      FAIL() << "backend::Compile fails: " << error.what();
    }
    ExpectVMAgreesWithEvaluator(c, module, *executable);
  }
}

// The same programs for the GPU: each compiles for --target nvidia (its
// kernels to PTX that the toolkit's ptxas assembles, where it is installed;
// its matrix products to cuBLAS, or with --kernels generated to the GPU's
// templates) and, where a GPU exists, agrees with the evaluator.
TEST_P(Differential, GpuAgreesWithEvaluator) {
  const Case& c = GetParam();
  if (!c.known_gap.empty()) GTEST_SKIP() << "known gap: " << c.known_gap;
  if (!c.type_error.empty()) GTEST_SKIP() << "a type error, checked on the CPU";
  if (!c.gpu_gap.empty()) GTEST_SKIP() << "GPU gap: " << c.gpu_gap;
  ir::IRModule module = LoadCase(c);
  typing::InferTypes(module);
  std::vector<vm::Executable> executables;
  for (const char* kernels : {"auto", "generated"}) {
    SCOPED_TRACE(std::string("--kernels ") + kernels);
    try {
      executables.push_back(Compile(module, {.target = "nvidia", .kernels = kernels}));
    } catch (const Error& error) {
      FAIL() << "backend::Compile for nvidia fails: " << error.what();
    }
    if (!executables.back().device_code.empty() && !testing::Ptxas().empty()) {
      for (const char* arch : {"sm_80", "sm_90"}) {
        EXPECT_EQ(testing::PtxasRejects(executables.back().device_code, arch), "");
      }
    }
  }
  if (const std::string missing = testing::CudaMissing(); !missing.empty()) {
    GTEST_SKIP() << missing;
  }
  for (const vm::Executable& executable : executables) {
    ExpectVMAgreesWithEvaluator(c, module, executable);
  }
}

void ExpectVMAgreesWithEvaluator(const Case& c, const ir::IRModule& module,
                                 const vm::Executable& executable) {
  for (const ArgSet& set : c.args(module)) {
    SCOPED_TRACE("argument set '" + set.label + "'");
    const Outcome expected = Capture([&] { return eval::Evaluate(module, c.entry, set.values); });
    Args args;
    for (const Ref<Object>& value : set.values) args.push_back(DeepCopy(value));
    // A fresh VM per set, so that one set's failure cannot leak into the next.
    const Outcome actual = Capture([&] {
      vm::VirtualMachine machine(executable);
      return DeepCopy(machine.Invoke(c.entry, args));
    });
    if (expected.error && actual.error) {
      std::cout << "[ both fail ] " << c.name << " '" << set.label
                << "'\n  evaluator: " << *expected.error << "\n  VM:        " << *actual.error
                << "\n";
    } else if (expected.error) {
      ADD_FAILURE() << "the evaluator fails (" << *expected.error << ") but the VM gives "
                    << Describe(actual.value);
    } else if (actual.error) {
      ADD_FAILURE() << "the evaluator gives " << Describe(expected.value) << " but the VM fails ("
                    << *actual.error << ")";
    } else {
      ExpectSameValue(expected.value, actual.value, "result", c.absolute_floor);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, Differential, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// The table must grow with the directories: a new program there without a
// case here fails this test.
TEST(DifferentialTable, CoversEveryProgram) {
  std::set<std::string> covered;
  for (const Case& c : Cases()) covered.insert(c.file);
  for (const char* directory : {"tests/programs", "examples"}) {
    for (const auto& entry : std::filesystem::directory_iterator(SourcePath(directory))) {
      if (entry.path().extension() != ".relay") continue;
      const std::string file = std::string(directory) + "/" + entry.path().filename().string();
      if (kLibraries.contains(file)) continue;
      EXPECT_TRUE(covered.contains(file)) << file << " has no case in the differential table";
    }
  }
}

}  // namespace
}  // namespace nimble::backend
