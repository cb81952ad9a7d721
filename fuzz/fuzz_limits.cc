// set_fuzzing_limits (see entry_points.h): the resource limits a fuzzing process runs under.
#include <cstdlib>

#include "fuzz/entry_points.h"

namespace otter::fuzz {

void set_fuzzing_limits() {
  setenv("OTTER_MAX_TENSOR_BYTES", "67108864", /*overwrite=*/0);  // 64 MiB
  setenv("OTTER_MAX_NPZ_BYTES", "67108864", 0);
  setenv("OMP_NUM_THREADS", "1", 0);
}

}  // namespace otter::fuzz
