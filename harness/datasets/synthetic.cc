#include "harness/datasets/synthetic.h"
