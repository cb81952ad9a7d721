// Measures the GEMM peak otter-bench compares each model's step rate with (see peak_flops.h).
#include "tools/peak_flops.h"

#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <vector>

#include "graph/error.h"
#include "kernels/cpu/blas_core.h"
#include "kernels/cpu/gemm_bf16.h"
#include "tools/bench_dp.h"

namespace otter {

namespace {

// Best rate of `gemm` (2*n^3 FLOPs per call) over `repeats` timed calls after one untimed call.
template <typename F>
double best_rate(int64_t n, int repeats, F gemm) {
  gemm();
  double best = 0;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    auto t0 = std::chrono::steady_clock::now();
    gemm();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / s);
  }
  return best;
}

std::string describe(const char* fn, int64_t n, int repeats) {
  char b[96];
  std::snprintf(b, sizeof b, "OpenBLAS %s %lld^3, best of %d", fn, static_cast<long long>(n), std::max(1, repeats));
  return b;
}

// cblas_sbgemm's signature (OpenBLAS cblas.h, bfloat16 = uint16_t).
using SbgemmFn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                          const uint16_t*, blasint, const uint16_t*, blasint, float, float*, blasint);

}  // namespace

PeakFlops measure_sgemm_peak(int64_t n, int repeats) {
  std::vector<float> a(static_cast<size_t>(n * n), 0.5f), b(a.size(), 0.25f), c(a.size(), 0.0f);
  const auto m = static_cast<blasint>(n);
  PeakFlops p;
  p.flops = best_rate(n, repeats, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f, a.data(), m, b.data(), m, 0.0f, c.data(), m);
  });
  p.how = describe("sgemm", n, repeats) + " (" + cpu::describe_blas_core() + ")";
  return p;
}

PeakFlops measure_bf16_peak(int64_t n, int repeats) {
  PeakFlops p;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) {
    p.unavailable = "the CPU has no avx512_bf16";
    return p;
  }
  std::vector<uint16_t> a(static_cast<size_t>(n * n), 0x3f00), b(a.size(), 0x3e80);  // 0.5, 0.25
  std::vector<float> c(a.size(), 0.0f);
  auto fn = reinterpret_cast<SbgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
  if (!fn) {
    // Debian's OpenBLAS has none: otter's own bf16 GEMM, the one bf16 MatMul and Gemm run.
    if (!cpu::bf16_gemm_native()) {
      p.unavailable = "the loaded OpenBLAS does not export cblas_sbgemm, and otter's bf16 GEMM is " +
                      cpu::describe_bf16_gemm();
      return p;
    }
    p.flops = best_rate(n, repeats, [&] {
      cpu::gemm_bf16(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    });
    char buf[96];
    std::snprintf(buf, sizeof buf, "otter gemm_bf16 (VDPBF16PS) %lld^3, best of %d", static_cast<long long>(n),
                  std::max(1, repeats));
    p.how = buf;
    return p;
  }
  const auto m = static_cast<blasint>(n);
  p.flops = best_rate(n, repeats, [&] {
    fn(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f, a.data(), m, b.data(), m, 0.0f, c.data(), m);
  });
  p.how = describe("sbgemm", n, repeats);
  return p;
}

// The peak the step rate is compared with: for --precision bf16 a bf16 GEMM where the CPU has bf16
// dot products (OpenBLAS's sbgemm, else otter's own), else sgemm (fp16 steps widen their GEMMs to
// fp32, as bf16 ones do without the dot products).
PeakFlops measure_peak(const std::string& device, const std::string& precision, int64_t n) {
  PeakFlops p;
  OTTER_CHECK(n >= 0, "otter-bench: --peak-size must be >= 0");
  if (device != "cpu") p.unavailable = "the peak is measured for --device cpu only";
  if (n == 0) p.unavailable = "--peak-size 0";
  if (!p.unavailable.empty()) return p;
  if (precision == "bf16") {
    p = measure_bf16_peak(n, 5);
    if (p.flops > 0) return p;
    const std::string why = p.unavailable;
    p = measure_sgemm_peak(n, 5);
    p.how += ", no bf16 peak: " + why;
    return p;
  }
  return measure_sgemm_peak(n, 5);
}

PeakFlops measure_peak_in_child(const std::string& device, const std::string& precision, int64_t n, int threads) {
  if (device != "cpu" || n <= 0) return measure_peak(device, precision, n);  // nothing to measure, or an error
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::ostringstream cmd;
  cmd << "OTTER_BENCH_PEAK=" << n << ":" << precision << " OMP_NUM_THREADS=" << threads
      << " OPENBLAS_NUM_THREADS=" << threads << " '" << self << "'";
  // Three lines: FLOP/s, how, why unavailable.
  std::istringstream out(run_child(cmd.str(), "the peak GEMM measurement"));
  std::string flops;
  PeakFlops p;
  std::getline(out, flops);
  std::getline(out, p.how);
  std::getline(out, p.unavailable);
  p.flops = std::strtod(flops.c_str(), nullptr);
  return p;
}

bool serve_peak_request() {
  const char* req = std::getenv("OTTER_BENCH_PEAK");
  if (!req) return false;
  const std::string r = req;
  const size_t colon = r.find(':');
  OTTER_CHECK(colon != std::string::npos, "OTTER_BENCH_PEAK must be n:precision, got '", r, "'");
  const PeakFlops p = measure_peak("cpu", r.substr(colon + 1), std::strtoll(r.c_str(), nullptr, 10));
  std::printf("%.17g\n%s\n%s\n", p.flops, p.how.c_str(), p.unavailable.c_str());
  return true;
}

}  // namespace otter
