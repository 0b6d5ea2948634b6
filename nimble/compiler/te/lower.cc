#include "nimble/compiler/te/lower.h"

#include <functional>
#include <map>
#include <set>
#include <utility>

#include "nimble/compiler/te/gpu_matmul_schedule.h"
#include "nimble/compiler/te/matmul_schedule.h"
#include "nimble/compiler/te/parallel_chunk.h"
#include "nimble/compiler/tir/merge_gpu_loops.h"
#include "nimble/compiler/tir/registerize_thread_buffers.h"
#include "nimble/compiler/tir/simplify.h"
#include "nimble/vm/error.h"

namespace nimble::te {
namespace {

using Substitution = std::map<const tir::VarNode*, Expr>;
// The value of a read of a tensor that has no buffer, at its lowered indices.
using ReadValueFn = std::function<Expr(const std::vector<Expr>& indices)>;

bool IsReduction(const TensorNode& tensor) {
  return tensor.body && tensor.body->kind == tir::ExprKind::kReduce;
}

class Lowerer {
 public:
  Lowerer(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
          const MatMulKnobs& matmul_knobs, bool gpu)
      : matmul_knobs_(matmul_knobs), gpu_(gpu) {
    for (const Tensor& input : inputs) {
      if (!input->is_placeholder()) throw Error("te: kernel input " + input->name + " is computed");
      buffers_[input.get()] = MakeBuffer(*input);
      input_buffers_.push_back(buffers_[input.get()]);
    }
    for (const Tensor& output : outputs) outputs_.insert(output.get());
    for (const Tensor& output : outputs) CountBodyReads(*output);
    for (const Tensor& output : outputs) {
      if (output->is_placeholder())
        throw Error("te: kernel output " + output->name + " is an input");
      CollectStages(output);
    }
  }

  tir::Stmt LowerStages(const std::vector<Tensor>& outputs,
                        std::vector<tir::Buffer>* output_buffers) {
    for (const Tensor& output : outputs) {
      buffers_[output.get()] = MakeBuffer(*output);
      output_buffers->push_back(buffers_[output.get()]);
    }
    // Temporaries are allocated around everything after their own stage.
    std::vector<tir::Stmt> body;
    std::vector<tir::Buffer> temporaries;
    const auto buffer_of = [&](const Tensor& stage) {
      if (!outputs_.count(stage.get())) {
        buffers_[stage.get()] = MakeBuffer(*stage);
        temporaries.push_back(buffers_[stage.get()]);
      }
      return buffers_.at(stage.get());
    };
    for (size_t s = 0; s < stages_.size(); ++s) {
      const Tensor& stage = stages_[s];
      if (ComputedInItsReaders(s)) {
        inlined_reductions_.insert(stage.get());
        continue;
      }
      if (s + 1 < stages_.size()) {
        const Tensor& epilogue = stages_[s + 1];
        if (std::optional<Expr> fits = EpilogueCondition(*stage, *epilogue)) {
          body.push_back(LowerWithEpilogue(*stage, *epilogue, buffer_of(epilogue), *fits));
          ++s;
          continue;
        }
      }
      body.push_back(LowerOwnLoops(*stage, buffer_of(stage)));
    }
    tir::Stmt result = tir::Seq(std::move(body));
    for (auto it = temporaries.rbegin(); it != temporaries.rend(); ++it) {
      result = tir::Allocate(*it, result);
    }
    return result;
  }

  const std::vector<tir::Buffer>& input_buffers() const { return input_buffers_; }

 private:
  // Named after the tensor, with a suffix when another buffer of the kernel
  // has its name already (a fused LSTM cell has several `multiply`s), so that
  // the printed loop IR reads unambiguously.
  tir::Buffer MakeBuffer(const TensorNode& tensor) {
    const int uses = buffer_names_[tensor.name]++;
    const std::string name = uses == 0 ? tensor.name : tensor.name + "_" + std::to_string(uses);
    return std::make_shared<tir::BufferNode>(name, tensor.dtype, tensor.shape);
  }

  // Counts the places each computed tensor is read from, looking through
  // each tensor's body once (an output read by another output too: an LSTM
  // cell's h' reads c', whose products were counted twice and so written
  // out).
  void CountBodyReads(const TensorNode& tensor) {
    if (counted_bodies_.insert(&tensor).second) CountReads(tensor.body);
  }

  void CountReads(const Expr& expr) {
    if (expr->kind == tir::ExprKind::kTensorRead) {
      const auto& read = static_cast<const TensorReadNode&>(*expr);
      for (const Expr& index : read.indices) CountReads(index);
      if (!read.tensor->is_placeholder()) {
        ++reads_[read.tensor.get()];
        CountBodyReads(*read.tensor);
      }
      return;
    }
    if (expr->kind == tir::ExprKind::kReduce) {
      CountReads(static_cast<const ReduceNode&>(*expr).source);
      return;
    }
    tir::ForEachOperand(expr, [&](const Expr& child) { CountReads(child); });
  }

  // Whether `tensor` is written to memory rather than inlined into its
  // readers: inputs, outputs, reductions, and tensors read in more than one
  // place unless their inlined expression is small (inlining a large one
  // would copy it per read, which grows exponentially along a chain like
  // x = add(x, x); a small one, like the input gelu reads twice, costs less
  // to recompute than a round trip through memory).
  bool IsStage(const TensorNode& tensor) {
    if (tensor.is_placeholder() || IsReduction(tensor) || outputs_.count(&tensor)) return true;
    const auto found = reads_.find(&tensor);
    return found != reads_.end() && found->second > 1 && InlinedSize(tensor) > kDuplicableSize;
  }

  static constexpr size_t kDuplicableSize = 16;

  // One node of the loop IR, but a polynomial of a dozen or more
  // instructions once generated: on the CPU an expression calling one is
  // computed once and stored (softmax's exp(x - max), which its sum and its
  // quotient both read: 45 -> 34 us a call at BERT's 54 tokens). A GPU
  // thread recomputes it rather than pay a device temporary and a launch.
  static bool IsTranscendental(const Expr& expr) {
    if (expr->kind != tir::ExprKind::kCall) return false;
    switch (static_cast<const tir::CallNode&>(*expr).intrinsic) {
      case tir::Intrinsic::kExp:
      case tir::Intrinsic::kLog:
      case tir::Intrinsic::kTanh:
      case tir::Intrinsic::kSigmoid:
      case tir::Intrinsic::kErf:
      case tir::Intrinsic::kErfc:
      case tir::Intrinsic::kPow:
        return true;
      default:
        return false;
    }
  }

  // The nodes of `tensor`'s body once the tensors it inlines are substituted
  // (a stage's read is one load), counted up to just past kDuplicableSize.
  size_t InlinedSize(const TensorNode& tensor) {
    const auto found = inlined_sizes_.find(&tensor);
    if (found != inlined_sizes_.end()) return found->second;
    size_t size = 0;
    AddInlinedSize(tensor.body, &size);
    inlined_sizes_.emplace(&tensor, size);
    return size;
  }

  void AddInlinedSize(const Expr& expr, size_t* size) {
    *size += !gpu_ && IsTranscendental(expr) ? kDuplicableSize : 1;
    if (*size > kDuplicableSize) return;
    if (expr->kind == tir::ExprKind::kTensorRead) {
      const auto& read = static_cast<const TensorReadNode&>(*expr);
      for (const Expr& index : read.indices) AddInlinedSize(index, size);
      if (!IsStage(*read.tensor)) *size += InlinedSize(*read.tensor);
      return;
    }
    tir::ForEachOperand(expr, [&](const Expr& operand) { AddInlinedSize(operand, size); });
  }

  // The work of one transcendental call, in stored elements: what the
  // parallel grain counts. Without it a softmax's 35K exps (BERT's
  // attention, 54 tokens) made one chunk, run on one thread.
  static constexpr size_t kTranscendentalWork = 8;

  // The transcendental calls in `expr` once the tensors it inlines are
  // substituted.
  size_t Transcendentals(const Expr& expr) {
    if (expr->kind == tir::ExprKind::kTensorRead) {
      const auto& read = static_cast<const TensorReadNode&>(*expr);
      size_t count = 0;
      for (const Expr& index : read.indices) count += Transcendentals(index);
      if (!IsStage(*read.tensor)) count += Transcendentals(read.tensor->body);
      return count;
    }
    size_t count = IsTranscendental(expr) ? 1 : 0;
    tir::ForEachOperand(expr, [&](const Expr& operand) { count += Transcendentals(operand); });
    return count;
  }

  // Orders the stages `tensor` depends on before it (post-order), once each.
  void CollectStages(const Tensor& tensor) {
    if (tensor->is_placeholder()) {
      if (!buffers_.count(tensor.get())) {
        throw Error("te: " + tensor->name + " is read but is not an input of the kernel");
      }
      return;
    }
    if (!visited_.insert(tensor.get()).second) return;
    VisitReads(tensor->body);
    stages_.push_back(tensor);
  }

  // Stages of the tensors `expr` reads; inlined tensors are looked through.
  // An output read by another output is a stage before its reader, whose
  // reads load from the output's buffer.
  void VisitReads(const Expr& expr) {
    switch (expr->kind) {
      case tir::ExprKind::kTensorRead: {
        const auto& read = static_cast<const TensorReadNode&>(*expr);
        for (const Expr& index : read.indices) VisitReads(index);
        if (IsStage(*read.tensor)) {
          CollectStages(read.tensor);
        } else if (inlined_.insert(read.tensor.get()).second) {
          VisitReads(read.tensor->body);
        }
        return;
      }
      case tir::ExprKind::kReduce:
        VisitReads(static_cast<const ReduceNode&>(*expr).source);
        return;
      default:
        tir::ForEachOperand(expr, [&](const Expr& child) { VisitReads(child); });
    }
  }

  // `expr` with variables replaced per `substitution`, reads of stages and
  // inputs turned into loads, and other computed tensors inlined.
  Expr LowerExpr(const Expr& expr, const Substitution& substitution) {
    const auto lower = [&](const Expr& child) { return LowerExpr(child, substitution); };
    switch (expr->kind) {
      case tir::ExprKind::kVar: {
        const auto found = substitution.find(static_cast<const tir::VarNode*>(expr.get()));
        return found == substitution.end() ? expr : found->second;
      }
      case tir::ExprKind::kTensorRead: {
        const auto& read = static_cast<const TensorReadNode&>(*expr);
        std::vector<Expr> indices;
        for (const Expr& index : read.indices) indices.push_back(lower(index));
        const auto intercept = intercepts_.find(read.tensor.get());
        if (intercept != intercepts_.end()) return intercept->second(indices);
        const auto buffer = buffers_.find(read.tensor.get());
        if (buffer != buffers_.end()) {
          return tir::Load(buffer->second, tir::FlatIndex(buffer->second->shape, indices));
        }
        if (IsStage(*read.tensor)) {
          throw Error("te: " + read.tensor->name + " is read before it is computed");
        }
        Substitution inner;
        for (size_t i = 0; i < indices.size(); ++i) {
          inner[read.tensor->axes[i].get()] = indices[i];
        }
        return LowerExpr(read.tensor->body, inner);
      }
      case tir::ExprKind::kReduce:
        throw Error("te: a reduction that is not the whole body of its tensor");
      default:
        return tir::MapOperands(expr, lower);
    }
  }

  // Where `consumer`, the stage after `product`, is the product's epilogue,
  // which the product's loops can store in place of each sum: the condition
  // under which it is, or nothing where it never is. An epilogue is an
  // elementwise consumer of a matrix product read nowhere else (and no
  // output) that reads it only at its own indices (a bias, an activation, a
  // residual add), over the product's shape. Where the two shapes may differ
  // (a residual add's rows, `select(d1 == 1, d2, d1)` beside the product's
  // d1: each input's `?` is a variable of its own), the condition is that
  // they are equal; a broadcast read `select(d1 == 1, 0, i)` is then read at
  // i. That is for the GPU, where it saves a launch: on the CPU its branch
  // would double the template's code for a store of each sum that is
  // scalar where the consumer's own loop is vectorised (the CI gate's small
  // BERT counted 1.4% more instructions). Not on the CPU for an epilogue
  // with a transcendental call (GELU's erf, tanh) after a dot-product tile:
  // the tile stores its sums one at a time, so each call would be scalar
  // where the epilogue's own loop vectorises it (BERT at hidden size 64 ran
  // 27% more instructions so). A consumer that only moves the product's
  // elements is an epilogue too, always, where PlacementOf places them.
  std::optional<Expr> EpilogueCondition(const TensorNode& product, const TensorNode& consumer) {
    const ReduceNode* reduce =
        IsReduction(product) ? static_cast<const ReduceNode*>(product.body.get()) : nullptr;
    if (!reduce || !IsProduct(product, *reduce) || outputs_.count(&product) ||
        reads_[&product] != 1 || IsReduction(consumer)) {
      return std::nullopt;
    }
    // One read counted may be inside a tensor inlined into several stages.
    for (const Tensor& stage : stages_) {
      if (stage.get() != &consumer && stage.get() != &product && Reads(stage->body, product)) {
        return std::nullopt;
      }
    }
    if (PlacementOf(product, consumer)) return tir::IntImm(1);
    if (consumer.shape.size() != product.shape.size()) return std::nullopt;
    if (!gpu_ && product.hint != ScheduleHint::kOuterProduct &&
        Transcendentals(consumer.body) > 0) {
      return std::nullopt;
    }
    Expr condition = tir::IntImm(1);
    for (size_t d = 0; d < product.shape.size(); ++d) {
      const Expr rows = tir::Simplify(product.shape[d]);
      const Expr consumer_rows = tir::Simplify(consumer.shape[d]);
      if (!tir::StructurallyEqual(consumer_rows, rows)) {
        condition = tir::And(condition, tir::Compare(tir::CompareOp::kEq, consumer_rows, rows));
      }
    }
    std::vector<std::vector<Expr>> reads;
    bool reads_inlined = false;
    std::map<const TensorNode*, ReadValueFn> intercepts = InlinedReductions(&reads_inlined);
    intercepts[&product] = [&](const std::vector<Expr>& indices) {
      reads.push_back(indices);
      return tir::MakeVar(product.name + ".sum", product.dtype);
    };
    LowerIntercepting(consumer.body, {}, std::move(intercepts));
    if (reads.empty() || reads_inlined) return std::nullopt;
    for (const std::vector<Expr>& indices : reads) {
      for (size_t d = 0; d < indices.size(); ++d) {
        if (!ReadsAtAxis(tir::Simplify(indices[d]), *consumer.axes[d],
                         tir::Simplify(product.shape[d]), &condition)) {
          return std::nullopt;
        }
      }
    }
    condition = tir::Simplify(condition);
    int64_t always;
    const bool constant = tir::AsInt(condition, &always);
    if ((constant && always == 0) || (!constant && !gpu_)) return std::nullopt;
    return condition;
  }

  // Whether `expr` reads `tensor`, itself or through the tensors it inlines.
  bool Reads(const Expr& expr, const TensorNode& tensor) {
    if (expr->kind == tir::ExprKind::kTensorRead) {
      const auto& read = static_cast<const TensorReadNode&>(*expr);
      if (read.tensor.get() == &tensor) return true;
      for (const Expr& index : read.indices) {
        if (Reads(index, tensor)) return true;
      }
      return !read.tensor->is_placeholder() && !IsStage(*read.tensor) &&
             Reads(read.tensor->body, tensor);
    }
    if (expr->kind == tir::ExprKind::kReduce) {
      return Reads(static_cast<const ReduceNode&>(*expr).source, tensor);
    }
    bool found = false;
    tir::ForEachOperand(expr, [&](const Expr& child) { found = found || Reads(child, tensor); });
    return found;
  }

  // Whether `index`, a consumer's index into the product along a dimension
  // of `extent`, is the consumer's `axis` there once the two shapes are
  // equal and `*condition` holds, to which it adds what else it needs. That
  // is the axis itself, 0 where the extent is statically 1, or a broadcast's
  // read `select(e == 1, 0, index)` of such an index (nested where a
  // broadcast reads one: a bias add's inside a residual add's), given e
  // equals the extent: where that is 1 the axis is 0 too.
  static bool ReadsAtAxis(const Expr& index, const tir::VarNode& axis, const Expr& extent,
                          Expr* condition) {
    if (index.get() == &axis) return true;
    int64_t value, size;
    if (tir::AsInt(index, &value)) {
      return value == 0 && tir::AsInt(extent, &size) && size == 1;
    }
    if (index->kind != tir::ExprKind::kSelect) return false;
    const auto& select = static_cast<const tir::SelectNode&>(*index);
    if (select.condition->kind != tir::ExprKind::kCompare ||
        !tir::AsInt(select.true_value, &value) || value != 0) {
      return false;
    }
    const auto& compare = static_cast<const tir::CompareNode&>(*select.condition);
    if (compare.op != tir::CompareOp::kEq || !tir::AsInt(compare.b, &value) || value != 1) {
      return false;
    }
    if (!tir::StructurallyEqual(compare.a, extent)) {
      *condition = tir::And(*condition, tir::Compare(tir::CompareOp::kEq, compare.a, extent));
    }
    return ReadsAtAxis(select.false_value, axis, extent, condition);
  }

  // On the GPU, where `consumer` only moves the elements of `product` (a
  // transpose, a reshape, or several such inlined into one another: BERT's
  // attention context, (heads, L, dh) to (1, L, heads * dh)): the index in
  // `consumer` of each element of the product; null elsewhere. Not on the
  // CPU, whose templates store a vector of a row's columns at a time, which
  // the placement's floordiv and floormod would scatter.
  IndexMap PlacementOf(const TensorNode& product, const TensorNode& consumer) {
    if (!gpu_) return nullptr;
    std::vector<const TensorNode*> movers;
    for (const TensorNode* tensor = &consumer;
         tensor->placement && tensor->body->kind == tir::ExprKind::kTensorRead;) {
      movers.push_back(tensor);
      const Tensor& source = static_cast<const TensorReadNode&>(*tensor->body).tensor;
      if (source.get() == &product) {
        return [movers](const std::vector<Expr>& indices) {
          std::vector<Expr> placed = indices;
          for (auto mover = movers.rbegin(); mover != movers.rend(); ++mover) {
            placed = (*mover)->placement(placed);
          }
          return placed;
        };
      }
      if (IsStage(*source)) break;
      tensor = source.get();
    }
    return nullptr;
  }

  // `stage` written into `buffer` by loops of its own (the reductions
  // computed in their readers first where it reads some).
  tir::Stmt LowerOwnLoops(const TensorNode& stage, const tir::Buffer& buffer) {
    std::optional<tir::Stmt> reader = LowerReaderOfInlined(stage, buffer);
    return reader ? std::move(*reader) : LowerStage(stage, buffer);
  }

  // `product` storing `epilogue` into `buffer` from each sum (by its
  // template, or on the GPU by a block per element) where `fits`, the
  // condition EpilogueCondition gave; elsewhere each in loops of its own,
  // the product into a temporary allocated only there.
  tir::Stmt LowerWithEpilogue(const TensorNode& product, const TensorNode& epilogue,
                              const tir::Buffer& buffer, const Expr& fits) {
    tir::Stmt fused = LowerStoringEpilogue(product, epilogue, buffer);
    int64_t always;
    if (tir::AsInt(fits, &always) && always != 0) return fused;
    const tir::Buffer sums = MakeBuffer(product);
    buffers_[&product] = sums;
    return tir::If(fits, std::move(fused),
                   tir::Allocate(sums, tir::Seq({LowerOwnLoops(product, sums),
                                                 LowerOwnLoops(epilogue, buffer)})));
  }

  tir::Stmt LowerStoringEpilogue(const TensorNode& product, const TensorNode& epilogue,
                                 const tir::Buffer& buffer) {
    const auto& reduce = static_cast<const ReduceNode&>(*product.body);
    MatMulStage stage = MatMulStageOf(product, nullptr, reduce);
    if (const IndexMap placement = PlacementOf(product, epilogue)) {
      stage.store = [placement, buffer](const std::vector<Expr>& indices, const Expr& sum) {
        return tir::Store(buffer, tir::FlatIndex(buffer->shape, placement(indices)), sum);
      };
    } else {
      stage.store = [this, &product, &epilogue, buffer](const std::vector<Expr>& indices,
                                                        const Expr& sum) {
        Substitution substitution;
        for (size_t i = 0; i < indices.size(); ++i) {
          substitution[epilogue.axes[i].get()] = indices[i];
        }
        const Expr value =
            LowerIntercepting(epilogue.body, substitution,
                              {{&product, [&](const std::vector<Expr>&) { return sum; }}});
        // The product's shape: the buffer's where the two may differ is a
        // `select` that equals it wherever the epilogue runs.
        return tir::Store(buffer, tir::FlatIndex(product.shape, indices), value);
      };
    }
    std::optional<tir::Stmt> templated = LowerProduct(product, stage);
    if (templated) return *templated;
    return LowerGpuStage(product, nullptr, &reduce, stage.store);
  }

  // `expr` lowered with each read of a tensor in `intercepts` (which has no
  // buffer) given by its function instead of a load.
  Expr LowerIntercepting(const Expr& expr, const Substitution& substitution,
                         std::map<const TensorNode*, ReadValueFn> intercepts) {
    std::swap(intercepts_, intercepts);
    const Expr lowered = LowerExpr(expr, substitution);
    std::swap(intercepts_, intercepts);
    return lowered;
  }

  // Intercepts for the reductions computed in their readers, each read of
  // them noted in `*read` and standing for a value of its dtype.
  std::map<const TensorNode*, ReadValueFn> InlinedReductions(bool* read) const {
    std::map<const TensorNode*, ReadValueFn> intercepts;
    for (const TensorNode* reduction : inlined_reductions_) {
      intercepts[reduction] = [read, reduction](const std::vector<Expr>&) {
        *read = true;
        return tir::MakeVar(reduction->name + ".value", reduction->dtype);
      };
    }
    return intercepts;
  }

  // On the GPU, whether the reduction stages_[s] is computed where it is
  // read, inside the kernels' launches for its readers, instead of written
  // out by a launch of its own: an LSTM's gate products, read by its cell
  // through slices, become four block reductions in each block of the cell's
  // one launch. Only for a reduction that is no output and gets no template
  // (a block per element computes it anyway), read only by elementwise
  // stages, and only where that computes no element more often than
  // writing it out would: its reads, counted per reader element and site,
  // at most its static number of elements.
  bool ComputedInItsReaders(size_t s) {
    const TensorNode& reduction = *stages_[s];
    if (!gpu_ || !IsReduction(reduction) || outputs_.count(&reduction)) return false;
    const auto& reduce = static_cast<const ReduceNode&>(*reduction.body);
    int64_t elements;
    if ((IsProduct(reduction, reduce) && !FewRows(reduction)) ||
        !tir::AsInt(tir::Simplify(tir::NumElements(reduction.shape)), &elements)) {
      return false;
    }
    bool reads_inlined = false;
    LowerIntercepting(reduce.source, {}, InlinedReductions(&reads_inlined));
    if (reads_inlined) return false;
    int64_t reads = 0;
    for (size_t r = s + 1; r < stages_.size(); ++r) {
      const TensorNode& reader = *stages_[r];
      int64_t sites = 0;
      std::map<const TensorNode*, ReadValueFn> intercepts = InlinedReductions(&reads_inlined);
      // Later stages have no buffers yet; their own reads count as readers.
      for (size_t later = s + 1; later < stages_.size(); ++later) {
        const TensorNode* stage = stages_[later].get();
        intercepts[stage] = [stage](const std::vector<Expr>&) {
          return tir::MakeVar(stage->name, stage->dtype);
        };
      }
      intercepts[&reduction] = [&](const std::vector<Expr>&) {
        ++sites;
        return tir::MakeVar(reduction.name + ".value", reduction.dtype);
      };
      const bool reduces = IsReduction(reader);
      LowerIntercepting(reduces ? static_cast<const ReduceNode&>(*reader.body).source : reader.body,
                        {}, std::move(intercepts));
      if (sites == 0) continue;
      int64_t extent;
      if (reduces || !tir::AsInt(tir::Simplify(tir::NumElements(reader.shape)), &extent)) {
        return false;
      }
      reads += sites * extent;
    }
    return reads > 0 && reads <= elements;
  }

  // A stage that reads reductions computed in their readers: one launch over
  // its elements, each first computing the values it reads from them (a
  // block's threads sharing each reduction where one reduces across a
  // block), then storing; nothing when it reads none.
  std::optional<tir::Stmt> LowerReaderOfInlined(const TensorNode& tensor,
                                                const tir::Buffer& buffer) {
    if (inlined_reductions_.empty() || IsReduction(tensor)) return std::nullopt;
    struct Site {
      tir::Var value;
      const TensorNode* reduction;
      std::vector<Expr> indices;
    };
    std::vector<Site> sites;
    std::map<const TensorNode*, ReadValueFn> intercepts;
    for (const TensorNode* reduction : inlined_reductions_) {
      intercepts[reduction] = [this, &sites, reduction](const std::vector<Expr>& indices) {
        const std::string name = reduction->name + "." + std::to_string(inlined_reads_++);
        sites.push_back({tir::MakeVar(name, reduction->dtype), reduction, indices});
        return sites.back().value;
      };
    }
    const tir::Var element = tir::MakeVar(buffer->name + ".element");
    Expr extent;
    const std::vector<Expr> indices = ElementIndices(tensor, element, &extent);
    Substitution substitution;
    for (size_t i = 0; i < indices.size(); ++i) substitution[tensor.axes[i].get()] = indices[i];
    const Expr value = LowerIntercepting(tensor.body, substitution, std::move(intercepts));
    if (sites.empty()) return std::nullopt;
    bool block = false;
    for (const Site& site : sites) {
      block = block || ReducesAcrossABlock(*site.reduction, ReduceOf(*site.reduction));
    }
    tir::Stmt body = tir::Store(buffer, tir::FlatIndex(buffer->shape, indices), value);
    for (auto site = sites.rbegin(); site != sites.rend(); ++site) {
      body = Accumulate(*site->reduction, ReduceOf(*site->reduction), site->indices, block,
                        site->value->name,
                        [&](const Expr& result) { return tir::Let(site->value, result, body); });
    }
    return tir::For(element, extent, block ? tir::ForKind::kGpuBlocks : tir::ForKind::kGpuThreads,
                    body);
  }

  static const ReduceNode& ReduceOf(const TensorNode& reduction) {
    return static_cast<const ReduceNode&>(*reduction.body);
  }

  // Whether `tensor` (a reduction) takes a matrix-product template.
  static bool IsProduct(const TensorNode& tensor, const ReduceNode& reduce) {
    return tensor.hint != ScheduleHint::kDefault && tensor.shape.size() >= 2 &&
           reduce.axes.size() == 1;
  }

  // `stage` by its template: the CPU's, or the GPU's where it applies.
  std::optional<tir::Stmt> LowerProduct(const TensorNode& tensor, const MatMulStage& stage) {
    if (!gpu_) return ScheduleMatMul(stage, matmul_knobs_);
    if (FewRows(tensor)) return std::nullopt;
    return ScheduleGpuMatMul(stage);
  }

  // The loops writing `tensor` into `buffer`.
  tir::Stmt LowerStage(const TensorNode& tensor, const tir::Buffer& buffer) {
    const size_t rank = tensor.shape.size();
    const ReduceNode* reduce =
        IsReduction(tensor) ? static_cast<const ReduceNode*>(tensor.body.get()) : nullptr;
    Expr work = tir::IntImm(static_cast<int64_t>(
        1 + kTranscendentalWork * Transcendentals(reduce ? reduce->source : tensor.body)));
    if (reduce) {
      for (const ReduceAxis& axis : reduce->axes) work = tir::Mul(work, axis.extent);
    }
    if (reduce && IsProduct(tensor, *reduce)) {
      std::optional<tir::Stmt> templated =
          LowerProduct(tensor, MatMulStageOf(tensor, buffer, *reduce));
      if (templated) return *templated;
    }
    if (gpu_) return LowerGpuStage(tensor, buffer, reduce);
    if (rank == 0) return StoreElement(tensor, buffer, reduce, {});

    // Spatial loops but the innermost, fused into one.
    const tir::Var inner = tir::MakeVar(buffer->name + ".j");
    const tir::Var outer = tir::MakeVar(buffer->name + ".i");
    std::vector<Expr> indices(rank);
    indices[rank - 1] = inner;
    Expr remaining = outer;
    Expr outer_extent = tir::IntImm(1);
    for (size_t d = rank - 1; d-- > 0;) {
      indices[d] = d == 0 ? remaining : tir::FloorMod(remaining, tensor.shape[d]);
      remaining = tir::FloorDiv(remaining, tensor.shape[d]);
      outer_extent = tir::Mul(outer_extent, tensor.shape[d]);
    }
    const Expr& inner_extent = tensor.shape[rank - 1];
    const tir::Stmt element = StoreElement(tensor, buffer, reduce, indices);

    int64_t static_outer;
    if (tir::AsInt(outer_extent, &static_outer) && static_outer == 1) {
      // One row: its elements are the parallel work.
      const tir::Stmt row =
          tir::For(inner, inner_extent, tir::ForKind::kParallel, element, ChunkFor(work));
      return tir::Let(outer, tir::IntImm(0), row);
    }
    const tir::Stmt row = tir::For(
        inner, inner_extent, reduce ? tir::ForKind::kSerial : tir::ForKind::kVectorized, element);
    return tir::For(outer, outer_extent, tir::ForKind::kParallel, row,
                    ChunkFor(tir::Mul(work, inner_extent)));
  }

  // A GPU stage: one launch over all its elements (its loops fused into one).
  // An element of a reduction over a long innermost axis gets a block of
  // threads, which share that axis and combine their partial results (a
  // layer norm's row of 768 is 3 loads per thread, not 768 by one thread);
  // any other element gets a thread, which accumulates serially.
  // `buffer` may be null where `store` writes the values.
  tir::Stmt LowerGpuStage(const TensorNode& tensor, const tir::Buffer& buffer,
                          const ReduceNode* reduce, const StoreValueFn& store = nullptr) {
    const bool block = reduce && ReducesAcrossABlock(tensor, *reduce);
    const std::string& name = buffer ? buffer->name : tensor.name;
    const tir::Var element = tir::MakeVar(name + (block ? ".block" : ".thread"));
    Expr extent;
    const std::vector<Expr> indices = ElementIndices(tensor, element, &extent);
    return tir::For(element, extent, block ? tir::ForKind::kGpuBlocks : tir::ForKind::kGpuThreads,
                    StoreElement(tensor, buffer, reduce, indices, block, store));
  }

  // The indices of element `element` of `tensor` in row-major order, and in
  // `*extent` its number of elements.
  static std::vector<Expr> ElementIndices(const TensorNode& tensor, const Expr& element,
                                          Expr* extent) {
    const size_t rank = tensor.shape.size();
    std::vector<Expr> indices(rank);
    Expr remaining = element;
    *extent = tir::IntImm(1);
    for (size_t d = rank; d-- > 0;) {
      indices[d] = d == 0 ? remaining : tir::FloorMod(remaining, tensor.shape[d]);
      remaining = tir::FloorDiv(remaining, tensor.shape[d]);
      *extent = tir::Mul(*extent, tensor.shape[d]);
    }
    return indices;
  }

  // Whether a block's threads share each element's innermost reduction axis:
  // when that axis may be long (a shape variable, or at least a warp's 32
  // elements). Bools are left to a thread each: their sum has no block combine.
  static bool ReducesAcrossABlock(const TensorNode& tensor, const ReduceNode& reduce) {
    if (tensor.dtype.is_bool() || reduce.axes.empty()) return false;
    int64_t length;
    return !tir::AsInt(reduce.axes.back().extent, &length) || length >= kWarpThreads;
  }

  static constexpr int64_t kWarpThreads = 32;

  // A product of a few rows, known statically (a matrix-vector product: an
  // LSTM's), has too few row tiles to fill a GPU with the template's blocks:
  // a block per output element, its threads sharing k, runs it instead.
  static bool FewRows(const TensorNode& tensor) {
    int64_t rows;
    return tir::AsInt(tensor.shape[tensor.shape.size() - 2], &rows) && rows < kFewRows;
  }

  static constexpr int64_t kFewRows = 16;

  // `buffer`: the product's own, or null where the stage's `store` writes its sums.
  MatMulStage MatMulStageOf(const TensorNode& tensor, const tir::Buffer& buffer,
                            const ReduceNode& reduce) {
    const ReduceAxis& axis = reduce.axes[0];
    return MatMulStage{
        .name = tensor.name,
        .dtype = tensor.dtype,
        .shape = buffer ? buffer->shape : tensor.shape,
        .depth = LowerExpr(axis.extent, {}),
        .reduce_kind = reduce.reduce_kind,
        .out = buffer,
        .element =
            [this, tensor = &tensor, reduce = &reduce](const std::vector<Expr>& indices,
                                                       const Expr& k) {
              Substitution substitution{{reduce->axes[0].var.get(), k}};
              for (size_t i = 0; i < indices.size(); ++i) {
                substitution[tensor->axes[i].get()] = indices[i];
              }
              return LowerExpr(reduce->source, substitution);
            },
        .form = tensor.hint,
    };
  }

  // Stores one element of `tensor` (into `buffer`, or by `store` where it is
  // given). A reduction accumulates in a one-element temporary;
  // `across_block`: in a kGpuBlocks loop, whose threads share the innermost
  // reduction axis and combine their accumulators at the end.
  tir::Stmt StoreElement(const TensorNode& tensor, const tir::Buffer& buffer,
                         const ReduceNode* reduce, const std::vector<Expr>& indices,
                         bool across_block = false, const StoreValueFn& store = nullptr) {
    const auto store_value = [&](const Expr& value) {
      return store ? store(indices, value)
                   : tir::Store(buffer, tir::FlatIndex(buffer->shape, indices), value);
    };
    if (reduce) {
      return Accumulate(tensor, *reduce, indices, across_block, buffer ? buffer->name : tensor.name,
                        store_value);
    }
    Substitution substitution;
    for (size_t i = 0; i < indices.size(); ++i) substitution[tensor.axes[i].get()] = indices[i];
    return store_value(LowerExpr(tensor.body, substitution));
  }

  // `then` of the reduction of `tensor` at `indices`, accumulated in a
  // one-element temporary named after `name`; `across_block`: in a
  // kGpuBlocks loop, whose threads share the innermost reduction axis and
  // combine their accumulators at the end.
  tir::Stmt Accumulate(const TensorNode& tensor, const ReduceNode& reduce,
                       const std::vector<Expr>& indices, bool across_block, const std::string& name,
                       const std::function<tir::Stmt(const Expr&)>& then) {
    Substitution substitution;
    for (size_t i = 0; i < indices.size(); ++i) substitution[tensor.axes[i].get()] = indices[i];
    const tir::Buffer accumulator = std::make_shared<tir::BufferNode>(
        name + ".acc", tensor.dtype, std::vector<Expr>{tir::IntImm(1)});
    const Expr zero = tir::IntImm(0);
    const Expr combined = ReduceCombine(reduce.reduce_kind, tir::Load(accumulator, zero),
                                        LowerExpr(reduce.source, substitution));
    tir::Stmt loops = tir::Store(accumulator, zero, combined, /*reassociate=*/true);
    for (size_t k = reduce.axes.size(); k-- > 0;) {
      const bool innermost = k + 1 == reduce.axes.size();
      tir::ForKind kind = tir::ForKind::kSerial;
      if (innermost && across_block) kind = tir::ForKind::kGpuBlockStride;
      if (innermost && !gpu_) kind = tir::ForKind::kVectorized;
      loops =
          tir::For(reduce.axes[k].var, LowerExpr(reduce.axes[k].extent, substitution), kind, loops);
    }
    Expr result = tir::Load(accumulator, zero);
    if (across_block) result = tir::Call(BlockCombine(reduce.reduce_kind), {result});
    return tir::Allocate(
        accumulator,
        tir::Seq({tir::Store(accumulator, zero, ReduceIdentity(reduce.reduce_kind, tensor.dtype)),
                  loops, then(result)}));
  }

  static tir::Intrinsic BlockCombine(ReduceKind kind) {
    switch (kind) {
      case ReduceKind::kSum:
        return tir::Intrinsic::kBlockSum;
      case ReduceKind::kProd:
        return tir::Intrinsic::kBlockProd;
      case ReduceKind::kMax:
        return tir::Intrinsic::kBlockMax;
      case ReduceKind::kMin:
        return tir::Intrinsic::kBlockMin;
    }
    throw Error("te: unknown reduction");
  }

  const MatMulKnobs matmul_knobs_;
  const bool gpu_;
  // What LowerExpr gives reads of tensors without a buffer (LowerIntercepting).
  std::map<const TensorNode*, ReadValueFn> intercepts_;
  // The reductions computed where they are read (ComputedInItsReaders), and
  // the reads of them lowered so far (which number their values' names).
  std::set<const TensorNode*> inlined_reductions_;
  int inlined_reads_ = 0;
  std::map<const TensorNode*, tir::Buffer> buffers_;
  // Buffers made so far per tensor name.
  std::map<std::string, int> buffer_names_;
  std::set<const TensorNode*> outputs_;
  std::map<const TensorNode*, int> reads_;
  std::set<const TensorNode*> counted_bodies_;
  std::set<const TensorNode*> visited_;
  std::set<const TensorNode*> inlined_;
  std::map<const TensorNode*, size_t> inlined_sizes_;
  std::vector<Tensor> stages_;
  std::vector<tir::Buffer> input_buffers_;
};

}  // namespace

tir::PrimFunc Lower(const std::string& name, const std::vector<Tensor>& inputs,
                    const std::vector<Tensor>& outputs,
                    const std::vector<Requirement>& requirements, const MatMulKnobs& matmul_knobs,
                    tir::PrimFunc::Device device) {
  Lowerer lowerer(inputs, outputs, matmul_knobs, device == tir::PrimFunc::Device::kGpu);
  tir::PrimFunc func;
  func.name = name;
  func.device = device;
  func.params = lowerer.input_buffers();
  func.num_inputs = static_cast<int>(inputs.size());
  std::vector<tir::Buffer> output_buffers;
  tir::Stmt body = lowerer.LowerStages(outputs, &output_buffers);
  for (const tir::Buffer& buffer : output_buffers) func.params.push_back(buffer);
  for (auto it = requirements.rbegin(); it != requirements.rend(); ++it) {
    body = tir::Assert(it->condition, it->message, body);
  }
  func.body = std::move(body);
  tir::PrimFunc simplified = tir::Simplify(func);
  if (func.device == tir::PrimFunc::Device::kGpu) {
    simplified.body = tir::RegisterizeThreadBuffers(tir::MergeGpuThreadLoops(simplified.body));
  }
  return simplified;
}

}  // namespace nimble::te
