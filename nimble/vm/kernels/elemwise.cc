#include "nimble/vm/kernels/op_kernel.h"

namespace nimble::vm {

void RegisterElemwiseOpKernels(OpKernelRegistry&) {}

}  // namespace nimble::vm
