#include "nimble/vm/kernels/op_kernel.h"

namespace nimble::vm {

void RegisterTransformOpKernels(OpKernelRegistry&) {}

}  // namespace nimble::vm
