#include "nimble/compiler/eval/evaluator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/error.h"
#include "tests/error_of.h"
#include "tests/programs/generated_programs.h"
#include "tests/programs/test_programs.h"

namespace nimble::eval {
namespace {

using test::ReadTestProgram;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ir::IRModule Parse(const std::string& text) {
  return text::ParseModule(text, "test.relay");
}

Ref<Object> RunProgram(const std::string& text, const std::vector<Ref<Object>>& args,
                       const std::string& function = "main") {
  return Evaluate(Parse(text), function, args);
}

Tensor F32(const Shape& shape, const std::vector<float>& values) {
  return TensorNode::FromVector(shape, DataType::Float32(), values);
}

Tensor I32(int32_t value) {
  return TensorNode::Scalar(DataType::Int32(), value);
}

std::vector<double> Values(const Ref<Object>& value) {
  Tensor tensor = value.as<TensorNode>();
  EXPECT_TRUE(tensor) << "not a tensor";
  std::vector<double> values;
  for (int64_t i = 0; tensor && i < tensor->numel(); ++i) values.push_back(tensor->GetAsDouble(i));
  return values;
}

Shape ShapeOf(const Ref<Object>& value) {
  Tensor tensor = value.as<TensorNode>();
  EXPECT_TRUE(tensor) << "not a tensor";
  return tensor ? tensor->shape() : Shape{};
}

// A list value of tensors as the vector of their first elements.
std::vector<double> ListHeads(Ref<Object> list) {
  std::vector<double> heads;
  while (ADT cell = list.as<ADTNode>()) {
    if (cell->size() == 0) break;
    heads.push_back(Values(cell->field(0)).at(0));
    list = cell->field(1);
  }
  return heads;
}

// ---- Basics -----------------------------------------------------------------

TEST(Evaluator, OperatorCallOnDynamicShapes) {
  const std::string program = ReadTestProgram("concat_dynamic_rows");
  Ref<Object> out = RunProgram(program, {F32({2, 2}, {1, 2, 3, 4}), F32({1, 2}, {5, 6})});
  EXPECT_EQ(ShapeOf(out), (Shape{3, 2}));
  EXPECT_THAT(Values(out), ElementsAre(1, 2, 3, 4, 5, 6));
  // Any accepts any size, including zero rows.
  out = RunProgram(program, {F32({0, 2}, {}), F32({1, 2}, {5, 6})});
  EXPECT_EQ(ShapeOf(out), (Shape{1, 2}));
}

TEST(Evaluator, LetsAndScalars) {
  Ref<Object> out = RunProgram(ReadTestProgram("lets_and_scalars"), {F32({2}, {1, 10})});
  EXPECT_THAT(Values(out), ElementsAre(2, 11));
}

TEST(Evaluator, GraphBindingsAreShared) {
  Ref<Object> out = RunProgram(ReadTestProgram("graph_bindings"), {F32({2}, {1, 2})});
  EXPECT_THAT(Values(out), ElementsAre(4, 16));
}

TEST(Evaluator, SharedSubexpressionsAreEvaluatedOnce) {
  // Each binding is used twice: evaluated per path, this would take 2^60 adds.
  const std::string program = test::SharedDoublingProgram(60);
  const Tensor one = TensorNode::Scalar(DataType::Float64(), 1.0);
  EXPECT_THAT(Values(RunProgram(program, {one})), ElementsAre(std::ldexp(1.0, 60)));
}

TEST(Evaluator, TenThousandDeepGraphBindings) {
  const std::string program = test::GraphBindingChainProgram(10000);
  EXPECT_THAT(Values(RunProgram(program, {F32({}, {0.5f})})), ElementsAre(10000.5));
}

TEST(Evaluator, DoesNotNeedTypeInferenceButAgreesWithIt) {
  const std::string program = ReadTestProgram("split_and_project");
  ir::IRModule module = Parse(program);
  const Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto check = [&](const Ref<Object>& out) {
    ADT tuple = out.as<ADTNode>();
    ASSERT_TRUE(tuple);
    ASSERT_EQ(tuple->size(), 2u);
    EXPECT_EQ(ShapeOf(tuple->field(0)), (Shape{2, 1}));
    EXPECT_THAT(Values(tuple->field(0)), ElementsAre(3, 6));
    EXPECT_THAT(Values(tuple->field(1)), ElementsAre(3, 9));
  };
  check(Evaluate(module, "main", {x}));
  EXPECT_FALSE(module->Lookup("main")->body->checked_type);
  typing::InferTypes(module);
  check(Evaluate(module, "main", {x}));
}

// ---- Control flow ---------------------------------------------------------

TEST(Evaluator, IfBranchesMayReturnDifferentShapes) {
  const std::string program = ReadTestProgram("if_branch_shapes");
  ir::IRModule module = Parse(program);
  Ref<Object> yes = Evaluate(module, "main", {TensorNode::Scalar(DataType::Bool(), true)});
  Ref<Object> no = Evaluate(module, "main", {TensorNode::Scalar(DataType::Bool(), false)});
  EXPECT_EQ(ShapeOf(yes), (Shape{2, 3}));
  EXPECT_EQ(Values(yes).front(), 0);
  EXPECT_EQ(ShapeOf(no), (Shape{4, 3}));
  EXPECT_EQ(Values(no).front(), 1);
}

TEST(Evaluator, IfConditionMustBeBoolScalar) {
  const std::string program = ReadTestProgram("if_untyped_condition");
  EXPECT_THAT(ErrorOf([&] { RunProgram(program, {I32(1)}); }),
              AllOf(HasSubstr("3:3: if:"), HasSubstr("bool scalar"), HasSubstr("int32")));
  Tensor vector = TensorNode::FromVector<int>({2}, DataType::Bool(), {1, 0});
  EXPECT_THAT(ErrorOf([&] { RunProgram(program, {vector}); }), HasSubstr("Tensor[(2,), bool]"));
}

TEST(Evaluator, LoopByTailRecursion) {
  const std::string program = ReadTestProgram("tail_recursive_loop");
  EXPECT_THAT(Values(RunProgram(program, {I32(10000)})), ElementsAre(5000));
  EXPECT_THAT(Values(RunProgram(program, {I32(0)})), ElementsAre(0));
}

TEST(Evaluator, LoopGrowingATensor) {
  const std::string program = ReadTestProgram("grow_tensor_loop");
  Ref<Object> out = RunProgram(program, {F32({1, 2}, {9, 9})});
  EXPECT_EQ(ShapeOf(out), (Shape{4, 2}));
  EXPECT_THAT(Values(out), ElementsAre(9, 9, 0, 0, 1, 1, 2, 2));
}

TEST(Evaluator, NonTailRecursionTenThousandDeep) {
  const std::string program = ReadTestProgram("non_tail_recursion");
  EXPECT_THAT(Values(RunProgram(program, {I32(10000)}, "count")), ElementsAre(10000));
}

// An unbounded recursion fails with an error naming the call, where it
// would overflow the stack (it did: SIGSEGV), at 100,000 nested calls.
TEST(Evaluator, UnboundedRecursionIsAnError) {
  const std::string program = R"(
def @f(%x: Tensor[(), int32]) -> Tensor[(), int32] { add(@f(%x), 1) }
def @main(%x: Tensor[(), int32]) { @f(%x) }
)";
  EXPECT_THAT(ErrorOf([&] { RunProgram(program, {I32(1)}); }),
              HasSubstr("2:58: calls to @f nest deeper than the evaluator takes (100000 calls, or "
                        "its stack's worth): unbounded recursion?"));
  const std::string counting = ReadTestProgram("non_tail_recursion");
  EXPECT_THAT(Values(RunProgram(counting, {I32(99998)}, "count")), ElementsAre(99998));
}

TEST(Evaluator, MutualRecursion) {
  const std::string program = ReadTestProgram("mutual_recursion");
  ir::IRModule module = Parse(program);
  EXPECT_THAT(Values(Evaluate(module, "even", {I32(10)})), ElementsAre(1));
  EXPECT_THAT(Values(Evaluate(module, "even", {I32(7)})), ElementsAre(0));
  EXPECT_THAT(Values(Evaluate(module, "odd", {I32(10001)})), ElementsAre(1));
}

TEST(Evaluator, TenThousandLets) {
  const std::string program = test::LetChainProgram(10000);
  EXPECT_THAT(Values(RunProgram(program, {F32({}, {0.5f})})), ElementsAre(5000.5));
}

// ---- Closures ---------------------------------------------------------------

TEST(Evaluator, ClosuresCaptureVariables) {
  const std::string program = ReadTestProgram("closures_capture");
  ADT out = RunProgram(program, {F32({}, {1})}).as<ADTNode>();
  ASSERT_TRUE(out);
  EXPECT_THAT(Values(out->field(0)), ElementsAre(3));
  EXPECT_THAT(Values(out->field(1)), ElementsAre(21));
}

TEST(Evaluator, ReturnsClosures) {
  Ref<Object> out = RunProgram(ReadTestProgram("return_closure"), {});
  Closure closure = out.as<ClosureNode>();
  ASSERT_TRUE(closure);
  EXPECT_EQ(closure->function->params.size(), 1u);
}

TEST(Evaluator, RecursiveLetBoundClosure) {
  const ir::IRModule module = test::RecursiveLetClosureModule();
  EXPECT_THAT(Values(Evaluate(module, "main", {I32(10)})), ElementsAre(1024));
}

// ---- ADTs and match -----------------------------------------------------------

TEST(Evaluator, ListMapAndFoldWithClosures) {
  const std::string program = ReadTestProgram("list_map_fold");
  ADT out = RunProgram(program, {F32({}, {10})}).as<ADTNode>();
  ASSERT_TRUE(out);
  EXPECT_THAT(Values(out->field(0)), ElementsAre(100 + 20 + 30));
  EXPECT_THAT(ListHeads(out->field(1)), ElementsAre(100, 20, 30));
}

TEST(Evaluator, ListOfTenThousand) {
  const std::string program = ReadTestProgram("list_range_sum");
  EXPECT_THAT(Values(RunProgram(program, {I32(10000)})), ElementsAre(10000 * 9999));
}

TEST(Evaluator, ConstructorValuesCarryTheirTag) {
  const std::string program = ReadTestProgram("constructor_tags");
  ADT out = RunProgram(program, {F32({}, {2})}).as<ADTNode>();
  ASSERT_TRUE(out);
  EXPECT_EQ(out->field(0).as<ADTNode>()->tag(), 0);
  EXPECT_EQ(out->field(1).as<ADTNode>()->tag(), 1);
  EXPECT_EQ(out->field(2).as<ADTNode>()->tag(), 2);
  EXPECT_EQ(out->field(2).as<ADTNode>()->size(), 0u);
  EXPECT_THAT(Values(out->field(1).as<ADTNode>()->field(0)), ElementsAre(2));
}

TEST(Evaluator, ConstructorsAndGlobalsAsValues) {
  const std::string program = ReadTestProgram("constructors_as_values");
  EXPECT_THAT(Values(RunProgram(program, {})), ElementsAre(2));
}

TEST(Evaluator, MatchAllPatternKinds) {
  const std::string program = ReadTestProgram("match_pattern_kinds");
  ir::IRModule module = Parse(program);
  ir::Constructor cons = module->LookupConstructor("Cons");
  ir::Constructor nil = module->LookupConstructor("Nil");
  auto list = [&](const std::vector<std::pair<int, int>>& pairs) {
    Ref<Object> result = Make<ADTNode>(nil->tag, std::vector<Ref<Object>>{});
    for (auto it = pairs.rbegin(); it != pairs.rend(); ++it) {
      Ref<Object> pair = MakeTuple({I32(it->first), I32(it->second)});
      result = Make<ADTNode>(cons->tag, std::vector<Ref<Object>>{pair, result});
    }
    return result;
  };
  auto classify = [&](const std::vector<std::pair<int, int>>& pairs) {
    return Values(Evaluate(module, "classify", {list(pairs)}));
  };
  EXPECT_THAT(classify({}), ElementsAre(0));
  EXPECT_THAT(classify({{7, 8}}), ElementsAre(7));
  EXPECT_THAT(classify({{7, 8}, {1, 2}}), ElementsAre(108));
  EXPECT_THAT(classify({{7, 8}, {1, 2}, {3, 4}}), ElementsAre(1008));
}

TEST(Evaluator, IncompleteMatchThatFindsNoClause) {
  const std::string program = ReadTestProgram("incomplete_match");
  EXPECT_THAT(ErrorOf([&] { RunProgram(program, {F32({}, {1})}); }),
              HasSubstr("8:3: match: no clause matches value of constructor Nil"));
}

TEST(Evaluator, TuplesAndProjections) {
  Ref<Object> out =
      RunProgram(ReadTestProgram("tuples_and_projections"), {F32({}, {1}), F32({2}, {2, 3})});
  ADT tuple = out.as<ADTNode>();
  ASSERT_TRUE(tuple);
  EXPECT_EQ(tuple->tag(), 0);
  ASSERT_EQ(tuple->size(), 3u);
  EXPECT_THAT(Values(tuple->field(0)), ElementsAre(2, 3));
  EXPECT_THAT(Values(tuple->field(1)), ElementsAre(1));
  EXPECT_EQ(tuple->field(2).as<ADTNode>()->size(), 0u);
}

// ---- Errors -----------------------------------------------------------------

TEST(Evaluator, EntryChecksArguments) {
  const std::string program = ReadTestProgram("entry_checks_arguments");
  ir::IRModule module = Parse(program);
  EXPECT_THAT(ErrorOf([&] {
                Evaluate(module, "main", {F32({3, 2}, {})});
              }),
              HasSubstr("@main expects 2 arguments, got 1"));
  EXPECT_THAT(ErrorOf([&] {
                Evaluate(module, "main", {F32({3, 3}, {}), I32(1)});
              }),
              HasSubstr("@main: parameter %x expects Tensor[(?, 2), float32], got "
                        "Tensor[(3, 3), float32]"));
  EXPECT_THAT(ErrorOf([&] {
                Evaluate(module, "main", {F32({2}, {}), I32(1)});
              }),
              HasSubstr("parameter %x expects Tensor[(?, 2), float32], got Tensor[(2,), float32]"));
  EXPECT_THAT(ErrorOf([&] {
                Evaluate(module, "main", {F32({3, 2}, {}), F32({}, {1})});
              }),
              HasSubstr("parameter %n expects Tensor[(), int32], got Tensor[(), float32]"));
  EXPECT_THAT(ErrorOf([&] {
                Evaluate(module, "main", {MakeTuple({}), I32(1)});
              }),
              HasSubstr("parameter %x expects Tensor[(?, 2), float32], got ()"));
  EXPECT_THAT(ErrorOf([&] { Evaluate(module, "missing", {}); }),
              HasSubstr("undefined global @missing"));
  EXPECT_NO_THROW(Evaluate(module, "main", {F32({7, 2}, {}), I32(1)}));
}

TEST(Evaluator, CallsCheckParameterAnnotations) {
  const std::string program = ReadTestProgram("call_checks_annotations");
  EXPECT_THAT(ErrorOf([&] { RunProgram(program, {F32({3}, {})}); }),
              HasSubstr("5:3: @f: parameter %x expects Tensor[(2,), float32], got "
                        "Tensor[(3,), float32]"));
}

TEST(Evaluator, RuntimeOperatorErrorsNameOpShapesAndLocation) {
  const std::string program = ReadTestProgram("runtime_shape_mismatch");
  const std::string error = ErrorOf([&] {
    RunProgram(program, {F32({3, 2}, {}), F32({4, 2}, {})});
  });
  EXPECT_THAT(error, AllOf(HasSubstr("4:3: add"), HasSubstr("3"), HasSubstr("4")));
}

TEST(Evaluator, ErrorsInsideCalledFunctionsPointAtTheFailingOp) {
  const std::string program = ReadTestProgram("error_in_callee");
  EXPECT_THAT(ErrorOf([&] {
                RunProgram(program, {F32({2}, {}), F32({3}, {})});
              }),
              HasSubstr("3:3: subtract"));
}

TEST(Evaluator, OperatorArgumentsMustBeTensors) {
  EXPECT_THAT(ErrorOf([&] { RunProgram(ReadTestProgram("operator_on_closure"), {}); }),
              HasSubstr("2:3: add: "));
}

TEST(Evaluator, CallingANonFunctionFails) {
  EXPECT_THAT(ErrorOf([&] { RunProgram(ReadTestProgram("call_non_function"), {F32({}, {1})}); }),
              HasSubstr("1:17: cannot call Tensor[(), float32]"));
  EXPECT_THAT(ErrorOf([&] {
                RunProgram(ReadTestProgram("call_wrong_arity"),
                           {RunProgram(ReadTestProgram("return_closure"), {})});
              }),
              HasSubstr("expects 1 argument, got 2"));
}

}  // namespace
}  // namespace nimble::eval
