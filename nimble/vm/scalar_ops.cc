#include "nimble/vm/scalar_ops.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <string>

#include "nimble/vm/error.h"
#include "nimble/vm/kernels/elemwise_functions.h"
#include "nimble/vm/kernels/transform_rules.h"

namespace nimble::vm {
namespace {

[[noreturn]] void Fail(ScalarOperator op, const std::string& problem) {
  throw Error(std::string("scalar ") + ScalarOperatorName(op) + ": " + problem);
}

// Calls fn(T{}) with T the element type of a scalar dtype.
template <typename Fn>
void DispatchScalarDType(ScalarOperator op, DataType dtype, const Fn& fn) {
  if (dtype == DataType::Bool()) return fn(bool{});
  if (dtype == DataType::Int8()) return fn(int8_t{});
  if (dtype == DataType::Int32()) return fn(int32_t{});
  if (dtype == DataType::Int64()) return fn(int64_t{});
  Fail(op,
       "operands of dtype " + dtype.name() + " (scalar operands are int8, int32, int64 or bool)");
}

// Throws unless `operand` is a CPU tensor of `rank` and, when given, `dtype`.
void CheckOperand(ScalarOperator op, const char* which, const TensorNode& operand, int64_t rank,
                  std::optional<DataType> dtype) {
  if (operand.device().type != DeviceType::kCPU) {
    Fail(op, std::string(which) + " is on " + operand.device().ToString() + ", not the CPU");
  }
  if (operand.ndim() != rank || (dtype && operand.dtype() != *dtype)) {
    Fail(op, std::string(which) + " is a " + operand.TypeString() + ", expected " +
                 (rank == 0 ? "a scalar" : "a 1-D tensor") +
                 (dtype ? " of " + dtype->name() : std::string(" of an integer dtype")));
  }
  if (!dtype && !IsScalarDType(operand.dtype())) {
    Fail(op,
         std::string(which) + " is a " + operand.TypeString() + ", expected an integer or bool");
  }
}

template <typename Fn>
void Unary(ScalarOperator op, const Fn& fn, DataType dtype, const TensorNode& lhs, void* out) {
  CheckOperand(op, "the operand", lhs, 0, dtype);
  DispatchScalarDType(op, dtype, [&](auto tag) {
    using C = decltype(tag);
    if constexpr (ElementInClass<C>(Fn::kAccepts)) {
      *static_cast<elemwise::ResultOf<Fn, C>*>(out) = fn(*lhs.data<C>());
    } else {
      Fail(op, "not defined on " + dtype.name());
    }
  });
}

template <typename Fn>
void Binary(ScalarOperator op, const Fn& fn, DataType dtype, const TensorNode& lhs,
            const TensorNode* rhs, int64_t rhs_value, void* out) {
  CheckOperand(op, "the first operand", lhs, 0, dtype);
  if (rhs) CheckOperand(op, "the second operand", *rhs, 0, dtype);
  DispatchScalarDType(op, dtype, [&](auto tag) {
    using C = decltype(tag);
    if constexpr (ElementInClass<C>(Fn::kAccepts)) {
      const C b = rhs ? *rhs->data<C>() : static_cast<C>(rhs_value);
      *static_cast<elemwise::ResultOf<Fn, C>*>(out) = fn(*lhs.data<C>(), b);
    } else {
      Fail(op, "not defined on " + dtype.name());
    }
  });
}

void Take(ScalarOperator op, DataType dtype, const TensorNode& data, const TensorNode* index_tensor,
          int64_t index_value, void* out) {
  CheckOperand(op, "the data", data, 1, dtype);
  int64_t index = index_value;
  if (index_tensor) {
    CheckOperand(op, "the index", *index_tensor, 0, std::nullopt);
    index = index_tensor->GetAsInt64(0);
  }
  const transform::TakeMode mode = op == ScalarOperator::kTakeClip   ? transform::TakeMode::kClip
                                   : op == ScalarOperator::kTakeWrap ? transform::TakeMode::kWrap
                                                                     : transform::TakeMode::kFast;
  const std::optional<int64_t> row = transform::TakeRow(index, data.shape()[0], mode);
  if (!row) {
    Fail(op, "index " + std::to_string(index) + " is out of range for a " + data.TypeString());
  }
  const size_t bytes = dtype.bytes();
  std::memcpy(out, static_cast<const std::byte*>(data.raw_data()) + *row * bytes, bytes);
}

}  // namespace

DataType ScalarResultDType(ScalarOperator op, DataType dtype) {
  switch (op) {
    case ScalarOperator::kEqual:
    case ScalarOperator::kNotEqual:
    case ScalarOperator::kLess:
    case ScalarOperator::kLessEqual:
    case ScalarOperator::kGreater:
    case ScalarOperator::kGreaterEqual:
      return DataType::Bool();
    default:
      return dtype;
  }
}

void EvaluateScalar(ScalarOperator op, DataType dtype, const TensorNode& lhs, const TensorNode* rhs,
                    int64_t rhs_value, void* out) {
  using namespace elemwise;
  using S = ScalarOperator;
  switch (op) {
    case S::kAdd:
      return Binary(op, Add(), dtype, lhs, rhs, rhs_value, out);
    case S::kSubtract:
      return Binary(op, Subtract(), dtype, lhs, rhs, rhs_value, out);
    case S::kMultiply:
      return Binary(op, Multiply(), dtype, lhs, rhs, rhs_value, out);
    case S::kDivide:
      return Binary(op, Divide(), dtype, lhs, rhs, rhs_value, out);
    case S::kMaximum:
      return Binary(op, Maximum(), dtype, lhs, rhs, rhs_value, out);
    case S::kMinimum:
      return Binary(op, Minimum(), dtype, lhs, rhs, rhs_value, out);
    case S::kEqual:
      return Binary(op, Comparison<std::equal_to<>>(), dtype, lhs, rhs, rhs_value, out);
    case S::kNotEqual:
      return Binary(op, Comparison<std::not_equal_to<>>(), dtype, lhs, rhs, rhs_value, out);
    case S::kLess:
      return Binary(op, Comparison<std::less<>>(), dtype, lhs, rhs, rhs_value, out);
    case S::kLessEqual:
      return Binary(op, Comparison<std::less_equal<>>(), dtype, lhs, rhs, rhs_value, out);
    case S::kGreater:
      return Binary(op, Comparison<std::greater<>>(), dtype, lhs, rhs, rhs_value, out);
    case S::kGreaterEqual:
      return Binary(op, Comparison<std::greater_equal<>>(), dtype, lhs, rhs, rhs_value, out);
    case S::kLogicalAnd:
      return Binary(op, LogicalAnd(), dtype, lhs, rhs, rhs_value, out);
    case S::kLogicalOr:
      return Binary(op, LogicalOr(), dtype, lhs, rhs, rhs_value, out);
    case S::kNegative:
      return Unary(op, Negative(), dtype, lhs, out);
    case S::kLogicalNot:
      return Unary(op, elemwise::LogicalNot(), dtype, lhs, out);
    case S::kCast: {
      CheckOperand(op, "the operand", lhs, 0, std::nullopt);
      const int64_t value = lhs.GetAsInt64(0);
      return DispatchScalarDType(op, dtype, [&](auto tag) {
        using T = decltype(tag);
        *static_cast<T*>(out) = ConvertElement<T>(value);
      });
    }
    case S::kTakeClip:
    case S::kTakeWrap:
    case S::kTakeFast:
      return Take(op, dtype, lhs, rhs, rhs_value, out);
  }
  throw Error("scalar: unknown operator " + std::to_string(static_cast<int>(op)));
}

Tensor ScalarTensorCache::Get(DataType dtype, std::span<const int64_t> shape) {
  // A few probes find a free tensor in a loop, where the last iteration's
  // values have just died; in a deep recursion, where every frame keeps its
  // own, they fail fast and a new tensor takes the slot's place.
  constexpr size_t kProbes = 4;
  constexpr size_t kTensorsPerSlot = 16;
  Slot& slot = SlotFor(dtype, shape);
  const size_t probes = std::min(kProbes, slot.tensors.size());
  for (size_t probe = 0; probe < probes; ++probe) {
    const Tensor& candidate = slot.tensors[slot.next];
    slot.next = (slot.next + 1) % slot.tensors.size();
    // Held only here, and no view shares its storage.
    if (candidate->use_count() == 1 && candidate->storage()->use_count() == 1) {
      // The last holder's reads happen before this reuse writes.
      std::atomic_thread_fence(std::memory_order_acquire);
      return candidate;
    }
  }
  Tensor fresh = Make<TensorNode>(StorageNode::Allocate(Device{}, ShapeBytes(shape, dtype)), 0,
                                  Shape(shape.begin(), shape.end()), dtype);
  if (slot.tensors.size() < kTensorsPerSlot) {
    slot.tensors.push_back(fresh);
  } else {
    slot.tensors[slot.next] = fresh;
  }
  return fresh;
}

ScalarTensorCache::Slot& ScalarTensorCache::SlotFor(DataType dtype,
                                                    std::span<const int64_t> shape) {
  for (Slot& slot : slots_) {
    if (slot.dtype == dtype && std::ranges::equal(slot.shape, shape)) return slot;
  }
  slots_.push_back(Slot{dtype, Shape(shape.begin(), shape.end()), {}, 0});
  return slots_.back();
}

}  // namespace nimble::vm
