#include "nimble/vm/kernels/op_kernel.h"

namespace nimble::vm {

void RegisterNnOpKernels(OpKernelRegistry&) {}

}  // namespace nimble::vm
