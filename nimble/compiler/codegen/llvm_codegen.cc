#include "nimble/compiler/codegen/llvm_codegen.h"

#include <dlpack/dlpack.h>
#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/OptimizationLevel.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "nimble/compiler/tir/printer.h"
#include "nimble/vm/dlpack.h"
#include "nimble/vm/error.h"

namespace nimble::codegen {
namespace {

using llvm::Value;

// Temporaries of a constant size up to this many bytes live on the stack.
constexpr int64_t kMaxStackBytes = 64 * 1024;

// DLTensor (dlpack.h) as LLVM sees it, its nested structs flattened; the
// layout is the same on every LP64 target.
enum DLTensorField : unsigned {
  kData,
  kDeviceType,
  kDeviceId,
  kNdim,
  kDTypeCode,
  kDTypeBits,
  kDTypeLanes,
  kShape,
  kStrides,
  kByteOffset,
};
static_assert(offsetof(DLTensor, device) == 8 && offsetof(DLTensor, ndim) == 16 &&
              offsetof(DLTensor, dtype) == 20 && offsetof(DLTensor, shape) == 24 &&
              offsetof(DLTensor, strides) == 32 && offsetof(DLTensor, byte_offset) == 40);

// NimbleRuntimeHooks (kernel.h).
enum HookField : unsigned {
  kSetError,
  kParallelFor,
  kDeviceCode,
  kLaunch,
  kDeviceAlloc,
  kDeviceFree,
  kNumHookFields
};

void InitializeLLVMTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
    LLVMInitializeAArch64TargetInfo();
    LLVMInitializeAArch64Target();
    LLVMInitializeAArch64TargetMC();
    LLVMInitializeAArch64AsmPrinter();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

std::unique_ptr<llvm::TargetMachine> MakeTargetMachine(const std::string& name,
                                                       const std::string& triple,
                                                       const std::string& cpu,
                                                       const std::string& features) {
  InitializeLLVMTargets();
  std::string error;
  const llvm::Target* llvm_target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!llvm_target) throw Error("code generation for " + name + ": " + error);
  std::unique_ptr<llvm::TargetMachine> machine(llvm_target->createTargetMachine(
      triple, cpu, features, llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!machine) {
    throw Error("code generation for " + name + ": no target machine for " + triple + " (cpu " +
                cpu + ")");
  }
  return machine;
}

std::unique_ptr<llvm::TargetMachine> MakeHostMachine(const CodegenTarget& target) {
  return MakeTargetMachine(target.name, target.triple, target.cpu, target.features);
}

std::unique_ptr<llvm::TargetMachine> MakeDeviceMachine(const CodegenTarget& target) {
  if (target.device_triple.empty()) {
    throw Error("code generation for " + target.name + ": the target has no GPU");
  }
  return MakeTargetMachine(target.name, target.device_triple, target.device_cpu,
                           target.device_features);
}

bool IsSigned(DataType dtype) {
  return dtype.code() == DataType::Code::kInt;
}

bool IsIntDivision(tir::BinaryOp op) {
  return op == tir::BinaryOp::kDiv || op == tir::BinaryOp::kFloorDiv ||
         op == tir::BinaryOp::kFloorMod;
}

bool IsNonZeroConstant(const tir::Expr& expr) {
  int64_t value;
  return tir::AsInt(expr, &value) && value != 0;
}

// Whether evaluating `expr` can fail or fault: a load (its index may be out
// of bounds where a guard around it is false) or an integer division by a
// divisor that may be zero. Select, And and Or evaluate such operands only
// when they are taken.
bool MayFault(const tir::Expr& expr) {
  if (expr->kind == tir::ExprKind::kLoad) return true;
  if (expr->kind == tir::ExprKind::kBinary) {
    const auto& op = static_cast<const tir::BinaryNode&>(*expr);
    if (op.dtype.is_int() && IsIntDivision(op.op) && !IsNonZeroConstant(op.b)) return true;
  }
  bool may_fault = false;
  tir::ForEachOperand(
      expr, [&](const tir::Expr& operand) { may_fault = may_fault || MayFault(operand); });
  return may_fault;
}

// The variables and buffers a statement refers to, in order of first use:
// what the body of a parallel loop captures from around it.
class UseCollector {
 public:
  void Visit(const tir::Expr& expr) {
    if (expr->kind == tir::ExprKind::kVar) Use(static_cast<const tir::VarNode*>(expr.get()));
    if (expr->kind == tir::ExprKind::kLoad) {
      Use(static_cast<const tir::LoadNode&>(*expr).buffer.get());
    }
    tir::ForEachOperand(expr, [&](const tir::Expr& operand) { Visit(operand); });
  }

  void Visit(const tir::Stmt& stmt) {
    switch (stmt->kind) {
      case tir::StmtKind::kFor: {
        const auto& op = static_cast<const tir::ForNode&>(*stmt);
        Visit(op.extent);
        if (op.min_chunk) Visit(op.min_chunk);
        Visit(op.body);
        return;
      }
      case tir::StmtKind::kStore: {
        const auto& op = static_cast<const tir::StoreNode&>(*stmt);
        Use(op.buffer.get());
        Visit(op.index);
        Visit(op.value);
        return;
      }
      case tir::StmtKind::kLet: {
        const auto& op = static_cast<const tir::LetNode&>(*stmt);
        Visit(op.value);
        Visit(op.body);
        return;
      }
      case tir::StmtKind::kIf: {
        const auto& op = static_cast<const tir::IfNode&>(*stmt);
        Visit(op.condition);
        Visit(op.then_case);
        if (op.else_case) Visit(op.else_case);
        return;
      }
      case tir::StmtKind::kSeq:
        for (const tir::Stmt& child : static_cast<const tir::SeqNode&>(*stmt).stmts) Visit(child);
        return;
      case tir::StmtKind::kAllocate: {
        const auto& op = static_cast<const tir::AllocateNode&>(*stmt);
        for (const tir::Expr& extent : op.buffer->shape) Visit(extent);
        Visit(op.body);
        return;
      }
      case tir::StmtKind::kAssert: {
        const auto& op = static_cast<const tir::AssertNode&>(*stmt);
        Visit(op.condition);
        Visit(op.body);
        return;
      }
      case tir::StmtKind::kBarrier:
        return;
    }
  }

  std::vector<const tir::VarNode*> vars;
  std::vector<const tir::BufferNode*> buffers;

 private:
  void Use(const tir::VarNode* var) {
    if (seen_.insert(var).second) vars.push_back(var);
  }
  void Use(const tir::BufferNode* buffer) {
    if (seen_.insert(buffer).second) buffers.push_back(buffer);
  }

  std::unordered_set<const void*> seen_;
};

// What every function of a module shares. The host's: the runtime hooks, the
// helpers that call them, libc's allocator and the message strings. A GPU
// module (`host` false) holds only the device functions of GPU loops.
class ModuleState {
 public:
  // Declares the exported symbols (`nimble_runtime`, then one function per
  // kernel) before anything internal, so that a name clash renames an
  // internal function, never an exported one.
  ModuleState(llvm::Module& module, std::span<const tir::PrimFunc> kernels, bool host)
      : module(module),
        ctx(module.getContext()),
        ptr(llvm::PointerType::getUnqual(ctx)),
        i32(llvm::Type::getInt32Ty(ctx)),
        i64(llvm::Type::getInt64Ty(ctx)),
        dltensor(llvm::StructType::create(
            ctx,
            {ptr, i32, i32, i32, llvm::Type::getInt8Ty(ctx), llvm::Type::getInt8Ty(ctx),
             llvm::Type::getInt16Ty(ctx), ptr, ptr, i64},
            "DLTensor")),
        hooks_type(llvm::StructType::create(ctx, std::vector<llvm::Type*>(kNumHookFields, ptr),
                                            "NimbleRuntimeHooks")),
        kernel_type(llvm::FunctionType::get(i32, {ptr, ptr, i32}, false)),
        chunk_type(llvm::FunctionType::get(i32, {i64, i64, ptr}, false)) {
    if (!host) return;
    runtime = new llvm::GlobalVariable(
        module, hooks_type, /*isConstant=*/false, llvm::GlobalValue::ExternalLinkage,
        llvm::ConstantAggregateZero::get(hooks_type), "nimble_runtime");
    for (const tir::PrimFunc& kernel : kernels) {
      llvm::Function* function = llvm::Function::Create(
          kernel_type, llvm::GlobalValue::ExternalLinkage, kernel.name, module);
      if (function->getName() != kernel.name) {
        throw Error("code generation: kernel name '" + kernel.name +
                    "' is used twice or is reserved");
      }
      function->setDoesNotThrow();
      wrappers.push_back(function);
    }
    set_error = MakeSetError();
    parallel_for = MakeParallelFor();
    llvm::Type* void_type = llvm::Type::getVoidTy(ctx);
    malloc_fn = module.getOrInsertFunction("malloc", llvm::FunctionType::get(ptr, {i64}, false));
    free_fn = module.getOrInsertFunction("free", llvm::FunctionType::get(void_type, {ptr}, false));
    launch = MakeDeviceHook(kLaunch, "nimble_launch",
                            llvm::FunctionType::get(i32, {ptr, i64, i32, ptr}, false), i32, 1);
    device_alloc = MakeDeviceHook(kDeviceAlloc, "nimble_device_alloc",
                                  llvm::FunctionType::get(ptr, {i64}, false), ptr, 0);
    device_free = MakeDeviceHook(kDeviceFree, "nimble_device_free",
                                 llvm::FunctionType::get(void_type, {ptr}, false), void_type, 0);
  }

  // A private NUL-terminated constant holding `text`.
  llvm::Constant* String(const std::string& text) {
    llvm::Constant*& global = strings_[text];
    if (!global) {
      llvm::Constant* bytes = llvm::ConstantDataArray::getString(ctx, text);
      auto* variable =
          new llvm::GlobalVariable(module, bytes->getType(), /*isConstant=*/true,
                                   llvm::GlobalValue::PrivateLinkage, bytes, "message");
      variable->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
      global = variable;
    }
    return global;
  }

  // An internal function that never unwinds.
  llvm::Function* Internal(llvm::FunctionType* type, const std::string& name) {
    llvm::Function* function =
        llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, name, module);
    function->setDoesNotThrow();
    return function;
  }

  llvm::Module& module;
  // Whether vectorised loops fold their tails into masked vector iterations:
  // on AVX-512, whose every vector instruction takes a lane mask. AVX2's
  // masked loads and stores do not make the rest of a loop's arithmetic
  // masked, and an LSTM's kernels there ran 32% more instructions.
  bool masked_tails = false;
  llvm::LLVMContext& ctx;
  llvm::PointerType* const ptr;
  llvm::IntegerType* const i32;
  llvm::IntegerType* const i64;
  llvm::StructType* const dltensor;
  llvm::StructType* const hooks_type;
  llvm::FunctionType* const kernel_type;
  llvm::FunctionType* const chunk_type;  // int32 (int64 begin, int64 end, void* closure)
  llvm::GlobalVariable* runtime = nullptr;
  std::vector<llvm::Function*> wrappers;   // parallel to the kernels
  llvm::Function* set_error = nullptr;     // void (const char* message)
  llvm::Function* parallel_for = nullptr;  // int32 (int64 n, int64 min_chunk, chunk*, void*)
  llvm::FunctionCallee malloc_fn;
  llvm::FunctionCallee free_fn;
  // The GPU hooks, with the loaded device code as first argument.
  // int32 (const char* kernel, int64 blocks, int32 block_threads, void** params)
  llvm::Function* launch = nullptr;
  llvm::Function* device_alloc = nullptr;  // void* (int64 bytes); null on failure
  llvm::Function* device_free = nullptr;   // void (void*)

 private:
  llvm::Value* LoadHook(llvm::IRBuilder<>& b, HookField field) {
    return b.CreateLoad(ptr, b.CreateStructGEP(hooks_type, runtime, field));
  }

  // Calls the runtime's set_error; a library loaded without the runtime has
  // none, and its kernels fail without a message.
  llvm::Function* MakeSetError() {
    llvm::Function* function = Internal(
        llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr}, false), "nimble_set_error");
    function->addFnAttr(llvm::Attribute::Cold);
    function->addFnAttr(llvm::Attribute::NoInline);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", function));
    llvm::BasicBlock* call = llvm::BasicBlock::Create(ctx, "call", function);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "done", function);
    llvm::Value* hook = LoadHook(b, kSetError);
    b.CreateCondBr(b.CreateIsNotNull(hook), call, done);
    b.SetInsertPoint(call);
    b.CreateCall(function->getFunctionType(), hook, {function->getArg(0)});
    b.CreateBr(done);
    b.SetInsertPoint(done);
    b.CreateRetVoid();
    return function;
  }

  // Runs chunk(0, n, closure) through the runtime's parallel_for, or on this
  // thread in a library loaded without the runtime.
  llvm::Function* MakeParallelFor() {
    llvm::Function* function =
        Internal(llvm::FunctionType::get(i32, {i64, i64, ptr, ptr}, false), "nimble_parallel_for");
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", function));
    llvm::BasicBlock* pool = llvm::BasicBlock::Create(ctx, "pool", function);
    llvm::BasicBlock* serial = llvm::BasicBlock::Create(ctx, "serial", function);
    llvm::Value* hook = LoadHook(b, kParallelFor);
    b.CreateCondBr(b.CreateIsNotNull(hook), pool, serial);
    b.SetInsertPoint(pool);
    b.CreateRet(b.CreateCall(
        function->getFunctionType(), hook,
        {function->getArg(0), function->getArg(1), function->getArg(2), function->getArg(3)}));
    b.SetInsertPoint(serial);
    b.CreateRet(b.CreateCall(chunk_type, function->getArg(2),
                             {b.getInt64(0), function->getArg(0), function->getArg(3)}));
    return function;
  }

  // A function passing its arguments to hook `field` after the device code;
  // in a library whose GPU code is not loaded it records why and returns
  // `missing` (of type `result`).
  llvm::Function* MakeDeviceHook(HookField field, const std::string& name, llvm::FunctionType* type,
                                 llvm::Type* result, int missing) {
    llvm::Function* function = Internal(type, name);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", function));
    llvm::BasicBlock* call = llvm::BasicBlock::Create(ctx, "call", function);
    llvm::BasicBlock* absent = llvm::BasicBlock::Create(ctx, "absent", function);
    llvm::Value* hook = LoadHook(b, field);
    b.CreateCondBr(b.CreateIsNotNull(hook), call, absent);
    b.SetInsertPoint(call);
    std::vector<llvm::Value*> args = {LoadHook(b, kDeviceCode)};
    std::vector<llvm::Type*> params = {ptr};
    for (llvm::Argument& arg : function->args()) {
      args.push_back(&arg);
      params.push_back(arg.getType());
    }
    llvm::Value* value = b.CreateCall(llvm::FunctionType::get(result, params, false), hook, args);
    if (result->isVoidTy()) {
      b.CreateRetVoid();
    } else {
      b.CreateRet(value);
    }
    b.SetInsertPoint(absent);
    b.CreateCall(set_error, {String("the kernel library's GPU code is not loaded")});
    if (result->isVoidTy()) {
      b.CreateRetVoid();
    } else if (result->isPointerTy()) {
      b.CreateRet(llvm::ConstantPointerNull::get(ptr));
    } else {
      b.CreateRet(llvm::ConstantInt::get(result, missing));
    }
    return function;
  }

  std::unordered_map<std::string, llvm::Constant*> strings_;
};

// vector_math.h's float32 functions (the runtime's, with the accuracy it
// documents) as straight-line IR with the same algorithms and constants, so
// that loops around them vectorise. Log, which the runtime takes from libm,
// is Cephes' logf in the same style.
class Float32Math {
 public:
  explicit Float32Math(llvm::IRBuilder<>& b) : b_(b) {}

  Value* Exp(Value* x) {
    const ExpParts parts = SplitExp(AtMost(AtLeast(x, -104.0f), 89.0f));
    Value* half = b_.CreateAShr(parts.exponent, 1);
    return b_.CreateFMul(b_.CreateFMul(parts.mantissa, PowerOfTwo(half)),
                         PowerOfTwo(b_.CreateSub(parts.exponent, half)));
  }

  // x = m 2^e with m in [sqrt(1/2), sqrt(2)) (subnormals scaled by 2^23
  // first); log(x) = e ln 2 + log(m), log(1 + f) by Cephes' degree-8
  // polynomial, ln 2 split in two constants. 0 gives -inf, negative x NaN,
  // +inf and NaN themselves.
  Value* Log(Value* x) {
    constexpr float kInfinity = std::numeric_limits<float>::infinity();
    Value* subnormal = b_.CreateFCmpOLT(x, F(0x1p-126f));
    Value* scaled = b_.CreateSelect(subnormal, b_.CreateFMul(x, F(0x1p23f)), x);
    Value* bits = b_.CreateBitCast(scaled, b_.getInt32Ty());
    Value* exponent =
        b_.CreateSub(b_.CreateLShr(bits, 23),
                     b_.CreateSelect(subnormal, b_.getInt32(126 + 23), b_.getInt32(126)));
    Value* mantissa = b_.CreateBitCast(b_.CreateOr(b_.CreateAnd(bits, 0x007fffff), 0x3f000000),
                                       b_.getFloatTy());  // [0.5, 1)
    Value* low = b_.CreateFCmpOLT(mantissa, F(0.707106781186547524f));
    exponent = b_.CreateSub(exponent, b_.CreateZExt(low, b_.getInt32Ty()));
    Value* f =
        b_.CreateFSub(b_.CreateSelect(low, b_.CreateFAdd(mantissa, mantissa), mantissa), F(1.0f));
    Value* z = b_.CreateFMul(f, f);
    Value* p = Polynomial(f, {7.0376836292e-2f, -1.1514610310e-1f, 1.1676998740e-1f,
                              -1.2420140846e-1f, 1.4249322787e-1f, -1.6668057665e-1f,
                              2.0000714765e-1f, -2.4999993993e-1f, 3.3333331174e-1f});
    Value* e = b_.CreateSIToFP(exponent, b_.getFloatTy());
    Value* y = b_.CreateFMul(b_.CreateFMul(p, f), z);
    y = b_.CreateFAdd(y, b_.CreateFMul(e, F(-2.12194440e-4f)));
    y = b_.CreateFAdd(y, b_.CreateFMul(z, F(-0.5f)));
    Value* result = b_.CreateFAdd(b_.CreateFAdd(f, y), b_.CreateFMul(e, F(0.693359375f)));
    Value* special =
        b_.CreateSelect(b_.CreateFCmpOEQ(x, F(0.0f)), F(-kInfinity),
                        b_.CreateSelect(b_.CreateFCmpOLT(x, F(0.0f)),
                                        F(std::numeric_limits<float>::quiet_NaN()), x));
    Value* regular = b_.CreateAnd(b_.CreateFCmpOGT(x, F(0.0f)), b_.CreateFCmpOLT(x, F(kInfinity)));
    return b_.CreateSelect(regular, result, special);
  }

  Value* Tanh(Value* x) {
    Value* z = b_.CreateFMul(x, x);
    Value* p = Polynomial(z, {-5.70498872745e-3f, 2.06390887954e-2f, -5.37397155531e-2f,
                              1.33314422036e-1f, -3.33332819422e-1f});
    Value* small = b_.CreateFAdd(b_.CreateFMul(b_.CreateFMul(p, z), x), x);
    Value* abs = Abs(x);
    Value* large = b_.CreateFSub(
        F(1.0f), b_.CreateFDiv(F(2.0f), b_.CreateFAdd(Exp(b_.CreateFMul(F(2.0f), abs)), F(1.0f))));
    return CopySign(b_.CreateSelect(b_.CreateFCmpOLT(abs, F(0.625f)), small, large), x);
  }

  Value* Sigmoid(Value* x) {
    Value* e = Exp(b_.CreateFNeg(Abs(x)));
    Value* positive = b_.CreateFDiv(F(1.0f), b_.CreateFAdd(F(1.0f), e));
    return b_.CreateSelect(b_.CreateFCmpOLT(x, F(0.0f)), b_.CreateFMul(e, positive), positive);
  }

  Value* Erf(Value* x) {
    Value* abs = Abs(x);
    Value* small = b_.CreateFMul(x, ErfOverX(x));
    Value* large = CopySign(b_.CreateFSub(F(1.0f), ErfcOfAtLeastOne(AtMost(abs, 4.0f))), x);
    return b_.CreateSelect(b_.CreateFCmpOLT(abs, F(1.0f)), small, large);
  }

  // 1 - x P(x^2) below |x| = 1, else the tail erfc(|x|), or 2 minus it for
  // negative x: no cancellation where erfc is small (gelu of negative x).
  Value* Erfc(Value* x) {
    Value* abs = Abs(x);
    Value* small = b_.CreateFSub(F(1.0f), b_.CreateFMul(x, ErfOverX(x)));
    Value* tail = ErfcOfAtLeastOne(abs);
    Value* large =
        b_.CreateSelect(b_.CreateFCmpOGT(x, F(0.0f)), tail, b_.CreateFSub(F(2.0f), tail));
    return b_.CreateSelect(b_.CreateFCmpOLT(abs, F(1.0f)), small, large);
  }

 private:
  struct ExpParts {
    Value* mantissa;  // e^r
    Value* exponent;  // n, int32
  };

  Value* F(float value) { return llvm::ConstantFP::get(b_.getFloatTy(), value); }

  // Horner's scheme: ((c0 x + c1) x + c2) ...
  Value* Polynomial(Value* x, std::initializer_list<float> coefficients) {
    Value* p = nullptr;
    for (const float c : coefficients) p = p ? b_.CreateFAdd(b_.CreateFMul(p, x), F(c)) : F(c);
    return p;
  }

  Value* Abs(Value* x) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x); }
  Value* CopySign(Value* magnitude, Value* sign) {
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, magnitude, sign);
  }
  Value* AtLeast(Value* x, float low) {
    return b_.CreateSelect(b_.CreateFCmpOLT(x, F(low)), F(low), x);
  }
  Value* AtMost(Value* x, float high) {
    return b_.CreateSelect(b_.CreateFCmpOGT(x, F(high)), F(high), x);
  }

  ExpParts SplitExp(Value* x) {
    constexpr float kRound = 12582912.0f;
    Value* shifted = b_.CreateFAdd(b_.CreateFMul(x, F(1.44269504088896341f)), F(kRound));
    Value* n = b_.CreateFSub(shifted, F(kRound));
    Value* r = b_.CreateFSub(b_.CreateFSub(x, b_.CreateFMul(n, F(0.693359375f))),
                             b_.CreateFMul(n, F(-2.12194440e-4f)));
    Value* p = Polynomial(r, {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                              4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f});
    p = b_.CreateFAdd(b_.CreateFAdd(b_.CreateFMul(b_.CreateFMul(p, r), r), r), F(1.0f));
    Value* exponent = b_.CreateSub(b_.CreateBitCast(shifted, b_.getInt32Ty()),
                                   b_.getInt32(std::bit_cast<int32_t>(kRound)));
    return {p, exponent};
  }

  // 2^n for -126 <= n <= 127.
  Value* PowerOfTwo(Value* n) {
    return b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(n, b_.getInt32(127)), 23), b_.getFloatTy());
  }

  Value* ErfOverX(Value* x) {
    return Polynomial(b_.CreateFMul(x, x),
                      {-5.631665699183941e-4f, 4.917608108371496e-3f, -2.671135775744915e-2f,
                       1.128018125891685e-1f, -3.761232495307922e-1f, 1.128379106521606f});
  }

  Value* ErfcOfAtLeastOne(Value* a) {
    Value* u = b_.CreateFDiv(F(1.0f), a);
    Value* s = Polynomial(b_.CreateFSub(u, F(0.5f)),
                          {-2.00115367770195e-2f, 8.971880376338959e-2f, -1.121517121791840e-1f,
                           4.736624285578728e-2f, 4.272013902664185e-2f, -1.092538535594940e-1f,
                           1.189692318439484e-1f, -3.662068024277687e-2f, -1.672111898660660e-1f,
                           5.107913017272949e-1f});
    return b_.CreateFMul(b_.CreateFMul(Exp(b_.CreateFMul(b_.CreateFNeg(a), a)), u), s);
  }

  llvm::IRBuilder<>& b_;
};

// One kernel's name and the count of functions outlined from it.
struct KernelState {
  std::string name;
  ModuleState* gpu_module;  // where its GPU loops go; null for CPU targets
  int num_parallel_loops = 0;
  int num_gpu_loops = 0;
};

// Where a function's code runs: on the host, as a kernel (or its argument
// checks), a chunk of one of its parallel loops, or the host side of a GPU
// kernel (which launches its loops and never touches its buffers' memory);
// or on the GPU, as the body of one kGpuThreads loop (a thread per iteration)
// or of one kGpuBlocks loop (a block of threads per iteration).
enum class Place { kCpu, kCpuParallelChunk, kGpuHost, kGpuThread, kGpuBlock };

// The threads of a block: for a kGpuThreads launch, enough to keep an SM's
// warps busy; for a kGpuBlocks launch without a kGpuBlockThreads loop (which
// sets its own), also the width of its block reductions, whose halving tree
// needs a power of two.
constexpr int kDefaultBlockThreads = 256;
// What CUDA allows a block: threads, and statically allocated shared memory.
constexpr int64_t kMaxBlockThreads = 1024;
constexpr int64_t kMaxSharedBytes = 48 * 1024;
constexpr unsigned kSharedAddressSpace = 3;

// Emits the statements and expressions of one LLVM function: a kernel's
// body, the body of one of its parallel or GPU loops, or its argument checks.
class FunctionEmitter {
 public:
  FunctionEmitter(ModuleState& module, KernelState& kernel, llvm::Function* function, Place place)
      : m_(module),
        k_(kernel),
        function_(function),
        b_(llvm::BasicBlock::Create(module.ctx, "entry", function)),
        place_(place) {
    llvm::FastMathFlags contract;
    contract.setAllowContract(true);
    b_.setFastMathFlags(contract);
  }

  llvm::IRBuilder<>& builder() { return b_; }

  void BindVar(const tir::VarNode* var, Value* value) { vars_[var] = value; }
  void BindBuffer(const tir::BufferNode* buffer, Value* data) { buffers_[buffer] = data; }

  // Unless `ok`, fails the function: records "KERNEL: message" (no message
  // when `message` is null: a callee recorded one), frees the heap buffers
  // live here and returns 1.
  // A GPU thread has nowhere to record a message: it traps, which fails the
  // launch, and the runtime reports that when it next waits for the device.
  void FailUnless(Value* ok, const std::string* message) {
    llvm::BasicBlock* fail = llvm::BasicBlock::Create(m_.ctx, "fail", function_);
    llvm::BasicBlock* pass = llvm::BasicBlock::Create(m_.ctx, "pass", function_);
    b_.CreateCondBr(ok, pass, fail, llvm::MDBuilder(m_.ctx).createLikelyBranchWeights());
    b_.SetInsertPoint(fail);
    if (OnDevice()) {
      b_.CreateIntrinsic(llvm::Intrinsic::trap, {}, {});
      b_.CreateUnreachable();
      b_.SetInsertPoint(pass);
      return;
    }
    if (message) b_.CreateCall(m_.set_error, {m_.String(k_.name + ": " + *message)});
    for (auto heap = heap_.rbegin(); heap != heap_.rend(); ++heap) b_.CreateCall(Free(), {*heap});
    b_.CreateRet(b_.getInt32(1));
    b_.SetInsertPoint(pass);
  }
  void FailUnless(Value* ok, const std::string& message) { FailUnless(ok, &message); }

  // condition ? if_true() : if_false(), evaluating only the side taken.
  Value* EmitConditional(Value* condition, llvm::function_ref<Value*()> if_true,
                         llvm::function_ref<Value*()> if_false) {
    llvm::BasicBlock* then_block = llvm::BasicBlock::Create(m_.ctx, "then", function_);
    llvm::BasicBlock* else_block = llvm::BasicBlock::Create(m_.ctx, "else", function_);
    llvm::BasicBlock* merge = llvm::BasicBlock::Create(m_.ctx, "merge", function_);
    b_.CreateCondBr(condition, then_block, else_block);
    b_.SetInsertPoint(then_block);
    Value* true_value = if_true();
    llvm::BasicBlock* then_end = b_.GetInsertBlock();
    b_.CreateBr(merge);
    b_.SetInsertPoint(else_block);
    Value* false_value = if_false();
    llvm::BasicBlock* else_end = b_.GetInsertBlock();
    b_.CreateBr(merge);
    b_.SetInsertPoint(merge);
    llvm::PHINode* phi = b_.CreatePHI(true_value->getType(), 2);
    phi->addIncoming(true_value, then_end);
    phi->addIncoming(false_value, else_end);
    return phi;
  }

  // ---------------------------------------------------------------------
  // Types

  llvm::Type* ValueType(DataType dtype) {
    switch (dtype.code()) {
      case DataType::Code::kBool:
        return b_.getInt1Ty();
      case DataType::Code::kInt:
      case DataType::Code::kUInt:
        return b_.getIntNTy(dtype.bits());
      case DataType::Code::kFloat:
        if (dtype.bits() == 32) return b_.getFloatTy();
        if (dtype.bits() == 64) return b_.getDoubleTy();
        break;
      case DataType::Code::kBFloat:
        break;
    }
    Unsupported(dtype.name() + " is not supported by code generation");
  }

  // Bools are one byte in memory.
  llvm::Type* MemoryType(DataType dtype) {
    return dtype.is_bool() ? b_.getInt8Ty() : ValueType(dtype);
  }

  [[noreturn]] void Unsupported(const std::string& what) {
    throw Error("kernel " + k_.name + ": " + what);
  }

  // ---------------------------------------------------------------------
  // Expressions

  Value* Emit(const tir::Expr& expr) {
    switch (expr->kind) {
      case tir::ExprKind::kIntImm: {
        const int64_t value = static_cast<const tir::IntImmNode&>(*expr).value;
        if (expr->dtype.is_bool()) return b_.getInt1(value != 0);
        return llvm::ConstantInt::getSigned(ValueType(expr->dtype), value);
      }
      case tir::ExprKind::kFloatImm:
        return llvm::ConstantFP::get(ValueType(expr->dtype),
                                     static_cast<const tir::FloatImmNode&>(*expr).value);
      case tir::ExprKind::kVar: {
        const auto& var = static_cast<const tir::VarNode&>(*expr);
        const auto found = vars_.find(&var);
        if (found == vars_.end()) Unsupported("variable " + var.name + " is not bound");
        return found->second;
      }
      case tir::ExprKind::kBinary:
        return EmitBinary(static_cast<const tir::BinaryNode&>(*expr), /*reassociate=*/false);
      case tir::ExprKind::kCompare:
        return EmitCompare(static_cast<const tir::CompareNode&>(*expr));
      case tir::ExprKind::kLogical: {
        const auto& op = static_cast<const tir::LogicalNode&>(*expr);
        Value* a = Emit(op.a);
        const bool is_and = op.op == tir::LogicalOp::kAnd;
        if (MayFault(op.b)) {
          return EmitConditional(
              a, [&] { return is_and ? Emit(op.b) : b_.getTrue(); },
              [&] { return is_and ? b_.getFalse() : Emit(op.b); });
        }
        return is_and ? b_.CreateAnd(a, Emit(op.b)) : b_.CreateOr(a, Emit(op.b));
      }
      case tir::ExprKind::kNot:
        return b_.CreateNot(Emit(static_cast<const tir::NotNode&>(*expr).a));
      case tir::ExprKind::kSelect: {
        const auto& op = static_cast<const tir::SelectNode&>(*expr);
        Value* condition = Emit(op.condition);
        if (MayFault(op.true_value) || MayFault(op.false_value)) {
          return EmitConditional(
              condition, [&] { return Emit(op.true_value); }, [&] { return Emit(op.false_value); });
        }
        return b_.CreateSelect(condition, Emit(op.true_value), Emit(op.false_value));
      }
      case tir::ExprKind::kCast: {
        const auto& op = static_cast<const tir::CastNode&>(*expr);
        return EmitCast(op.dtype, op.value->dtype, Emit(op.value));
      }
      case tir::ExprKind::kCall:
        return EmitCall(static_cast<const tir::CallNode&>(*expr));
      case tir::ExprKind::kLoad: {
        const auto& op = static_cast<const tir::LoadNode&>(*expr);
        RequireMemoryAccess(*op.buffer);
        llvm::Type* type = MemoryType(op.dtype);
        Value* element = b_.CreateInBoundsGEP(type, BufferData(*op.buffer), EmitIndex(op.index));
        Value* value = b_.CreateAlignedLoad(type, element, llvm::Align(op.dtype.bytes()));
        return op.dtype.is_bool() ? b_.CreateIsNotNull(value) : value;
      }
      case tir::ExprKind::kTensorRead:
      case tir::ExprKind::kReduce:
        Unsupported("tensor reads and reductions must be lowered before code generation");
    }
    Unsupported("unknown expression kind");
  }

  // An integer expression as an int64 index.
  Value* EmitIndex(const tir::Expr& expr) {
    if (!expr->dtype.is_int()) Unsupported("index " + tir::ToString(expr) + " is not an integer");
    return b_.CreateIntCast(Emit(expr), b_.getInt64Ty(), IsSigned(expr->dtype));
  }

  // `reassociate`: op combines a value into a reduction's accumulator
  // (StoreNode::reassociate): float add/mul/min/max chains may be reordered.
  Value* EmitBinary(const tir::BinaryNode& op, bool reassociate) {
    const DataType dtype = op.dtype;
    if (dtype.is_bool()) Unsupported("arithmetic (" + tir::BinaryOpName(op.op) + ") on bool");
    const bool reorderable = reassociate && dtype.is_float() && op.op != tir::BinaryOp::kSub &&
                             op.op != tir::BinaryOp::kDiv;
    auto operand = [&](const tir::Expr& expr) {
      if (reorderable && expr->kind == tir::ExprKind::kBinary &&
          static_cast<const tir::BinaryNode&>(*expr).op == op.op) {
        return EmitBinary(static_cast<const tir::BinaryNode&>(*expr), true);
      }
      return Emit(expr);
    };
    Value* a = operand(op.a);
    Value* b = operand(op.b);
    if (dtype.is_int()) return EmitIntBinary(op, a, b);
    llvm::IRBuilder<>::FastMathFlagGuard guard(b_);
    if (reorderable) {
      llvm::FastMathFlags flags = b_.getFastMathFlags();
      flags.setAllowReassoc(true);
      b_.setFastMathFlags(flags);
    }
    switch (op.op) {
      case tir::BinaryOp::kAdd:
        return b_.CreateFAdd(a, b);
      case tir::BinaryOp::kSub:
        return b_.CreateFSub(a, b);
      case tir::BinaryOp::kMul:
        return b_.CreateFMul(a, b);
      case tir::BinaryOp::kDiv:
        return b_.CreateFDiv(a, b);
      // NaN in either operand gives NaN, as the runtime's maximum/minimum.
      case tir::BinaryOp::kMin:
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, a, b);
      case tir::BinaryOp::kMax:
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, a, b);
      case tir::BinaryOp::kFloorDiv:
      case tir::BinaryOp::kFloorMod:
        break;
    }
    Unsupported(tir::BinaryOpName(op.op) + " of " + dtype.name() + " (it is an index operation)");
  }

  // Integer arithmetic wraps; division follows the runtime: C semantics for
  // kDiv, floor semantics for kFloorDiv/kFloorMod, MIN / -1 wraps, and a
  // zero divisor fails the kernel.
  Value* EmitIntBinary(const tir::BinaryNode& op, Value* a, Value* b) {
    const bool is_signed = IsSigned(op.dtype);
    switch (op.op) {
      case tir::BinaryOp::kAdd:
        return b_.CreateAdd(a, b);
      case tir::BinaryOp::kSub:
        return b_.CreateSub(a, b);
      case tir::BinaryOp::kMul:
        return b_.CreateMul(a, b);
      case tir::BinaryOp::kMin:
        return b_.CreateBinaryIntrinsic(is_signed ? llvm::Intrinsic::smin : llvm::Intrinsic::umin,
                                        a, b);
      case tir::BinaryOp::kMax:
        return b_.CreateBinaryIntrinsic(is_signed ? llvm::Intrinsic::smax : llvm::Intrinsic::umax,
                                        a, b);
      case tir::BinaryOp::kDiv:
      case tir::BinaryOp::kFloorDiv:
      case tir::BinaryOp::kFloorMod:
        break;
    }
    if (!IsNonZeroConstant(op.b)) FailUnless(b_.CreateIsNotNull(b), "integer division by zero");
    if (!is_signed)
      return op.op == tir::BinaryOp::kFloorMod ? b_.CreateURem(a, b) : b_.CreateUDiv(a, b);
    // a / -1 is -a (wrapping), where sdiv would overflow.
    Value* minus_one = b_.CreateICmpEQ(b, llvm::ConstantInt::getSigned(b->getType(), -1));
    Value* divisor = b_.CreateSelect(minus_one, llvm::ConstantInt::get(b->getType(), 1), b);
    Value* quotient = b_.CreateSelect(minus_one, b_.CreateNeg(a), b_.CreateSDiv(a, divisor));
    if (op.op == tir::BinaryOp::kDiv) return quotient;
    Value* remainder = b_.CreateSRem(a, divisor);
    // Truncation rounded up where the remainder and the divisor differ in sign.
    Value* adjust =
        b_.CreateAnd(b_.CreateIsNotNull(remainder), b_.CreateIsNeg(b_.CreateXor(remainder, b)));
    if (op.op == tir::BinaryOp::kFloorDiv) {
      return b_.CreateSub(quotient, b_.CreateZExt(adjust, quotient->getType()));
    }
    return b_.CreateSelect(adjust, b_.CreateAdd(remainder, b), remainder);
  }

  Value* EmitCompare(const tir::CompareNode& op) {
    Value* a = Emit(op.a);
    Value* b = Emit(op.b);
    const DataType dtype = op.a->dtype;
    using P = llvm::CmpInst::Predicate;
    if (dtype.is_float()) {
      // Ordered, as C++ compares: NaN is unequal to everything.
      static constexpr P kFloat[] = {P::FCMP_OEQ, P::FCMP_UNE, P::FCMP_OLT,
                                     P::FCMP_OLE, P::FCMP_OGT, P::FCMP_OGE};
      return b_.CreateFCmp(kFloat[static_cast<int>(op.op)], a, b);
    }
    static constexpr P kSigned[] = {P::ICMP_EQ,  P::ICMP_NE,  P::ICMP_SLT,
                                    P::ICMP_SLE, P::ICMP_SGT, P::ICMP_SGE};
    static constexpr P kUnsigned[] = {P::ICMP_EQ,  P::ICMP_NE,  P::ICMP_ULT,
                                      P::ICMP_ULE, P::ICMP_UGT, P::ICMP_UGE};
    return b_.CreateICmp((IsSigned(dtype) ? kSigned : kUnsigned)[static_cast<int>(op.op)], a, b);
  }

  // The runtime's ConvertElement: float to integer truncates, saturates and
  // maps NaN to 0; anything to bool is != 0; bool is 0 or 1.
  Value* EmitCast(DataType to, DataType from, Value* value) {
    llvm::Type* type = ValueType(to);
    if (to == from) return value;
    if (to.is_bool()) {
      return from.is_float() ? b_.CreateFCmpUNE(value, llvm::ConstantFP::get(value->getType(), 0))
                             : b_.CreateIsNotNull(value);
    }
    if (!from.is_float()) {
      const bool is_signed = IsSigned(from);
      if (to.is_float())
        return is_signed ? b_.CreateSIToFP(value, type) : b_.CreateUIToFP(value, type);
      return b_.CreateIntCast(value, type, is_signed);
    }
    if (to.is_float()) return b_.CreateFPCast(value, type);
    return b_.CreateIntrinsic(
        IsSigned(to) ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat,
        {type, value->getType()}, {value});
  }

  Value* EmitCall(const tir::CallNode& call) {
    const DataType dtype = call.dtype;
    std::vector<Value*> args;
    for (const tir::Expr& arg : call.args) args.push_back(Emit(arg));
    Value* x = args[0];
    if (IsBlockCombine(call.intrinsic)) return EmitBlockCombine(call.intrinsic, dtype, x);
    const std::string unsupported =
        tir::IntrinsicName(call.intrinsic) + " of " + dtype.name() + " is not supported";
    if (dtype.is_int()) {
      // Integers are their own nearest, floor and ceiling.
      if (call.intrinsic == tir::Intrinsic::kRound || call.intrinsic == tir::Intrinsic::kFloor ||
          call.intrinsic == tir::Intrinsic::kCeil) {
        return x;
      }
      if (call.intrinsic == tir::Intrinsic::kCheckIndex) {
        Value* bound = b_.CreateIntCast(args[1], x->getType(), true);
        FailUnless(b_.CreateAnd(b_.CreateICmpSGE(x, llvm::ConstantInt::get(x->getType(), 0)),
                                b_.CreateICmpSLT(x, bound)),
                   "an index is out of range");
        return x;
      }
      if (call.intrinsic != tir::Intrinsic::kAbs) Unsupported(unsupported);
      return IsSigned(dtype) ? b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, b_.getFalse()) : x;
    }
    if (!dtype.is_float()) Unsupported(unsupported);
    const bool is_float32 = dtype.bits() == 32;
    Float32Math math(b_);
    auto libm = [&](const char* name) {
      if (OnDevice()) Unsupported(unsupported + " on the GPU");
      return b_.CreateCall(m_.module.getOrInsertFunction(name, x->getType(), x->getType()), {x});
    };
    switch (call.intrinsic) {
      case tir::Intrinsic::kExp:
        return is_float32 ? math.Exp(x) : b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, x);
      case tir::Intrinsic::kLog:
        return is_float32 ? math.Log(x) : b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, x);
      case tir::Intrinsic::kSqrt:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
      case tir::Intrinsic::kRsqrt:
        return b_.CreateFDiv(llvm::ConstantFP::get(x->getType(), 1.0),
                             b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
      case tir::Intrinsic::kTanh:
        return is_float32 ? math.Tanh(x) : libm("tanh");
      case tir::Intrinsic::kSigmoid: {
        if (is_float32) return math.Sigmoid(x);
        Value* one = llvm::ConstantFP::get(x->getType(), 1.0);
        return b_.CreateFDiv(one, b_.CreateFAdd(one, b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp,
                                                                             b_.CreateFNeg(x))));
      }
      case tir::Intrinsic::kErf:
        return is_float32 ? math.Erf(x) : libm("erf");
      case tir::Intrinsic::kErfc:
        return is_float32 ? math.Erfc(x) : libm("erfc");
      case tir::Intrinsic::kAbs:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      case tir::Intrinsic::kRound:  // halves to even, as nearbyint in the default rounding mode
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, x);
      case tir::Intrinsic::kFloor:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, x);
      case tir::Intrinsic::kCeil:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, x);
      case tir::Intrinsic::kFmod:  // frem is C's fmod: exact, with the dividend's sign
        return b_.CreateFRem(x, args[1]);
      case tir::Intrinsic::kPow:
        if (OnDevice()) Unsupported(unsupported + " on the GPU");
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, args[1]);
      case tir::Intrinsic::kCheckIndex:
      case tir::Intrinsic::kBlockSum:
      case tir::Intrinsic::kBlockProd:
      case tir::Intrinsic::kBlockMax:
      case tir::Intrinsic::kBlockMin:
        break;
    }
    Unsupported(unsupported);
  }

  Value* BufferData(const tir::BufferNode& buffer) {
    const auto found = buffers_.find(&buffer);
    if (found == buffers_.end()) {
      Unsupported("buffer " + buffer.name + " is neither a parameter nor allocated around its use");
    }
    return found->second;
  }

  // ---------------------------------------------------------------------
  // Statements

  void Emit(const tir::Stmt& stmt) {
    switch (stmt->kind) {
      case tir::StmtKind::kFor: {
        const auto& op = static_cast<const tir::ForNode&>(*stmt);
        if (!op.var->dtype.is_int())
          Unsupported("loop variable " + op.var->name + " is not an integer");
        const bool on_gpu = place_ == Place::kGpuHost || OnDevice();
        if (op.for_kind == tir::ForKind::kGpuThreads || op.for_kind == tir::ForKind::kGpuBlocks) {
          if (place_ != Place::kGpuHost) {
            Unsupported(tir::ForKindName(op.for_kind) + " loop " + op.var->name +
                        " outside a GPU kernel's host code");
          }
          return EmitGpuLaunch(op);
        }
        if (op.for_kind == tir::ForKind::kGpuBlockThreads) {
          // EmitGpuLaunch checked where it sits and made its extent the block's size.
          if (place_ != Place::kGpuBlock || block_stride_depth_ > 0 || in_block_threads_) {
            Unsupported("gpu_block_threads loop " + op.var->name +
                        " outside the code that every thread of a gpu_blocks loop runs");
          }
          in_block_threads_ = true;
          WithVar(op.var.get(), b_.CreateZExt(ThreadInBlock(), ValueType(op.var->dtype)),
                  [&] { Emit(op.body); });
          in_block_threads_ = false;
          return;
        }
        if (op.for_kind == tir::ForKind::kGpuBlockStride) {
          if (place_ != Place::kGpuBlock || block_stride_depth_ > 0) {
            Unsupported("gpu_block_stride loop " + op.var->name +
                        " outside a gpu_blocks loop or inside another");
          }
          return EmitBlockStrideLoop(op);
        }
        if (op.for_kind == tir::ForKind::kParallel) {
          if (on_gpu) Unsupported("parallel loop " + op.var->name + " in a GPU kernel");
          return EmitParallelFor(op);
        }
        llvm::Type* type = ValueType(op.var->dtype);
        return EmitLoop(*op.var, llvm::ConstantInt::get(type, 0),
                        b_.CreateIntCast(EmitIndex(op.extent), type, true), op.body, op.for_kind);
      }
      case tir::StmtKind::kStore: {
        const auto& op = static_cast<const tir::StoreNode&>(*stmt);
        RequireMemoryAccess(*op.buffer);
        Value* value = op.reassociate && op.value->kind == tir::ExprKind::kBinary
                           ? EmitBinary(static_cast<const tir::BinaryNode&>(*op.value), true)
                           : Emit(op.value);
        llvm::Type* type = MemoryType(op.buffer->dtype);
        if (op.buffer->dtype.is_bool()) value = b_.CreateZExt(value, type);
        Value* element = b_.CreateInBoundsGEP(type, BufferData(*op.buffer), EmitIndex(op.index));
        b_.CreateAlignedStore(value, element, llvm::Align(op.buffer->dtype.bytes()));
        return;
      }
      case tir::StmtKind::kLet: {
        const auto& op = static_cast<const tir::LetNode&>(*stmt);
        return WithVar(op.var.get(), Emit(op.value), [&] { Emit(op.body); });
      }
      case tir::StmtKind::kIf: {
        const auto& op = static_cast<const tir::IfNode&>(*stmt);
        llvm::BasicBlock* then_block = llvm::BasicBlock::Create(m_.ctx, "if", function_);
        llvm::BasicBlock* else_block =
            op.else_case ? llvm::BasicBlock::Create(m_.ctx, "else", function_) : nullptr;
        llvm::BasicBlock* merge = llvm::BasicBlock::Create(m_.ctx, "endif", function_);
        b_.CreateCondBr(Emit(op.condition), then_block, else_block ? else_block : merge);
        b_.SetInsertPoint(then_block);
        Emit(op.then_case);
        b_.CreateBr(merge);
        if (else_block) {
          b_.SetInsertPoint(else_block);
          Emit(op.else_case);
          b_.CreateBr(merge);
        }
        b_.SetInsertPoint(merge);
        return;
      }
      case tir::StmtKind::kSeq:
        for (const tir::Stmt& child : static_cast<const tir::SeqNode&>(*stmt).stmts) Emit(child);
        return;
      case tir::StmtKind::kAllocate:
        return EmitAllocate(static_cast<const tir::AllocateNode&>(*stmt));
      case tir::StmtKind::kAssert: {
        const auto& op = static_cast<const tir::AssertNode&>(*stmt);
        // Lowering never produces these: an Assert's early return would have
        // to free the allocation, and its message would be recorded on a
        // worker thread.
        if (allocate_depth_ > 0) Unsupported("an Assert inside an Allocate is not supported");
        if (place_ == Place::kCpuParallelChunk || OnDevice()) {
          Unsupported("an Assert inside a parallel or GPU loop is not supported");
        }
        FailUnless(Emit(op.condition), op.message);
        return Emit(op.body);
      }
      case tir::StmtKind::kBarrier:
        if (!in_block_threads_) Unsupported("a barrier outside a gpu_block_threads loop");
        b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
        return;
    }
  }

 private:
  bool OnDevice() const { return place_ == Place::kGpuThread || place_ == Place::kGpuBlock; }

  // The host side of a GPU kernel holds device pointers: its memory is read
  // and written only by the GPU loops it launches.
  void RequireMemoryAccess(const tir::BufferNode& buffer) {
    if (place_ == Place::kGpuHost) {
      Unsupported("buffer " + buffer.name + " is accessed outside the GPU loops of a GPU kernel");
    }
  }

  llvm::FunctionCallee Free() {
    return place_ == Place::kGpuHost ? llvm::FunctionCallee(m_.device_free) : m_.free_fn;
  }

  template <typename Fn>
  void WithVar(const tir::VarNode* var, Value* value, const Fn& fn) {
    const auto [slot, inserted] = vars_.try_emplace(var, value);
    Value* outer = inserted ? nullptr : std::exchange(slot->second, value);
    fn();
    if (outer) {
      vars_[var] = outer;
    } else {
      vars_.erase(var);
    }
  }

  // for (var = begin; var < end; var += step) body, with the loop metadata of
  // `kind`.
  void EmitLoop(const tir::VarNode& var, Value* begin, Value* end, const tir::Stmt& body,
                tir::ForKind kind, int64_t step = 1) {
    llvm::BasicBlock* preheader = b_.GetInsertBlock();
    llvm::BasicBlock* header = llvm::BasicBlock::Create(m_.ctx, "loop", function_);
    llvm::BasicBlock* body_block = llvm::BasicBlock::Create(m_.ctx, "body", function_);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(m_.ctx, "exit", function_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* index = b_.CreatePHI(begin->getType(), 2, var.name);
    index->addIncoming(begin, preheader);
    b_.CreateCondBr(b_.CreateICmpSLT(index, end), body_block, exit);
    b_.SetInsertPoint(body_block);
    WithVar(&var, index, [&] { Emit(body); });
    Value* next =
        b_.CreateAdd(index, llvm::ConstantInt::get(index->getType(), step), "", true, true);
    llvm::BranchInst* back = b_.CreateBr(header);
    if (llvm::MDNode* hint = LoopHint(kind, m_.masked_tails && HasTail(begin, end, step))) {
      back->setMetadata(llvm::LLVMContext::MD_loop, hint);
    }
    index->addIncoming(next, b_.GetInsertBlock());
    b_.SetInsertPoint(exit);
  }

  // Whether a vectorised loop from `begin` to `end` may leave iterations
  // past its last whole vector: unless both are constants a multiple of 16
  // apart (every target's vector of float32 divides 16).
  static bool HasTail(Value* begin, Value* end, int64_t step) {
    const auto* first = llvm::dyn_cast<llvm::ConstantInt>(begin);
    const auto* last = llvm::dyn_cast<llvm::ConstantInt>(end);
    return !first || !last || step != 1 || (last->getSExtValue() - first->getSExtValue()) % 16 != 0;
  }

  // The llvm.loop metadata asking for vectorisation or unrolling. With
  // `masked_tail`, a vectorised loop folds its tail into masked vector
  // iterations: a softmax over 54 tokens spent most of its time in the
  // scalar exps of the last 6 of each row (81 -> 45 us a call, AVX-512).
  llvm::MDNode* LoopHint(tir::ForKind kind, bool masked_tail) {
    llvm::SmallVector<llvm::Metadata*, 2> properties;
    const auto flag = [&](const char* name) {
      properties.push_back(llvm::MDNode::get(
          m_.ctx,
          {llvm::MDString::get(m_.ctx, name), llvm::ConstantAsMetadata::get(b_.getTrue())}));
    };
    if (kind == tir::ForKind::kVectorized) {
      flag("llvm.loop.vectorize.enable");
      if (masked_tail) flag("llvm.loop.vectorize.predicate.enable");
    } else if (kind == tir::ForKind::kUnrolled) {
      properties.push_back(
          llvm::MDNode::get(m_.ctx, {llvm::MDString::get(m_.ctx, "llvm.loop.unroll.enable")}));
    } else {
      return nullptr;
    }
    // A loop ID is a distinct node whose first operand is itself.
    llvm::TempMDTuple placeholder = llvm::MDNode::getTemporary(m_.ctx, {});
    llvm::SmallVector<llvm::Metadata*, 3> operands = {placeholder.get()};
    operands.append(properties.begin(), properties.end());
    llvm::MDNode* loop = llvm::MDNode::getDistinct(m_.ctx, operands);
    loop->replaceOperandWith(0, loop);
    return loop;
  }

  llvm::AllocaInst* EntryAlloca(llvm::Type* type) {
    llvm::IRBuilder<> entry(&function_->getEntryBlock(), function_->getEntryBlock().begin());
    llvm::AllocaInst* alloca = entry.CreateAlloca(type);
    alloca->setAlignment(llvm::Align(64));
    return alloca;
  }

  void EmitAllocate(const tir::AllocateNode& op) {
    const tir::BufferNode& buffer = *op.buffer;
    llvm::Type* type = MemoryType(buffer.dtype);
    const tir::Expr count = tir::NumElements(buffer.shape);
    const auto bytes = static_cast<int64_t>(buffer.dtype.bytes());
    ++allocate_depth_;
    int64_t constant_count;
    const bool constant = tir::AsInt(count, &constant_count) && constant_count >= 0;
    const bool small = constant && constant_count <= kMaxStackBytes / bytes;
    if (buffer.scope == tir::MemoryScope::kGpuShared) {
      BindBuffer(&buffer, SharedArray(buffer, type, constant ? constant_count : -1));
      Emit(op.body);
    } else if (small && place_ != Place::kGpuHost) {
      BindBuffer(&buffer, EntryAlloca(llvm::ArrayType::get(type, constant_count)));
      Emit(op.body);
    } else if (OnDevice()) {
      Unsupported("buffer " + buffer.name +
                  " is too large or not of constant size for a GPU thread");
    } else {
      // malloc(0) may return null: ask for at least one byte. A GPU kernel's
      // temporaries are device memory, allocated and freed in stream order.
      Value* size = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umax,
                                             b_.CreateMul(EmitIndex(count), b_.getInt64(bytes)),
                                             b_.getInt64(1));
      Value* data = b_.CreateCall(
          place_ == Place::kGpuHost ? llvm::FunctionCallee(m_.device_alloc) : m_.malloc_fn, {size});
      FailUnless(b_.CreateIsNotNull(data), "cannot allocate memory for buffer " + buffer.name);
      BindBuffer(&buffer, data);
      heap_.push_back(data);
      Emit(op.body);
      heap_.pop_back();
      b_.CreateCall(Free(), {data});
    }
    buffers_.erase(&buffer);
    --allocate_depth_;
  }

  // The loop's body goes into `chunk(begin, end, closure)`, which the runtime
  // calls on its threads over disjoint ranges: the closure holds every value
  // the body uses from around the loop. chunk passes them to an inlined
  // function, so that buffer pointers are noalias there as in the kernel.
  // What a loop's body uses from around it: the buffers, then the variables
  // (the loop's own excluded), and their values here.
  struct Captures {
    std::vector<const tir::BufferNode*> buffers;
    std::vector<const tir::VarNode*> vars;
    std::vector<Value*> values;  // the buffers' then the variables'
  };

  Captures Capture(const tir::ForNode& loop) {
    UseCollector uses;
    uses.Visit(loop.body);
    Captures captures;
    for (const tir::BufferNode* buffer : uses.buffers) {
      if (const auto found = buffers_.find(buffer); found != buffers_.end()) {
        captures.buffers.push_back(buffer);
        captures.values.push_back(found->second);
      }
    }
    for (const tir::VarNode* var : uses.vars) {
      if (const auto found = vars_.find(var); found != vars_.end() && var != loop.var.get()) {
        captures.vars.push_back(var);
        captures.values.push_back(found->second);
      }
    }
    return captures;
  }

  // Binds the captures to `function`'s parameters from `first` on: buffers
  // are noalias there, as in the kernel.
  void BindCaptures(const Captures& captures, llvm::Function* function, unsigned first) {
    for (size_t i = 0; i < captures.buffers.size(); ++i) {
      function->addParamAttr(first + i, llvm::Attribute::NoAlias);
      BindBuffer(captures.buffers[i], function->getArg(first + i));
    }
    for (size_t i = 0; i < captures.vars.size(); ++i) {
      BindVar(captures.vars[i], function->getArg(first + captures.buffers.size() + i));
    }
  }

  void EmitParallelFor(const tir::ForNode& loop) {
    const Captures captures = Capture(loop);
    const std::vector<Value*>& captured = captures.values;
    std::vector<llvm::Type*> body_params = {b_.getInt64Ty(), b_.getInt64Ty()};
    for (Value* value : captured) body_params.push_back(value->getType());

    const std::string name = k_.name + "_parallel" + std::to_string(k_.num_parallel_loops++);
    llvm::Function* body =
        m_.Internal(llvm::FunctionType::get(b_.getInt32Ty(), body_params, false), name + "_body");
    body->addFnAttr(llvm::Attribute::AlwaysInline);
    {
      FunctionEmitter inner(m_, k_, body, Place::kCpuParallelChunk);
      inner.BindCaptures(captures, body, 2);
      llvm::Type* type = inner.ValueType(loop.var->dtype);
      inner.EmitLoop(*loop.var, inner.b_.CreateIntCast(body->getArg(0), type, true),
                     inner.b_.CreateIntCast(body->getArg(1), type, true), loop.body,
                     tir::ForKind::kSerial);
      inner.b_.CreateRet(inner.b_.getInt32(0));
    }

    std::vector<llvm::Type*> field_types;
    for (Value* value : captured) field_types.push_back(value->getType());
    llvm::StructType* closure_type = llvm::StructType::get(m_.ctx, field_types);
    llvm::Function* chunk = m_.Internal(m_.chunk_type, name);
    {
      llvm::IRBuilder<> b(llvm::BasicBlock::Create(m_.ctx, "entry", chunk));
      std::vector<Value*> args = {chunk->getArg(0), chunk->getArg(1)};
      for (size_t i = 0; i < captured.size(); ++i) {
        args.push_back(
            b.CreateLoad(field_types[i], b.CreateStructGEP(closure_type, chunk->getArg(2), i)));
      }
      b.CreateRet(b.CreateCall(body, args));
    }

    llvm::AllocaInst* closure = EntryAlloca(closure_type);
    for (size_t i = 0; i < captured.size(); ++i) {
      b_.CreateStore(captured[i], b_.CreateStructGEP(closure_type, closure, i));
    }
    Value* status = b_.CreateCall(
        m_.parallel_for, {EmitIndex(loop.extent), EmitIndex(loop.min_chunk), chunk, closure});
    FailUnless(b_.CreateIsNull(status), nullptr);
  }

  static bool IsBlockCombine(tir::Intrinsic intrinsic) {
    return intrinsic == tir::Intrinsic::kBlockSum || intrinsic == tir::Intrinsic::kBlockProd ||
           intrinsic == tir::Intrinsic::kBlockMax || intrinsic == tir::Intrinsic::kBlockMin;
  }

  Value* ThreadInBlock() {
    return b_.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, {}, {});
  }

  // A kGpuShared buffer of `count` elements: an array of the GPU module, one
  // per block. Its place in the kernel is checked here, as the interpreter of
  // the tests checks it: a thread's own code cannot allocate for the block.
  Value* SharedArray(const tir::BufferNode& buffer, llvm::Type* type, int64_t count) {
    if (place_ != Place::kGpuBlock || in_block_threads_ || block_stride_depth_ > 0) {
      Unsupported("shared buffer " + buffer.name +
                  " outside the code that every thread of a gpu_blocks loop runs");
    }
    shared_bytes_ += count * static_cast<int64_t>(buffer.dtype.bytes());
    if (count < 0 || shared_bytes_ > kMaxSharedBytes) {
      Unsupported("shared buffer " + buffer.name + " is not of a constant size within " +
                  std::to_string(kMaxSharedBytes) + " bytes a block");
    }
    return SharedGlobal(llvm::ArrayType::get(type, static_cast<uint64_t>(count)), buffer.name,
                        llvm::Align(16));
  }

  // An array of the GPU module in shared memory, one per block.
  llvm::GlobalVariable* SharedGlobal(llvm::ArrayType* array_type, const std::string& name,
                                     llvm::Align align) {
    auto* shared = new llvm::GlobalVariable(
        m_.module, array_type, /*isConstant=*/false, llvm::GlobalValue::InternalLinkage,
        llvm::UndefValue::get(array_type), k_.name + "_" + name, nullptr,
        llvm::GlobalValue::NotThreadLocal, kSharedAddressSpace);
    shared->setAlignment(align);
    return shared;
  }

  // Thread t of the block runs iterations t, t + block threads, ...
  void EmitBlockStrideLoop(const tir::ForNode& loop) {
    llvm::Type* type = ValueType(loop.var->dtype);
    ++block_stride_depth_;
    EmitLoop(*loop.var, b_.CreateZExt(ThreadInBlock(), type),
             b_.CreateIntCast(EmitIndex(loop.extent), type, true), loop.body, loop.for_kind,
             block_threads_);
    --block_stride_depth_;
  }

  // `value` of every thread of the block, combined by a halving tree in
  // shared memory (each step combines pairs, then the block waits at a
  // barrier); every thread gets the result. Each call has its own shared
  // array, so a second combine never overwrites one that a thread still reads.
  Value* EmitBlockCombine(tir::Intrinsic intrinsic, DataType dtype, Value* value) {
    const std::string name = tir::IntrinsicName(intrinsic);
    if (place_ != Place::kGpuBlock || block_stride_depth_ > 0) {
      Unsupported(name + " outside the code that every thread of a gpu_blocks loop runs");
    }
    if (dtype.is_bool()) Unsupported(name + " of bool is not supported");
    if ((block_threads_ & (block_threads_ - 1)) != 0) {
      Unsupported(name + " in a block of " + std::to_string(block_threads_) +
                  " threads, not a power of two");
    }
    llvm::Type* type = ValueType(dtype);
    auto* array_type = llvm::ArrayType::get(type, static_cast<uint64_t>(block_threads_));
    llvm::GlobalVariable* shared = SharedGlobal(array_type, name, llvm::Align(dtype.bytes()));
    Value* thread = ThreadInBlock();
    auto slot = [&](Value* index) {
      return b_.CreateInBoundsGEP(array_type, shared, {b_.getInt32(0), index});
    };
    auto barrier = [&] { b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {}); };
    const llvm::Align align(dtype.bytes());
    b_.CreateAlignedStore(value, slot(thread), align);
    barrier();
    const tir::Var left = tir::MakeVar("left", dtype);
    const tir::Var right = tir::MakeVar("right", dtype);
    const tir::Expr combine = BlockCombineExpr(intrinsic, left, right);
    for (int64_t half = block_threads_ / 2; half > 0; half /= 2) {
      llvm::BasicBlock* pair = llvm::BasicBlock::Create(m_.ctx, "combine", function_);
      llvm::BasicBlock* wait = llvm::BasicBlock::Create(m_.ctx, "wait", function_);
      b_.CreateCondBr(b_.CreateICmpULT(thread, b_.getInt32(static_cast<uint32_t>(half))), pair,
                      wait);
      b_.SetInsertPoint(pair);
      Value* partner = slot(b_.CreateAdd(thread, b_.getInt32(static_cast<uint32_t>(half))));
      WithVar(left.get(), b_.CreateAlignedLoad(type, slot(thread), align), [&] {
        WithVar(right.get(), b_.CreateAlignedLoad(type, partner, align),
                [&] { b_.CreateAlignedStore(Emit(combine), slot(thread), align); });
      });
      b_.CreateBr(wait);
      b_.SetInsertPoint(wait);
      barrier();
    }
    return b_.CreateAlignedLoad(type, slot(b_.getInt32(0)), align);
  }

  // How a block intrinsic combines two partial results: as te's reductions
  // do (max and min keep the left one unless the right is strictly better,
  // so NaNs are skipped).
  static tir::Expr BlockCombineExpr(tir::Intrinsic intrinsic, const tir::Var& left,
                                    const tir::Var& right) {
    switch (intrinsic) {
      case tir::Intrinsic::kBlockSum:
        return tir::Add(left, right);
      case tir::Intrinsic::kBlockProd:
        return tir::Mul(left, right);
      case tir::Intrinsic::kBlockMax:
        return tir::Select(tir::Compare(tir::CompareOp::kGt, right, left), right, left);
      case tir::Intrinsic::kBlockMin:
        return tir::Select(tir::Compare(tir::CompareOp::kLt, right, left), right, left);
      default:
        throw Error("code generation: " + tir::IntrinsicName(intrinsic) +
                    " is not a block combine");
    }
  }

  // The threads of a block of `loop` (a kGpuBlocks loop): the extent of its
  // kGpuBlockThreads loop, which must sit on the chain of sequences, lets and
  // allocations that every thread runs once; else the default.
  int64_t BlockThreads(const tir::ForNode& loop) {
    int64_t threads = 0;
    tir::VisitInOrder(
        loop.body,
        [&](const tir::Stmt& stmt, bool top) {
          if (stmt->kind != tir::StmtKind::kFor) return;
          const auto& inner = static_cast<const tir::ForNode&>(*stmt);
          if (inner.for_kind != tir::ForKind::kGpuBlockThreads) return;
          if (!top || threads != 0) {
            Unsupported("gpu_block_threads loop " + inner.var->name +
                        " inside a loop or branch of its block, or after another");
          }
          if (!tir::AsInt(inner.extent, &threads) || threads < 1 || threads > kMaxBlockThreads) {
            Unsupported("gpu_block_threads loop " + inner.var->name + " of extent " +
                        tir::ToString(inner.extent) + ", not a constant from 1 to " +
                        std::to_string(kMaxBlockThreads));
          }
        },
        [](const tir::Expr&) {});
    return threads != 0 ? threads : kDefaultBlockThreads;
  }

  // The loop's body becomes the GPU kernel NAME_gpuK(captures..., int64
  // extent) of the GPU module; here, the runtime's launch hook queues it with
  // pointers to the captured values, as cuLaunchKernel takes them. A
  // kGpuThreads loop runs iteration i on thread i of blocks of
  // kDefaultBlockThreads (threads past the extent do nothing); a kGpuBlocks
  // loop runs iteration i on block i, of BlockThreads threads.
  void EmitGpuLaunch(const tir::ForNode& loop) {
    const bool per_block = loop.for_kind == tir::ForKind::kGpuBlocks;
    const int64_t block_threads = per_block ? BlockThreads(loop) : kDefaultBlockThreads;
    const Captures captures = Capture(loop);
    std::vector<llvm::Type*> params;
    for (Value* value : captures.values) params.push_back(value->getType());
    params.push_back(b_.getInt64Ty());
    const std::string name = k_.name + "_gpu" + std::to_string(k_.num_gpu_loops++);
    ModuleState& gpu = *k_.gpu_module;
    llvm::Function* kernel = llvm::Function::Create(
        llvm::FunctionType::get(llvm::Type::getVoidTy(gpu.ctx), params, false),
        llvm::GlobalValue::ExternalLinkage, name, gpu.module);
    if (kernel->getName() != name) Unsupported("GPU kernel name " + name + " is used twice");
    kernel->setCallingConv(llvm::CallingConv::PTX_Kernel);
    {
      FunctionEmitter device(gpu, k_, kernel, per_block ? Place::kGpuBlock : Place::kGpuThread);
      device.block_threads_ = block_threads;
      device.BindCaptures(captures, kernel, 0);
      llvm::IRBuilder<>& b = device.b_;
      auto special = [&](llvm::Intrinsic::ID id) {
        return b.CreateZExt(b.CreateIntrinsic(id, {}, {}), b.getInt64Ty());
      };
      Value* block = special(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x);
      Value* index = per_block ? block
                               : b.CreateAdd(b.CreateMul(block, b.getInt64(block_threads)),
                                             special(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x));
      llvm::BasicBlock* body = llvm::BasicBlock::Create(gpu.ctx, "iteration", kernel);
      llvm::BasicBlock* done = llvm::BasicBlock::Create(gpu.ctx, "done", kernel);
      b.CreateCondBr(b.CreateICmpSLT(index, kernel->getArg(captures.values.size())), body, done);
      b.SetInsertPoint(body);
      device.WithVar(loop.var.get(),
                     b.CreateIntCast(index, device.ValueType(loop.var->dtype), true),
                     [&] { device.Emit(loop.body); });
      b.CreateBr(done);
      b.SetInsertPoint(done);
      b.CreateRetVoid();
    }

    Value* extent = EmitIndex(loop.extent);
    std::vector<Value*> values = captures.values;
    values.push_back(extent);
    llvm::AllocaInst* pointers = EntryAlloca(llvm::ArrayType::get(m_.ptr, values.size()));
    for (size_t i = 0; i < values.size(); ++i) {
      llvm::AllocaInst* slot = EntryAlloca(values[i]->getType());
      b_.CreateStore(values[i], slot);
      b_.CreateStore(slot, b_.CreateConstInBoundsGEP1_64(m_.ptr, pointers, i));
    }
    Value* blocks = per_block ? extent
                              : b_.CreateSDiv(b_.CreateAdd(extent, b_.getInt64(block_threads - 1)),
                                              b_.getInt64(block_threads));
    Value* status = b_.CreateCall(
        m_.launch,
        {m_.String(name), blocks, b_.getInt32(static_cast<uint32_t>(block_threads)), pointers});
    FailUnless(b_.CreateIsNull(status), nullptr);
  }

  ModuleState& m_;
  KernelState& k_;
  llvm::Function* function_;
  llvm::IRBuilder<> b_;
  const Place place_;
  int allocate_depth_ = 0;
  int block_stride_depth_ = 0;
  // In a GPU block's kernel: its threads, whether the code emitted now is a
  // kGpuBlockThreads loop's (one thread's), and its shared memory so far.
  int64_t block_threads_ = kDefaultBlockThreads;
  bool in_block_threads_ = false;
  int64_t shared_bytes_ = 0;
  std::unordered_map<const tir::VarNode*, Value*> vars_;
  std::unordered_map<const tir::BufferNode*, Value*> buffers_;
  std::vector<Value*> heap_;  // live heap buffers, freed on failure
};

// One kernel: the exported function checks the arguments and binds the shape
// variables, then calls NAME_body (alwaysinline), whose buffer parameters are
// noalias: an output never aliases an input in the VM.
void EmitKernel(ModuleState& m, ModuleState* gpu, const tir::PrimFunc& func,
                llvm::Function* wrapper) {
  const bool on_gpu = func.device == tir::PrimFunc::Device::kGpu;
  if (on_gpu && !gpu)
    throw Error("kernel " + func.name + " is for the GPU, and the target has none");
  KernelState kernel{func.name, gpu};
  struct Dimension {
    size_t param;
    size_t dim;
  };
  // Each shape variable binds at its first occurrence (parameter order, then
  // dimension order); every other dimension is checked.
  std::vector<const tir::VarNode*> shape_vars;
  std::vector<Dimension> var_sources;
  std::vector<Dimension> checked;
  std::unordered_set<const tir::VarNode*> bound;
  for (size_t p = 0; p < func.params.size(); ++p) {
    const std::vector<tir::Expr>& shape = func.params[p]->shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      const auto* var = shape[d]->kind == tir::ExprKind::kVar
                            ? static_cast<const tir::VarNode*>(shape[d].get())
                            : nullptr;
      if (var && bound.insert(var).second) {
        if (var->dtype != DataType::Int64()) {
          throw Error("kernel " + func.name + ": shape variable " + var->name + " of buffer " +
                      func.params[p]->name + " is " + var->dtype.name() + ", not int64");
        }
        shape_vars.push_back(var);
        var_sources.push_back({p, d});
      } else {
        checked.push_back({p, d});
      }
    }
  }

  std::vector<llvm::Type*> body_params(func.params.size(), m.ptr);
  body_params.resize(func.params.size() + shape_vars.size(), m.i64);
  llvm::Function* body =
      m.Internal(llvm::FunctionType::get(m.i32, body_params, false), func.name + "_body");
  body->addFnAttr(llvm::Attribute::AlwaysInline);
  {
    FunctionEmitter emitter(m, kernel, body, on_gpu ? Place::kGpuHost : Place::kCpu);
    for (size_t p = 0; p < func.params.size(); ++p) {
      emitter.MemoryType(func.params[p]->dtype);  // rejects unsupported dtypes
      body->addParamAttr(p, llvm::Attribute::NoAlias);
      emitter.BindBuffer(func.params[p].get(), body->getArg(p));
    }
    for (size_t v = 0; v < shape_vars.size(); ++v) {
      emitter.BindVar(shape_vars[v], body->getArg(func.params.size() + v));
    }
    emitter.Emit(func.body);
    emitter.builder().CreateRet(emitter.builder().getInt32(0));
  }

  FunctionEmitter checks(m, kernel, wrapper, Place::kCpu);
  llvm::IRBuilder<>& b = checks.builder();
  auto field = [&](Value* tensor, DLTensorField index, llvm::Type* type) {
    return b.CreateLoad(type, b.CreateStructGEP(m.dltensor, tensor, index));
  };
  const size_t num_params = func.params.size();
  checks.FailUnless(
      b.CreateICmpEQ(wrapper->getArg(2), b.getInt32(static_cast<uint32_t>(num_params))),
      "expected " + std::to_string(num_params) + " arguments");
  std::vector<Value*> call_args;
  std::vector<std::vector<Value*>> extents(num_params);
  for (size_t p = 0; p < num_params; ++p) {
    const tir::BufferNode& buffer = *func.params[p];
    const std::string argument = "argument " + std::to_string(p) + " (" + buffer.name + "): ";
    const size_t rank = buffer.shape.size();
    Value* tensor = b.CreateLoad(m.ptr, b.CreateConstInBoundsGEP1_64(m.ptr, wrapper->getArg(1), p));
    checks.FailUnless(
        b.CreateICmpEQ(field(tensor, kDeviceType, m.i32), b.getInt32(on_gpu ? kDLCUDA : kDLCPU)),
        argument + (on_gpu ? "is not on the GPU" : "is not on the CPU"));
    checks.FailUnless(
        b.CreateICmpEQ(field(tensor, kNdim, m.i32), b.getInt32(static_cast<uint32_t>(rank))),
        argument + "rank is not " + std::to_string(rank));
    const DLDataType dtype = ToDLDataType(buffer.dtype);
    Value* same_dtype = b.CreateAnd(
        {b.CreateICmpEQ(field(tensor, kDTypeCode, b.getInt8Ty()), b.getInt8(dtype.code)),
         b.CreateICmpEQ(field(tensor, kDTypeBits, b.getInt8Ty()), b.getInt8(dtype.bits)),
         b.CreateICmpEQ(field(tensor, kDTypeLanes, b.getInt16Ty()), b.getInt16(dtype.lanes))});
    checks.FailUnless(same_dtype, argument + "dtype is not " + buffer.dtype.name());
    Value* shape = field(tensor, kShape, m.ptr);
    for (size_t d = 0; d < rank; ++d) {
      extents[p].push_back(b.CreateLoad(m.i64, b.CreateConstInBoundsGEP1_64(m.i64, shape, d)));
    }
    // Null strides, or compact row-major ones (a dimension of extent 1 may
    // have any stride; so may every dimension of an empty tensor).
    Value* strides = field(tensor, kStrides, m.ptr);
    Value* compact = checks.EmitConditional(
        b.CreateIsNull(strides), [&] { return b.getTrue(); },
        [&] {
          Value* ok = b.getTrue();
          Value* expected = b.getInt64(1);
          for (size_t d = rank; d-- > 0;) {
            Value* stride = b.CreateLoad(m.i64, b.CreateConstInBoundsGEP1_64(m.i64, strides, d));
            ok = b.CreateAnd(ok, b.CreateOr(b.CreateICmpEQ(extents[p][d], b.getInt64(1)),
                                            b.CreateICmpEQ(stride, expected)));
            expected = b.CreateMul(expected, extents[p][d]);
          }
          return b.CreateOr(ok, b.CreateIsNull(expected));
        });
    checks.FailUnless(compact, argument + "strides are not compact row-major");
    call_args.push_back(b.CreateInBoundsGEP(b.getInt8Ty(), field(tensor, kData, m.ptr),
                                            field(tensor, kByteOffset, m.i64)));
  }
  for (size_t v = 0; v < shape_vars.size(); ++v) {
    Value* extent = extents[var_sources[v].param][var_sources[v].dim];
    checks.BindVar(shape_vars[v], extent);
    call_args.push_back(extent);
  }
  for (const Dimension& dimension : checked) {
    const tir::BufferNode& buffer = *func.params[dimension.param];
    const tir::Expr& expected = buffer.shape[dimension.dim];
    checks.FailUnless(
        b.CreateICmpEQ(extents[dimension.param][dimension.dim], checks.EmitIndex(expected)),
        "argument " + std::to_string(dimension.param) + " (" + buffer.name + "): dimension " +
            std::to_string(dimension.dim) + " is not " + tir::ToString(expected));
  }
  b.CreateRet(b.CreateCall(body, call_args));
}

// Keeps LLVM from printing warnings (a loop it was asked to vectorise but
// could not) and from exiting on errors: errors are collected and thrown.
void CollectErrors(const llvm::DiagnosticInfo* info, void* context) {
  if (info->getSeverity() != llvm::DS_Error) return;
  std::string message;
  llvm::raw_string_ostream out(message);
  llvm::DiagnosticPrinterRawOStream printer(out);
  info->print(printer);
  static_cast<std::vector<std::string>*>(context)->push_back(out.str());
}

void ThrowOnErrors(const std::vector<std::string>& errors, const CodegenTarget& target) {
  if (errors.empty()) return;
  std::string message = "code generation for " + target.name + " failed:";
  for (const std::string& error : errors) message += "\n" + error;
  throw Error(message);
}

// Verifies `module` and optimises it at O3 for `machine`.
void Optimise(llvm::Module& module, llvm::TargetMachine& machine, const CodegenTarget& target,
              const std::vector<std::string>& errors) {
  std::string broken;
  llvm::raw_string_ostream out(broken);
  if (llvm::verifyModule(module, &out)) {
    throw Error("code generation produced invalid LLVM IR (internal error): " + out.str());
  }
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager cgscc;
  llvm::ModuleAnalysisManager modules;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder passes(&machine, tuning);
  passes.registerModuleAnalyses(modules);
  passes.registerCGSCCAnalyses(cgscc);
  passes.registerFunctionAnalyses(functions);
  passes.registerLoopAnalyses(loops);
  passes.crossRegisterProxies(loops, functions, cgscc, modules);
  passes.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(module, modules);
  ThrowOnErrors(errors, target);
}

std::unique_ptr<llvm::Module> NewModule(llvm::LLVMContext& ctx, llvm::TargetMachine& machine) {
  auto module = std::make_unique<llvm::Module>("nimble_kernels", ctx);
  module->setTargetTriple(machine.getTargetTriple().str());
  module->setDataLayout(machine.createDataLayout());
  return module;
}

// The host module of `kernels` and, when some run on the GPU, the GPU module
// of their loops; both verified and optimised.
struct Modules {
  std::unique_ptr<llvm::Module> host;
  std::unique_ptr<llvm::Module> gpu;  // null without GPU kernels
};

Modules Compile(llvm::LLVMContext& ctx, std::span<const tir::PrimFunc> kernels,
                const CodegenTarget& target, std::vector<std::string>* errors,
                std::unique_ptr<llvm::TargetMachine>* host_machine,
                std::unique_ptr<llvm::TargetMachine>* gpu_machine) {
  ctx.setDiagnosticHandlerCallBack(CollectErrors, errors);
  *host_machine = MakeHostMachine(target);
  Modules modules{NewModule(ctx, **host_machine), nullptr};
  modules.host->setPICLevel(llvm::PICLevel::BigPIC);
  const bool any_gpu = std::any_of(kernels.begin(), kernels.end(), [](const tir::PrimFunc& k) {
    return k.device == tir::PrimFunc::Device::kGpu;
  });
  std::optional<ModuleState> gpu_state;
  if (any_gpu && !target.device_triple.empty()) {
    *gpu_machine = MakeDeviceMachine(target);
    modules.gpu = NewModule(ctx, **gpu_machine);
    gpu_state.emplace(*modules.gpu, std::span<const tir::PrimFunc>(), /*host=*/false);
  }
  ModuleState state(*modules.host, kernels, /*host=*/true);
  state.masked_tails = target.features.find("+avx512f") != std::string::npos;
  for (size_t i = 0; i < kernels.size(); ++i) {
    EmitKernel(state, gpu_state ? &*gpu_state : nullptr, kernels[i], state.wrappers[i]);
  }
  Optimise(*modules.host, **host_machine, target, *errors);
  if (modules.gpu) Optimise(*modules.gpu, **gpu_machine, target, *errors);
  return modules;
}

// `module` emitted by `machine` as a file of `type`.
std::string EmitFile(llvm::Module& module, llvm::TargetMachine& machine, llvm::CodeGenFileType type,
                     const CodegenTarget& target, const std::vector<std::string>& errors) {
  llvm::SmallVector<char, 0> bytes;
  llvm::raw_svector_ostream out(bytes);
  llvm::legacy::PassManager codegen;
  if (machine.addPassesToEmitFile(codegen, out, nullptr, type)) {
    throw Error("code generation for " + target.name + ": LLVM cannot emit " +
                (type == llvm::CodeGenFileType::ObjectFile ? "an object file" : "assembly") +
                " for " + machine.getTargetTriple().str());
  }
  codegen.run(module);
  ThrowOnErrors(errors, target);
  return std::string(bytes.data(), bytes.size());
}

std::string ModuleText(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream out(text);
  module.print(out, nullptr);
  return out.str();
}

}  // namespace

std::vector<std::byte> EmitObject(std::span<const tir::PrimFunc> kernels,
                                  const CodegenTarget& target, std::string* ptx) {
  llvm::LLVMContext ctx;
  std::vector<std::string> errors;
  std::unique_ptr<llvm::TargetMachine> host_machine, gpu_machine;
  const Modules modules = Compile(ctx, kernels, target, &errors, &host_machine, &gpu_machine);
  if (modules.gpu) {
    if (!ptx) throw Error("code generation for " + target.name + ": GPU kernels need a PTX output");
    *ptx =
        EmitFile(*modules.gpu, *gpu_machine, llvm::CodeGenFileType::AssemblyFile, target, errors);
  }
  const std::string object =
      EmitFile(*modules.host, *host_machine, llvm::CodeGenFileType::ObjectFile, target, errors);
  const auto* bytes = reinterpret_cast<const std::byte*>(object.data());
  return std::vector<std::byte>(bytes, bytes + object.size());
}

std::string EmitLLVMText(std::span<const tir::PrimFunc> kernels, const CodegenTarget& target) {
  llvm::LLVMContext ctx;
  std::vector<std::string> errors;
  std::unique_ptr<llvm::TargetMachine> host_machine, gpu_machine;
  const Modules modules = Compile(ctx, kernels, target, &errors, &host_machine, &gpu_machine);
  return ModuleText(*modules.host) + (modules.gpu ? ModuleText(*modules.gpu) : "");
}

}  // namespace nimble::codegen
