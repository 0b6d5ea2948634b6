#include "models/bert/bert.h"
