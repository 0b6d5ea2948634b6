#include "nimble/vm/kernels/op_kernel.h"

namespace nimble::vm {

void RegisterReduceOpKernels(OpKernelRegistry&) {}

}  // namespace nimble::vm
