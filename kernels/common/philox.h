// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. The same 128-bit counter and 64-bit key give the same four 32-bit
// words on host and device, so a kernel draws element i's bits from counter i without state.
#pragma once

#include <cstdint>

#include "kernels/common/half.h"

namespace otter {

struct Philox4 {
  uint32_t w[4];
};

namespace philox_detail {
constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // key schedule (Weyl) increments

OTTER_HD void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}
}  // namespace philox_detail

OTTER_HD Philox4 philox4x32_10(Philox4 ctr, uint32_t key0, uint32_t key1) {
  using namespace philox_detail;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kW0;
      key1 += kW1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, ctr.w[0], hi0, lo0);
    mulhilo(kM1, ctr.w[2], hi1, lo1);
    ctr = Philox4{{hi1 ^ ctr.w[1] ^ key0, lo1, hi0 ^ ctr.w[3] ^ key1, lo0}};
  }
  return ctr;
}

// The four words for block `index` of stream `offset` under a 64-bit seed.
OTTER_HD Philox4 philox_block(uint64_t seed, uint64_t offset, uint64_t index) {
  const Philox4 ctr{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), static_cast<uint32_t>(offset),
                     static_cast<uint32_t>(offset >> 32)}};
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

}  // namespace otter
