#include "harness/datasets/mrpc.h"
