// Device-side pieces shared by the CUDA kernels (.cu files only): grid-stride loops and launch
// geometry, loads and stores by runtime dtype, block reductions, and bad-input reports.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "graph/element.h"
#include "kernels/common/convert.h"
#include "kernels/common/elementwise.h"
#include "kernels/cuda/indexer.h"
#include "kernels/cuda/kernel_util.h"

namespace otter::cuda {

constexpr int kBlock = 256;

// Blocks for a grid-stride loop over n items: at least one, at most 2^16 (the loop covers more).
inline unsigned grid_for(int64_t n, int block = kBlock) {
  const int64_t b = (n + block - 1) / block;
  return static_cast<unsigned>(std::clamp<int64_t>(b, 1, int64_t{1} << 16));
}

// Blocks for one block per item, at most 2^16 (kernels loop with a block stride).
inline unsigned blocks_for(int64_t items) {
  return static_cast<unsigned>(std::clamp<int64_t>(items, 1, int64_t{1} << 16));
}

}  // namespace otter::cuda

// for (i over [0, n)) split across the whole grid.
#define OTTER_GRID_STRIDE(i, n)                                                           \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// for (b over [0, n)) with one block per item.
#define OTTER_BLOCK_STRIDE(b, n) \
  for (int64_t b = blockIdx.x; b < (n); b += gridDim.x)

namespace otter::cuda {

// Element i of an array of runtime dtype t as double / float (any numeric or bool dtype).
__device__ inline double load_as_double(const void* p, DataType t, int64_t i) { return element_as_double(p, t, i); }
__device__ inline float load_as_float(const void* p, DataType t, int64_t i) {
  switch (t) {
    case DataType::kFloat32: return static_cast<const float*>(p)[i];
    case DataType::kFloat16: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DataType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    default: return static_cast<float>(load_as_double(p, t, i));
  }
}
// Stores v (rounded once) into element i of a float array of runtime dtype t.
__device__ inline void store_from_double(void* p, DataType t, int64_t i, double v) {
  switch (t) {
    case DataType::kFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(p)[i] = v; break;
    case DataType::kFloat16: static_cast<uint16_t*>(p)[i] = float_to_half(double_to_float_round_odd(v)); break;
    case DataType::kBFloat16: static_cast<uint16_t*>(p)[i] = float_to_bf16(double_to_float_round_odd(v)); break;
    default: break;
  }
}

// ---- block reductions (every thread of the block must call; blockDim.x a multiple of 32) --------

struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};

template <typename T, typename Op>
__device__ T warp_reduce(T v, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The reduction of v over the block, returned to every thread.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T partial[32];
  __shared__ T result;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_reduce(v, op);
  __syncthreads();  // a previous call may still read partial / result
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + 31) / 32;
    T w = lane < warps ? partial[lane] : identity;
    w = warp_reduce(w, op);
    if (lane == 0) result = w;
  }
  __syncthreads();
  return result;
}

// ---- bad-input reports -------------------------------------------------------------------------

// Records the first report of the run; the host raises it at the next synchronisation.
__device__ inline void report_error(DeviceError* slot, int reporter, int code, long long a, long long b,
                                    long long c) {
  if (atomicCAS(&slot->code, 0, code) == 0) {
    slot->reporter = reporter;
    slot->a = a;
    slot->b = b;
    slot->c = c;
  }
}

}  // namespace otter::cuda
