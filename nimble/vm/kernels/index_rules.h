// The output-shape rules of the indexing family (gather_elements, gather_nd,
// scatter_nd, cumsum, topk), written once as templates over the dimension
// type D like the transform rules (transform_rules.h): the runtime's shape
// functions (index.cc) run them on StaticDim, the compiler's type relations
// (compiler/op/index.cc) on ir::Dim, where Any propagates and only
// contradictions between static sizes fail. A check the relation deferred on
// `?` then fails at run time with the same message.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nimble/vm/attrs.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernels/shape_util.h"
#include "nimble/vm/kernels/transform_rules.h"

namespace nimble::vm::indexing {

using transform::DimsOf;
using transform::DimsToString;
using transform::UnifyDim;

// An index along a dimension of `extent`: negative ones count from the end.
// nullopt when it is out of range either way.
inline std::optional<int64_t> WrapIndex(int64_t index, int64_t extent) {
  const int64_t wrapped = index < 0 ? index + extent : index;
  if (wrapped < 0 || wrapped >= extent) return std::nullopt;
  return wrapped;
}

// out = indices' shape; data and indices have one rank, and every dimension
// of indices but the axis's is at most data's.
template <typename D>
std::vector<DimsOf<D>> GatherElementsRule(const std::vector<DimsOf<D>>& inputs,
                                          const Attrs& attrs) {
  const std::string op = "gather_elements";
  const DimsOf<D>& data = inputs[0];
  const DimsOf<D>& indices = inputs[1];
  if (data.empty()) throw Error(op + ": data must have rank 1 or more, got ()");
  if (data.size() != indices.size()) {
    throw Error(op + ": data " + DimsToString(data) + " and indices " + DimsToString(indices) +
                " differ in rank");
  }
  const size_t axis = static_cast<size_t>(
      NormalizeAxis(attrs.GetInt("axis"), static_cast<int64_t>(data.size()), op));
  for (size_t d = 0; d < data.size(); ++d) {
    if (d == axis || !data[d].is_static() || !indices[d].is_static()) continue;
    if (indices[d].value() > data[d].value()) {
      throw Error(op + ": indices " + DimsToString(indices) + " exceed data " + DimsToString(data) +
                  " in dimension " + std::to_string(d));
    }
  }
  return {indices};
}

// How many dims of data one row of indices addresses (indices' last
// dimension), checked against data's rank past batch_dims.
template <typename D>
size_t IndexDepth(const DimsOf<D>& data, const DimsOf<D>& indices, size_t batch_dims,
                  const std::string& op) {
  if (indices.empty()) throw Error(op + ": indices must have rank 1 or more, got ()");
  const D last = indices.back();
  if (!last.is_static()) {
    throw Error(op + ": the last dimension of indices " + DimsToString(indices) +
                " must be static");
  }
  const int64_t depth = last.value();
  if (depth < 1 || depth > static_cast<int64_t>(data.size() - batch_dims)) {
    throw Error(op + ": indices " + DimsToString(indices) + " address " + std::to_string(depth) +
                " dims of data " + DimsToString(data) + ", which has " +
                std::to_string(data.size() - batch_dims) + " past batch_dims " +
                std::to_string(batch_dims) + " (1 or more are needed)");
  }
  return static_cast<size_t>(depth);
}

// gather_nd's batch_dims, checked against both ranks.
template <typename D>
size_t GatherNdBatchDims(const DimsOf<D>& data, const DimsOf<D>& indices, const Attrs& attrs) {
  const int64_t batch_dims = attrs.GetInt("batch_dims");
  const int64_t limit = static_cast<int64_t>(std::min(data.size(), indices.size()));
  if (batch_dims < 0 || batch_dims >= limit) {
    throw Error("gather_nd: batch_dims " + std::to_string(batch_dims) + " must be in [0, " +
                std::to_string(limit) + ") for data " + DimsToString(data) + " and indices " +
                DimsToString(indices));
  }
  return static_cast<size_t>(batch_dims);
}

// out = indices.shape[:-1] + data.shape[batch_dims + m:], m = indices.shape[-1];
// the first batch_dims dims of data and indices agree.
template <typename D>
std::vector<DimsOf<D>> GatherNdRule(const std::vector<DimsOf<D>>& inputs, const Attrs& attrs) {
  const std::string op = "gather_nd";
  const DimsOf<D>& data = inputs[0];
  const DimsOf<D>& indices = inputs[1];
  if (indices.empty()) throw Error(op + ": indices must have rank 1 or more, got ()");
  const size_t batch_dims = GatherNdBatchDims(data, indices, attrs);
  const size_t depth = IndexDepth(data, indices, batch_dims, op);
  DimsOf<D> out;
  for (size_t d = 0; d < batch_dims; ++d) {
    const std::optional<D> dim = UnifyDim(data[d], indices[d]);
    if (!dim) {
      throw Error(op + ": data " + DimsToString(data) + " and indices " + DimsToString(indices) +
                  " differ in batch dimension " + std::to_string(d));
    }
    out.push_back(*dim);
  }
  out.insert(out.end(), indices.begin() + static_cast<std::ptrdiff_t>(batch_dims),
             indices.end() - 1);
  out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(batch_dims + depth), data.end());
  return {out};
}

// out = data's shape; updates = indices.shape[:-1] + data.shape[m:].
template <typename D>
std::vector<DimsOf<D>> ScatterNdRule(const std::vector<DimsOf<D>>& inputs, const Attrs&) {
  const std::string op = "scatter_nd";
  const DimsOf<D>& data = inputs[0];
  const DimsOf<D>& indices = inputs[1];
  const DimsOf<D>& updates = inputs[2];
  const size_t depth = IndexDepth(data, indices, 0, op);
  DimsOf<D> expected(indices.begin(), indices.end() - 1);
  expected.insert(expected.end(), data.begin() + static_cast<std::ptrdiff_t>(depth), data.end());
  bool matches = expected.size() == updates.size();
  for (size_t d = 0; matches && d < expected.size(); ++d) {
    matches = UnifyDim(expected[d], updates[d]).has_value();
  }
  if (!matches) {
    throw Error(op + ": updates " + DimsToString(updates) + " must have the shape " +
                DimsToString(expected) + " (indices " + DimsToString(indices) + "[:-1] + data " +
                DimsToString(data) + "[" + std::to_string(depth) + ":])");
  }
  return {data};
}

// out = data's shape, with the axis in range.
template <typename D>
std::vector<DimsOf<D>> CumsumRule(const std::vector<DimsOf<D>>& inputs, const Attrs& attrs) {
  if (inputs[0].empty()) throw Error("cumsum: data must have rank 1 or more, got ()");
  NormalizeAxis(attrs.GetInt("axis"), static_cast<int64_t>(inputs[0].size()), "cumsum");
  return {inputs[0]};
}

// topk's axis, normalised against data's rank (1 or more).
template <typename D>
size_t TopKAxis(const DimsOf<D>& data, const Attrs& attrs) {
  if (data.empty()) throw Error("topk: data must have rank 1 or more, got ()");
  return static_cast<size_t>(
      NormalizeAxis(attrs.GetInt("axis"), static_cast<int64_t>(data.size()), "topk"));
}

}  // namespace nimble::vm::indexing
