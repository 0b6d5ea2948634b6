#include "harness/cli/result_output.h"

#include <algorithm>
#include <cstdio>

#include "nimble/vm/adt.h"
#include "nimble/vm/error.h"

namespace nimble::cli {

std::vector<Tensor> FlattenResult(const Ref<Object>& result) {
  std::vector<Tensor> tensors;
  // An explicit stack, since a result may be a list thousands of cells long.
  std::vector<Ref<Object>> pending{result};
  while (!pending.empty()) {
    Ref<Object> value = std::move(pending.back());
    pending.pop_back();
    if (Tensor tensor = value.as<TensorNode>()) {
      tensors.push_back(std::move(tensor));
    } else if (ADT adt = value.as<ADTNode>()) {
      for (size_t i = adt->size(); i-- > 0;) pending.push_back(adt->field(i));
    } else {
      throw Error("the result holds a function, which cannot be written as a tensor");
    }
  }
  return tensors;
}

std::string SummarizeTensor(const Tensor& tensor, size_t max_values) {
  std::string text = tensor->TypeString() + " [";
  const int64_t shown = std::min<int64_t>(tensor->numel(), static_cast<int64_t>(max_values));
  for (int64_t i = 0; i < shown; ++i) {
    if (i) text += ", ";
    if (tensor->dtype().is_float()) {
      char buffer[32];
      std::snprintf(buffer, sizeof(buffer), "%.6g", tensor->GetAsDouble(i));
      text += buffer;
    } else if (tensor->dtype().is_bool()) {
      text += tensor->GetAsInt64(i) ? "True" : "False";
    } else {
      text += std::to_string(tensor->GetAsInt64(i));
    }
  }
  if (tensor->numel() > shown) text += shown ? ", ..." : "...";
  return text + "]";
}

}  // namespace nimble::cli
