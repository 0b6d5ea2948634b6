// The runtime's built-in kernel families, registered into the global registry.
#include "nimble/vm/kernel.h"
#include "nimble/vm/kernels/dense.h"
#include "nimble/vm/kernels/op_kernel.h"

namespace nimble::vm {

void RegisterBuiltinKernels(KernelRegistry& registry) {
  RegisterDenseKernels(registry);
  RegisterOpKernels(registry);
}

}  // namespace nimble::vm
