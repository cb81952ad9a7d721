// Op family registration (placeholder until its definitions land).
#include "graph/op_table.h"

namespace otter {
void register_nn_ops(OpTable&) {}
}  // namespace otter
