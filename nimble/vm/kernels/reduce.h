// Shape arithmetic of the reductions (sum, mean, max, min, prod, all, any,
// argmax, argmin), shared by their runtime shape functions and kernels
// (reduce.cc) and their compiler type relations, so both agree on which axes
// a call reduces and on the errors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nimble/vm/attrs.h"

namespace nimble::vm {

// Which axes of a rank-`ndim` input are reduced, under Relay's rules: `axis`
// None or empty means every axis; `exclude` reduces the axes not listed. The
// errors (an axis out of range or listed twice) name `op`.
std::vector<bool> ReducedAxes(int64_t ndim, const Attrs& attrs, const std::string& op);

// The result shape: reduced axes dropped, or kept as 1 with keepdims. Serves
// both static types (a vector of ir::Dim) and run-time shapes (Shape).
template <typename Dims>
Dims ReducedShape(const Dims& shape, const std::vector<bool>& reduced, bool keepdims) {
  using D = typename Dims::value_type;
  Dims out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) {
      out.push_back(shape[d]);
    } else if (keepdims) {
      out.push_back(D(1));
    }
  }
  return out;
}

}  // namespace nimble::vm
