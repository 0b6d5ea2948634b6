#include "nimble/vm/scalar_ops.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "nimble/vm/error.h"

namespace nimble::vm {
namespace {

using S = ScalarOperator;

template <typename T>
Tensor Scalar(DataType dtype, T value) {
  return TensorNode::Scalar<T>(dtype, value);
}

// `op` on lhs and rhs (or the immediate) as the VM computes it, read as int64.
int64_t Evaluate(S op, DataType dtype, const Tensor& lhs, const Tensor& rhs,
                 int64_t immediate = 0) {
  const Tensor out = TensorNode::Empty({}, ScalarResultDType(op, dtype));
  EvaluateScalar(op, dtype, *lhs, rhs.get(), immediate, out->raw_data());
  return out->GetAsInt64(0);
}

// The message of the nimble::Error that `fn` throws, or "" when it throws none.
template <typename Fn>
std::string ErrorOf(const Fn& fn) {
  try {
    fn();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(ScalarOpsTest, ArithmeticWrapsInItsDType) {
  const DataType i32 = DataType::Int32();
  const int32_t max = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(Evaluate(S::kAdd, i32, Scalar(i32, max), Scalar(i32, 1)),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(Evaluate(S::kSubtract, i32, Scalar(i32, 3), nullptr, 5), -2);
  EXPECT_EQ(Evaluate(S::kMultiply, i32, Scalar(i32, 65536), Scalar(i32, 65536)), 0);
  EXPECT_EQ(Evaluate(S::kNegative, i32, Scalar(i32, std::numeric_limits<int32_t>::min()), nullptr),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(
      Evaluate(S::kMaximum, DataType::Int64(), Scalar<int64_t>(DataType::Int64(), -7), nullptr, -9),
      -7);
  EXPECT_EQ(Evaluate(S::kMinimum, DataType::Int8(), Scalar<int8_t>(DataType::Int8(), 100),
                     Scalar<int8_t>(DataType::Int8(), -100)),
            -100);
}

TEST(ScalarOpsTest, DivideTruncatesAndRejectsZero) {
  const DataType i64 = DataType::Int64();
  EXPECT_EQ(Evaluate(S::kDivide, i64, Scalar<int64_t>(i64, -7), nullptr, 2), -3);
  EXPECT_EQ(Evaluate(S::kDivide, i64, Scalar<int64_t>(i64, std::numeric_limits<int64_t>::min()),
                     nullptr, -1),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(
      ErrorOf([&] { Evaluate(S::kDivide, i64, Scalar<int64_t>(i64, 1), Scalar<int64_t>(i64, 0)); }),
      "divide: division by zero");
}

TEST(ScalarOpsTest, ComparisonsAndLogicGiveBool) {
  const DataType i32 = DataType::Int32();
  const DataType b = DataType::Bool();
  EXPECT_EQ(ScalarResultDType(S::kLess, i32), b);
  EXPECT_EQ(ScalarResultDType(S::kAdd, i32), i32);
  EXPECT_EQ(Evaluate(S::kLess, i32, Scalar(i32, 3), Scalar(i32, 4)), 1);
  EXPECT_EQ(Evaluate(S::kLess, i32, Scalar(i32, 4), Scalar(i32, 4)), 0);
  EXPECT_EQ(Evaluate(S::kLessEqual, i32, Scalar(i32, 4), nullptr, 4), 1);
  EXPECT_EQ(Evaluate(S::kGreater, i32, Scalar(i32, -1), nullptr, 0), 0);
  EXPECT_EQ(Evaluate(S::kGreaterEqual, i32, Scalar(i32, 0), nullptr, 0), 1);
  EXPECT_EQ(Evaluate(S::kEqual, i32, Scalar(i32, 2), nullptr, 2), 1);
  EXPECT_EQ(Evaluate(S::kNotEqual, i32, Scalar(i32, 2), nullptr, 2), 0);
  EXPECT_EQ(Evaluate(S::kLogicalAnd, b, Scalar(b, true), Scalar(b, false)), 0);
  EXPECT_EQ(Evaluate(S::kLogicalOr, b, Scalar(b, true), nullptr, 0), 1);
  EXPECT_EQ(Evaluate(S::kLogicalNot, b, Scalar(b, false), nullptr), 1);
}

TEST(ScalarOpsTest, CastConvertsFromAnyIntegerOrBool) {
  EXPECT_EQ(Evaluate(S::kCast, DataType::Int32(),
                     Scalar<int64_t>(DataType::Int64(), (int64_t{1} << 32) + 5), nullptr),
            5);
  EXPECT_EQ(Evaluate(S::kCast, DataType::Bool(), Scalar<int32_t>(DataType::Int32(), -3), nullptr),
            1);
  EXPECT_EQ(Evaluate(S::kCast, DataType::Int64(), Scalar(DataType::Bool(), true), nullptr), 1);
}

TEST(ScalarOpsTest, TakeReadsOneElementByMode) {
  const DataType i32 = DataType::Int32();
  const Tensor shape = TensorNode::FromVector<int32_t>({3}, i32, {7, 8, 9});
  EXPECT_EQ(Evaluate(S::kTakeClip, i32, shape, nullptr, 1), 8);
  EXPECT_EQ(Evaluate(S::kTakeClip, i32, shape, nullptr, 10), 9);
  EXPECT_EQ(Evaluate(S::kTakeClip, i32, shape, nullptr, -4), 7);
  EXPECT_EQ(Evaluate(S::kTakeWrap, i32, shape, Scalar<int64_t>(DataType::Int64(), -1)), 9);
  EXPECT_EQ(Evaluate(S::kTakeFast, i32, shape, Scalar<int8_t>(DataType::Int8(), 2)), 9);
  EXPECT_EQ(ErrorOf([&] { Evaluate(S::kTakeFast, i32, shape, nullptr, 3); }),
            "scalar take.fast: index 3 is out of range for a Tensor[(3,), int32]");
  // Every index is out of range of an empty tensor, whatever the mode.
  EXPECT_THROW(Evaluate(S::kTakeClip, i32, TensorNode::Empty({0}, i32), nullptr, 0), Error);
}

TEST(ScalarOpsTest, OperandsOfTheWrongKindAreErrorsNamingTheOperator) {
  const DataType i32 = DataType::Int32();
  EXPECT_EQ(ErrorOf([&] {
              Evaluate(S::kAdd, i32, Scalar(i32, 1), Scalar<int64_t>(DataType::Int64(), 1));
            }),
            "scalar add: the second operand is a Tensor[(), int64], expected a scalar of int32");
  EXPECT_EQ(
      ErrorOf([&] {
        Evaluate(S::kLess, i32, TensorNode::FromVector<int32_t>({2}, i32, {1, 2}), nullptr, 0);
      }),
      "scalar less: the first operand is a Tensor[(2,), int32], expected a scalar of int32");
  EXPECT_EQ(ErrorOf([&] {
              Evaluate(S::kAdd, DataType::Bool(), Scalar(DataType::Bool(), true), nullptr, 1);
            }),
            "scalar add: not defined on bool");
  EXPECT_THROW(
      Evaluate(S::kAdd, DataType::Float32(), Scalar(DataType::Float32(), 1.0f), nullptr, 1), Error);
}

TEST(ScalarTensorCacheTest, HandsOutATensorAgainOnceNobodyHoldsIt) {
  ScalarTensorCache cache;
  Tensor first = cache.Get(DataType::Int32(), {});
  EXPECT_EQ(first->ndim(), 0);
  EXPECT_EQ(first->dtype(), DataType::Int32());
  TensorNode* const address = first.get();
  // Held: a second request gets another tensor.
  const Tensor second = cache.Get(DataType::Int32(), {});
  EXPECT_NE(second.get(), address);
  first = nullptr;
  EXPECT_EQ(cache.Get(DataType::Int32(), {}).get(), address);
  // Shapes and dtypes do not mix.
  const Tensor shape = cache.Get(DataType::Int64(), Shape{3});
  EXPECT_EQ(shape->shape(), Shape({3}));
  EXPECT_EQ(shape->dtype(), DataType::Int64());
}

TEST(ScalarTensorCacheTest, NeverReusesATensorWhoseStorageIsViewed) {
  ScalarTensorCache cache;
  Tensor scalar = cache.Get(DataType::Int64(), Shape{1});
  const Tensor view = scalar->View({});
  TensorNode* const address = scalar.get();
  scalar = nullptr;
  for (int i = 0; i < 8; ++i) EXPECT_NE(cache.Get(DataType::Int64(), Shape{1}).get(), address);
}

}  // namespace
}  // namespace nimble::vm
