#include "harness/datasets/sst.h"
