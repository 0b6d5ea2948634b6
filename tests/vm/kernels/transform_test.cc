#include "tests/vm/kernels/kernel_test_util.h"
