#include "nimble/vm/kernels/op_kernel.h"

namespace nimble::vm {

void RegisterDynamicOpKernels(OpKernelRegistry&) {}

}  // namespace nimble::vm
