#include "nimble/vm/kernels/op_kernel.h"

namespace nimble::vm {

void RegisterCreationOpKernels(OpKernelRegistry&) {}

}  // namespace nimble::vm
