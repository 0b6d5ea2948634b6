#include "models/model.h"
