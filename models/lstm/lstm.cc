#include "models/lstm/lstm.h"
