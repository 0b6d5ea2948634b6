#include "tests/compiler/tir/interpreter.h"

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"

namespace nimble::tir::testing {
namespace {

// A scalar of the loop IR: `i` for integer and bool dtypes (in the dtype's
// range), `f` for floats (a value of the dtype).
struct Value {
  int64_t i = 0;
  double f = 0;
};

Value Int(int64_t i) {
  return Value{.i = i, .f = 0};
}
Value Float(double f) {
  return Value{.i = 0, .f = f};
}

[[noreturn]] void Fail(const std::string& what) {
  throw Error("tir interpreter: " + what);
}

double Round(double value, DataType dtype) {
  if (dtype.bits() == 32) return static_cast<float>(value);
  if (dtype.bits() == 64) return value;
  Fail("no arithmetic in " + dtype.name());
}

// Calls fn(T{}) with T the element type of `dtype`; float16 and bfloat16 have
// none here.
template <typename Fn>
Value WithElementType(DataType dtype, const Fn& fn) {
  return DispatchDType(dtype, [&](auto tag) -> Value {
    if constexpr (kIsFloatBits<decltype(tag)>) {
      Fail(dtype.name() + " is not interpreted");
    } else {
      return fn(tag);
    }
  });
}

template <typename T>
T ToElement(const Value& value) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(value.f);
  } else {
    return static_cast<T>(value.i);
  }
}

template <typename T>
Value FromElement(T element) {
  if constexpr (std::is_floating_point_v<T>) {
    return Float(element);
  } else {
    return Int(static_cast<int64_t>(element));
  }
}

Value Convert(const Value& value, DataType from, DataType to) {
  return WithElementType(from, [&](auto from_tag) {
    using From = decltype(from_tag);
    return WithElementType(to, [&](auto to_tag) {
      return FromElement(ConvertElement<decltype(to_tag)>(ToElement<From>(value)));
    });
  });
}

double Math(Intrinsic intrinsic, double x, double y) {
  switch (intrinsic) {
    case Intrinsic::kExp:
      return std::exp(x);
    case Intrinsic::kLog:
      return std::log(x);
    case Intrinsic::kSqrt:
      return std::sqrt(x);
    case Intrinsic::kRsqrt:
      return 1 / std::sqrt(x);
    case Intrinsic::kTanh:
      return std::tanh(x);
    case Intrinsic::kSigmoid:
      return 1 / (1 + std::exp(-x));
    case Intrinsic::kErf:
      return std::erf(x);
    case Intrinsic::kErfc:
      return std::erfc(x);
    case Intrinsic::kAbs:
      return std::fabs(x);
    case Intrinsic::kRound:
      return std::nearbyint(x);
    case Intrinsic::kFloor:
      return std::floor(x);
    case Intrinsic::kCeil:
      return std::ceil(x);
    case Intrinsic::kPow:
      return std::pow(x, y);
    case Intrinsic::kFmod:
      return std::fmod(x, y);
    case Intrinsic::kCheckIndex:
    case Intrinsic::kBlockSum:
    case Intrinsic::kBlockProd:
    case Intrinsic::kBlockMax:
    case Intrinsic::kBlockMin:
      break;
  }
  Fail("unknown intrinsic");
}

struct BufferData {
  std::byte* data;
  int64_t size;  // in elements
};

// A load or store of a shared buffer by one thread of a block.
struct SharedAccess {
  const BufferNode* buffer;
  int64_t index;
  bool write;
};

// Between two barriers no thread may touch a shared element another thread
// writes: `accesses` holds each thread's since the last barrier. The first
// such element, described, or empty.
std::string FindRace(const std::vector<std::vector<SharedAccess>>& accesses) {
  // Per element: a thread that wrote it, and a thread that touched it.
  struct Touch {
    int64_t writer = -1, toucher = -1;
  };
  std::map<std::pair<const BufferNode*, int64_t>, Touch> touches;
  for (size_t t = 0; t < accesses.size(); ++t) {
    const auto thread = static_cast<int64_t>(t);
    for (const SharedAccess& access : accesses[t]) {
      Touch& touch = touches[{access.buffer, access.index}];
      const int64_t other = access.write ? touch.toucher : touch.writer;
      if (other >= 0 && other != thread) {
        return "threads " + std::to_string(other) + " and " + std::to_string(thread) +
               " of a block touch shared " + access.buffer->name + "[" +
               std::to_string(access.index) + "] between two barriers, and one writes it";
      }
      if (access.write) touch.writer = thread;
      touch.toucher = thread;
    }
  }
  return "";
}

// What a block's barrier runs once all its threads have arrived, before any
// leaves: the race check of the accesses since the last barrier.
struct RaceCheck {
  std::vector<std::vector<SharedAccess>>* accesses;
  std::string* race;
  void operator()() noexcept {
    if (race->empty()) *race = FindRace(*accesses);
    for (std::vector<SharedAccess>& thread : *accesses) thread.clear();
  }
};
using BlockBarrier = std::barrier<RaceCheck>;

class Interpreter {
 public:
  void Run(const PrimFunc& func, std::span<const Tensor> args) {
    if (args.size() != func.params.size()) {
      Fail(func.name + " takes " + std::to_string(func.params.size()) + " arguments, got " +
           std::to_string(args.size()));
    }
    for (size_t p = 0; p < args.size(); ++p) {
      const Buffer& buffer = func.params[p];
      const Tensor& arg = args[p];
      const std::string what =
          func.name + " argument " + std::to_string(p) + " (" + buffer->name + ")";
      if (!(arg->device() == Device{})) Fail(what + " is not on the CPU");
      if (arg->dtype() != buffer->dtype) {
        Fail(what + " is " + arg->dtype().name() + ", expected " + buffer->dtype.name());
      }
      if (arg->shape().size() != buffer->shape.size()) {
        Fail(what + " has rank " + std::to_string(arg->shape().size()) + ", expected " +
             std::to_string(buffer->shape.size()));
      }
      for (size_t d = 0; d < buffer->shape.size(); ++d) {
        const Expr& dim = buffer->shape[d];
        const int64_t size = arg->shape()[d];
        if (dim->kind == ExprKind::kVar && !vars_.count(static_cast<const VarNode*>(dim.get()))) {
          Bind(std::static_pointer_cast<const VarNode>(dim), Int(size));
        } else if (Eval(dim).i != size) {
          throw Error(what + " dimension " + std::to_string(d) + " is " + std::to_string(size) +
                      ", expected " + std::to_string(Eval(dim).i));
        }
      }
      buffers_[buffer.get()] = {static_cast<std::byte*>(arg->raw_data()), arg->numel()};
    }
    Exec(func.body);
  }

 private:
  void Bind(const Var& var, Value value) {
    if (!vars_.emplace(var.get(), value).second) Fail("variable " + var->name + " is bound twice");
  }

  std::byte* Address(const Buffer& buffer, const Expr& index_expr, bool write) {
    const auto found = buffers_.find(buffer.get());
    if (found == buffers_.end()) Fail("buffer " + buffer->name + " is not live");
    const int64_t index = Eval(index_expr).i;
    if (index < 0 || index >= found->second.size) {
      Fail("index " + std::to_string(index) + " out of bounds of " + buffer->name + " (" +
           std::to_string(found->second.size) + " elements)");
    }
    if (shared_accesses_ && buffer->scope == MemoryScope::kGpuShared) {
      shared_accesses_->push_back({buffer.get(), index, write});
    }
    return found->second.data + index * static_cast<int64_t>(buffer->dtype.bytes());
  }

  void Exec(const Stmt& stmt) {
    switch (stmt->kind) {
      case StmtKind::kFor: {
        const auto& node = static_cast<const ForNode&>(*stmt);
        if (node.for_kind == ForKind::kGpuBlockThreads) return RunBlockThreads(node);
        const int64_t extent = Eval(node.extent).i;
        if (node.for_kind == ForKind::kParallel && Eval(node.min_chunk).i < 1) {
          Fail("parallel loop " + node.var->name + " has a chunk below 1");
        }
        const bool reverse = node.for_kind == ForKind::kParallel;
        for (int64_t k = 0; k < extent; ++k) {
          Bind(node.var, Int(reverse ? extent - 1 - k : k));
          Exec(node.body);
          vars_.erase(node.var.get());
        }
        return;
      }
      case StmtKind::kStore: {
        const auto& node = static_cast<const StoreNode&>(*stmt);
        std::byte* address = Address(node.buffer, node.index, /*write=*/true);
        const Value value = Eval(node.value);
        WithElementType(node.buffer->dtype, [&](auto tag) {
          const auto element = ToElement<decltype(tag)>(value);
          std::memcpy(address, &element, sizeof(element));
          return value;
        });
        return;
      }
      case StmtKind::kLet: {
        const auto& node = static_cast<const LetNode&>(*stmt);
        Bind(node.var, Eval(node.value));
        Exec(node.body);
        vars_.erase(node.var.get());
        return;
      }
      case StmtKind::kIf: {
        const auto& node = static_cast<const IfNode&>(*stmt);
        if (Eval(node.condition).i) {
          Exec(node.then_case);
        } else if (node.else_case) {
          Exec(node.else_case);
        }
        return;
      }
      case StmtKind::kSeq:
        for (const Stmt& inner : static_cast<const SeqNode&>(*stmt).stmts) Exec(inner);
        return;
      case StmtKind::kAllocate: {
        const auto& node = static_cast<const AllocateNode&>(*stmt);
        if (node.buffer->scope == MemoryScope::kGpuShared && barrier_) {
          Fail("shared buffer " + node.buffer->name + " is allocated by one thread of its block");
        }
        int64_t size = 1;
        for (const Expr& extent : node.buffer->shape) size *= Eval(extent).i;
        if (size < 0) Fail("buffer " + node.buffer->name + " has a negative size");
        std::vector<std::byte> storage(static_cast<size_t>(size) * node.buffer->dtype.bytes());
        if (!buffers_.emplace(node.buffer.get(), BufferData{storage.data(), size}).second) {
          Fail("buffer " + node.buffer->name + " is allocated twice");
        }
        Exec(node.body);
        buffers_.erase(node.buffer.get());
        return;
      }
      case StmtKind::kAssert: {
        const auto& node = static_cast<const AssertNode&>(*stmt);
        if (!Eval(node.condition).i) throw Error(node.message);
        Exec(node.body);
        return;
      }
      case StmtKind::kBarrier:
        if (!barrier_) Fail("a barrier outside a gpu_block_threads loop");
        barrier_->arrive_and_wait();
        return;
    }
    Fail("unknown statement");
  }

  // Each iteration on a thread of its own, as the GPU runs them: the
  // iterations share this block's buffers, each keeps its own variables and
  // allocations, and they meet at each barrier, where their shared-memory
  // accesses since the last one are checked for a race (FindRace). One that
  // fails leaves the barrier's count, so that the others run on; its error
  // is thrown here.
  void RunBlockThreads(const ForNode& node) {
    if (barrier_) Fail("gpu_block_threads loop " + node.var->name + " inside another");
    const int64_t extent = Eval(node.extent).i;
    std::vector<std::vector<SharedAccess>> accesses(static_cast<size_t>(extent));
    std::string race;
    BlockBarrier barrier(extent, RaceCheck{&accesses, &race});
    std::mutex failure_mutex;
    std::exception_ptr failure;
    std::vector<std::thread> threads;
    for (int64_t t = 0; t < extent; ++t) {
      threads.emplace_back([&, t, thread = *this]() mutable {
        try {
          thread.barrier_ = &barrier;
          thread.shared_accesses_ = &accesses[static_cast<size_t>(t)];
          thread.Bind(node.var, Int(t));
          thread.Exec(node.body);
          barrier.arrive_and_drop();
        } catch (...) {
          barrier.arrive_and_drop();
          const std::lock_guard lock(failure_mutex);
          if (!failure) failure = std::current_exception();
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    if (failure) std::rethrow_exception(failure);
    if (race.empty()) race = FindRace(accesses);
    if (!race.empty()) Fail(race);
  }

  Value Eval(const Expr& expr) {
    const DataType dtype = expr->dtype;
    switch (expr->kind) {
      case ExprKind::kIntImm:
        return Int(static_cast<const IntImmNode&>(*expr).value);
      case ExprKind::kFloatImm:
        return Float(Round(static_cast<const FloatImmNode&>(*expr).value, dtype));
      case ExprKind::kVar: {
        const auto found = vars_.find(static_cast<const VarNode*>(expr.get()));
        if (found == vars_.end())
          Fail("unbound variable " + static_cast<const VarNode&>(*expr).name);
        return found->second;
      }
      case ExprKind::kBinary: {
        const auto& node = static_cast<const BinaryNode&>(*expr);
        return Binary(node.op, dtype, Eval(node.a), Eval(node.b));
      }
      case ExprKind::kCompare: {
        const auto& node = static_cast<const CompareNode&>(*expr);
        const Value a = Eval(node.a), b = Eval(node.b);
        return node.a->dtype.is_float() ? Int(Compare(node.op, a.f, b.f))
                                        : Int(Compare(node.op, a.i, b.i));
      }
      case ExprKind::kLogical: {
        const auto& node = static_cast<const LogicalNode&>(*expr);
        const bool a = Eval(node.a).i != 0, b = Eval(node.b).i != 0;
        return Int(node.op == LogicalOp::kAnd ? a && b : a || b);
      }
      case ExprKind::kNot:
        return Int(Eval(static_cast<const NotNode&>(*expr).a).i == 0);
      case ExprKind::kSelect: {
        const auto& node = static_cast<const SelectNode&>(*expr);
        // Only the side taken, as code generation evaluates a load there.
        return Eval(node.condition).i ? Eval(node.true_value) : Eval(node.false_value);
      }
      case ExprKind::kCast: {
        const auto& value = static_cast<const CastNode&>(*expr).value;
        return Convert(Eval(value), value->dtype, dtype);
      }
      case ExprKind::kCall: {
        const auto& node = static_cast<const CallNode&>(*expr);
        // A block of one thread: its combine over the block is its value,
        // and its gpu_block_stride loops run every iteration.
        if (node.intrinsic == Intrinsic::kBlockSum || node.intrinsic == Intrinsic::kBlockProd ||
            node.intrinsic == Intrinsic::kBlockMax || node.intrinsic == Intrinsic::kBlockMin) {
          return Eval(node.args[0]);
        }
        if (node.intrinsic == Intrinsic::kCheckIndex) {
          const int64_t index = Eval(node.args[0]).i;
          if (index < 0 || index >= Eval(node.args[1]).i) Fail("an index is out of range");
          return Int(index);
        }
        if (!dtype.is_float()) Fail(IntrinsicName(node.intrinsic) + " of " + dtype.name());
        const double x = Eval(node.args[0]).f;
        const double y = node.args.size() > 1 ? Eval(node.args[1]).f : 0;
        return Float(Round(Math(node.intrinsic, x, y), dtype));
      }
      case ExprKind::kLoad: {
        const auto& node = static_cast<const LoadNode&>(*expr);
        const std::byte* address = Address(node.buffer, node.index, /*write=*/false);
        return WithElementType(dtype, [&](auto tag) {
          decltype(tag) element;
          std::memcpy(&element, address, sizeof(element));
          return FromElement(element);
        });
      }
      case ExprKind::kTensorRead:
      case ExprKind::kReduce:
        break;
    }
    Fail("a tensor expression left in the loop IR");
  }

  template <typename T>
  static bool Compare(CompareOp op, T a, T b) {
    switch (op) {
      case CompareOp::kEq:
        return a == b;
      case CompareOp::kNe:
        return a != b;
      case CompareOp::kLt:
        return a < b;
      case CompareOp::kLe:
        return a <= b;
      case CompareOp::kGt:
        return a > b;
      case CompareOp::kGe:
        return a >= b;
    }
    Fail("unknown comparison");
  }

  static Value Binary(BinaryOp op, DataType dtype, Value a, Value b) {
    if (dtype.is_float()) {
      switch (op) {
        case BinaryOp::kAdd:
          return Float(Round(a.f + b.f, dtype));
        case BinaryOp::kSub:
          return Float(Round(a.f - b.f, dtype));
        case BinaryOp::kMul:
          return Float(Round(a.f * b.f, dtype));
        case BinaryOp::kDiv:
          return Float(Round(a.f / b.f, dtype));
        // maximum's and minimum's (elemwise_functions.h): a NaN a wins.
        case BinaryOp::kMin:
          return std::isnan(a.f) || a.f < b.f ? a : b;
        case BinaryOp::kMax:
          return std::isnan(a.f) || a.f > b.f ? a : b;
        case BinaryOp::kFloorDiv:
        case BinaryOp::kFloorMod:
          Fail(BinaryOpName(op) + " of " + dtype.name());
      }
    }
    if (dtype.is_bool()) Fail(BinaryOpName(op) + " of bool");
    const auto x = static_cast<uint64_t>(a.i), y = static_cast<uint64_t>(b.i);
    switch (op) {
      case BinaryOp::kAdd:
        return Int(WrapToDType(static_cast<int64_t>(x + y), dtype));
      case BinaryOp::kSub:
        return Int(WrapToDType(static_cast<int64_t>(x - y), dtype));
      case BinaryOp::kMul:
        return Int(WrapToDType(static_cast<int64_t>(x * y), dtype));
      case BinaryOp::kDiv:
        if (b.i == 0) Fail("integer division by zero");
        return Int(WrapToDType(b.i == -1 ? static_cast<int64_t>(0 - x) : a.i / b.i, dtype));
      case BinaryOp::kFloorDiv:
        if (b.i == 0) Fail("integer division by zero");
        return Int(WrapToDType(FloorDivide(a.i, b.i), dtype));
      case BinaryOp::kFloorMod:
        if (b.i == 0) Fail("integer division by zero");
        return Int(WrapToDType(
            static_cast<int64_t>(x - static_cast<uint64_t>(FloorDivide(a.i, b.i)) * y), dtype));
      case BinaryOp::kMin:
        return Int(std::min(a.i, b.i));
      case BinaryOp::kMax:
        return Int(std::max(a.i, b.i));
    }
    Fail("unknown binary operation");
  }

  std::map<const VarNode*, Value> vars_;
  std::map<const BufferNode*, BufferData> buffers_;
  // In a gpu_block_threads iteration: its block's barrier, and where its
  // shared-memory accesses since the last one go.
  BlockBarrier* barrier_ = nullptr;
  std::vector<SharedAccess>* shared_accesses_ = nullptr;
};

}  // namespace

void Interpret(const PrimFunc& func, std::span<const Tensor> args) {
  Interpreter().Run(func, args);
}

}  // namespace nimble::tir::testing
