#include "nimble/vm/extent_switch.h"

#include <memory>
#include <string>

#include "nimble/vm/error.h"

namespace nimble::vm {
namespace {

struct ExtentSwitch {
  Kernel below;
  Kernel from;
  int64_t arg;
  int64_t axis;
  int64_t extent;
};

int RunExtentSwitch(void* state, DLTensor* const* args, int32_t num_args) {
  const auto& choice = *static_cast<const ExtentSwitch*>(state);
  if (choice.arg >= num_args || choice.axis >= args[choice.arg]->ndim) {
    const std::string message = "argument " + std::to_string(choice.arg) + " has no dimension " +
                                std::to_string(choice.axis) + " to choose a kernel by";
    NimbleKernelSetError(message.c_str());
    return 1;
  }
  const Kernel& kernel =
      args[choice.arg]->shape[choice.axis] >= choice.extent ? choice.from : choice.below;
  return kernel.func(kernel.state.get(), args, num_args);
}

}  // namespace

Kernel BindExtentSwitch(const Attrs& attrs, const std::vector<Kernel>& kernels,
                        const std::vector<bool>& is_switch) {
  const auto kernel_at = [&](const std::string& name) -> const Kernel& {
    const int64_t index = attrs.GetInt(name);
    if (index < 0 || index >= static_cast<int64_t>(kernels.size()) ||
        is_switch[static_cast<size_t>(index)]) {
      throw Error(std::string(kExtentSwitch) + ": '" + name + "' is " + std::to_string(index) +
                  ", not the index of a kernel");
    }
    return kernels[static_cast<size_t>(index)];
  };
  const auto non_negative = [&](const std::string& name) {
    const int64_t value = attrs.GetInt(name);
    if (value < 0) {
      throw Error(std::string(kExtentSwitch) + ": '" + name + "' is negative (" +
                  std::to_string(value) + ")");
    }
    return value;
  };
  auto choice = std::make_shared<ExtentSwitch>(
      ExtentSwitch{kernel_at("below"), kernel_at("from"), non_negative("arg"), non_negative("axis"),
                   non_negative("extent")});
  if (choice->below.device != choice->from.device) {
    throw Error(std::string(kExtentSwitch) + ": '" + choice->below.name + "' and '" +
                choice->from.name + "' run on different devices");
  }
  const std::string name =
      choice->below.name + ", from " + std::to_string(choice->extent) + " " + choice->from.name;
  const DeviceType device = choice->below.device;
  return Kernel{name, RunExtentSwitch, std::move(choice), device};
}

}  // namespace nimble::vm
