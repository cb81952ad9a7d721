// Which OpenBLAS kernels otter's fp32 GEMMs run (docs/performance.md, "OpenBLAS kernels").
//
// A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels from the CPU at load time, unless the
// environment variable OPENBLAS_CORETYPE names them. Naming an AVX2 core (Haswell, Zen) on a CPU
// with AVX-512 halves the GEMM rate where the CPU has 512-bit FMA units: on this project's AMD EPYC
// (Zen 5) an sgemm of 2048^3 on 2 threads runs at 250 GFLOP/s with OPENBLAS_CORETYPE=Haswell and at
// 467 GFLOP/s with OpenBLAS's own choice, Cooperlake. otter keeps what the environment says and says
// what it is: otter-train kernels and otter-bench print describe_blas_core().
#pragma once

#include <string>

namespace otter::cpu {

// "OpenBLAS Cooperlake (OpenBLAS's own choice)", or with OPENBLAS_CORETYPE set to an AVX2 core on
// an AVX-512 CPU: "OpenBLAS Haswell (OPENBLAS_CORETYPE=Haswell; this CPU has AVX-512: unset it for
// OpenBLAS's AVX-512 kernels)". Not an OpenBLAS: says so.
std::string describe_blas_core();

// True when OPENBLAS_CORETYPE holds OpenBLAS on AVX2 kernels although the CPU has AVX-512.
bool blas_core_below_cpu();

}  // namespace otter::cpu
