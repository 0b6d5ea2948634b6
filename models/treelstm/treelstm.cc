#include "models/treelstm/treelstm.h"
