// libFuzzer driver for one entry point of fuzz/entry_points.h, chosen at compile time with
// -DOTTER_FUZZ_TARGET=<name> (scripts/fuzz.sh builds one binary per target). With the environment
// variable OTTER_FUZZ_WRITE_SEED=PATH set, the checkpoint target (OTTER_FUZZ_WRITES_SEED) writes a valid seed there and
// exits.
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "fuzz/entry_points.h"

#ifndef OTTER_FUZZ_TARGET
#error "compile with -DOTTER_FUZZ_TARGET=<entry point>"
#endif

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  otter::fuzz::set_fuzzing_limits();
#ifdef OTTER_FUZZ_WRITES_SEED
  if (const char* path = std::getenv("OTTER_FUZZ_WRITE_SEED")) {
    std::ofstream(path, std::ios::binary) << otter::fuzz::checkpoint_seed();
    std::exit(0);
  }
#endif
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  otter::fuzz::OTTER_FUZZ_TARGET(data, size);
  return 0;
}
