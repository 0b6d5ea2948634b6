#include "harness/datasets/wordpiece.h"
