// A kernel library for the VM tests: meson builds it as a shared object, and
// the tests embed its bytes in an Executable as the target's kernel library.
#include <dlpack/dlpack.h>

#include <cstdint>

#include "nimble/vm/kernel.h"

namespace {

int64_t Numel(const DLTensor& tensor) {
  int64_t numel = 1;
  for (int32_t i = 0; i < tensor.ndim; ++i) numel *= tensor.shape[i];
  return numel;
}

bool IsFloat32(const DLTensor& tensor) {
  return tensor.dtype.code == kDLFloat && tensor.dtype.bits == 32 && tensor.dtype.lanes == 1;
}

}  // namespace

extern "C" {

// out = in + 1, for float32 tensors of the same element count.
int nimble_test_add_one(void*, DLTensor* const* args, int32_t num_args) {
  if (num_args != 2 || !IsFloat32(*args[0]) || !IsFloat32(*args[1]) ||
      Numel(*args[0]) != Numel(*args[1])) {
    NimbleKernelSetError("nimble_test_add_one takes two float32 tensors of one size");
    return 1;
  }
  const float* in = static_cast<const float*>(args[0]->data);
  float* out = static_cast<float*>(args[1]->data);
  for (int64_t i = 0; i < Numel(*args[0]); ++i) out[i] = in[i] + 1.0f;
  return 0;
}

// Always fails, reporting through the host runtime's NimbleKernelSetError.
int nimble_test_fail(void*, DLTensor* const*, int32_t) {
  NimbleKernelSetError("the library kernel refuses");
  return 2;
}

}  // extern "C"
