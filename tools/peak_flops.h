// The machine's measured GEMM peak for otter-bench's "fraction of the limit": the best rate of a
// large square OpenBLAS sgemm at the current OpenBLAS thread count, and of a bf16 GEMM with fp32
// accumulation (OpenBLAS cblas_sbgemm, else otter's own kernels/cpu/gemm_bf16.h) where the CPU has
// bf16 dot products. A peak that cannot be measured says why in `unavailable`.
#pragma once

#include <cstdint>
#include <string>

namespace otter {

struct PeakFlops {
  double flops = 0;         // FLOP/s, 0 when unavailable
  std::string how;          // "OpenBLAS sgemm 2048^3, best of 3"
  std::string unavailable;  // why there is no figure (empty when there is one)
};

// fp32: cblas_sgemm of n x n by n x n, one untimed run, then the best of `repeats`.
PeakFlops measure_sgemm_peak(int64_t n, int repeats);
// bf16 inputs, fp32 accumulation and output: cblas_sbgemm looked up at run time, else (Debian's
// OpenBLAS 0.3.21 does not export it) otter's gemm_bf16; only on a CPU with avx512_bf16.
PeakFlops measure_bf16_peak(int64_t n, int repeats);
// otter-bench's peak for a run: the bf16 GEMM's for precision bf16 where there is one, else sgemm's
// (n = 0, or a device other than cpu: unavailable, saying why).
PeakFlops measure_peak(const std::string& device, const std::string& precision, int64_t n);

// measure_peak in a child process (this executable with OTTER_BENCH_PEAK set, `threads` OpenMP and
// OpenBLAS threads), so that its three n x n matrices do not count in this process's peak resident
// set, which otter-bench reports per model.
PeakFlops measure_peak_in_child(const std::string& device, const std::string& precision, int64_t n, int threads);
// In the child: when OTTER_BENCH_PEAK ("n:precision") is set, measures, prints the result on stdout
// and returns true (the caller exits).
bool serve_peak_request();

}  // namespace otter
