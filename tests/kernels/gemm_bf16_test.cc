// The bf16 GEMM (kernels/cpu/gemm_bf16.h) against a float64 GEMM of the same bf16 values: both the
// native path (AVX512_BF16 dot products; skipped with the reason on a CPU without them) and the
// widening path. The products of bf16 values are exact, so the only error is float32 summation:
// per element at most about k * 2^-24 * sum_k |a||b| (plus alpha/beta roundings); the tests allow
// 2x that bound and check it is not vacuous (the float32 result is not the float64 one bitwise).
// The shapes cross every edge of the blocking: rows and columns not multiples of the 12 x 32
// micro-tile, odd k, k beyond one 1024-deep block (a single element left over at k = 1025), n beyond
// one 2048-column panel, all four transposition cases, beta 0 / 1 / other, strided leading
// dimensions. An odd leading dimension or depth, or a last partial 12-row strip, makes the GEMM pack
// a row-major A that it otherwise reads in place; both occur.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/common/half.h"
#include "kernels/cpu/bf16_block_gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/isa.h"

namespace otter {
namespace {

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
  int64_t pad = 0;  // extra elements per stored row (leading dimension > the dense one)
};

std::vector<uint16_t> random_bf16(int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<uint16_t> v(static_cast<size_t>(count));
  for (auto& x : v) x = float_to_bf16(d(rng));
  return v;
}

double f64(uint16_t x) { return static_cast<double>(bf16_to_float(x)); }

// A case's stored operands: A and B (bf16, leading dimensions ac and bc) and C (float32, ldc),
// random from the seeds.
struct Operands {
  int64_t ac, bc, ldc;
  std::vector<uint16_t> a, b;
  std::vector<float> c;
};

Operands operands(const Case& t, uint64_t seed_a, uint64_t seed_b, uint64_t seed_c) {
  const int64_t ar = t.ta ? t.k : t.m, br = t.tb ? t.n : t.k;
  Operands o{(t.ta ? t.m : t.k) + t.pad, (t.tb ? t.k : t.n) + t.pad, t.n + t.pad, {}, {}, {}};
  o.a = random_bf16(ar * o.ac, seed_a);
  o.b = random_bf16(br * o.bc, seed_b);
  o.c.resize(static_cast<size_t>(t.m * o.ldc));
  std::mt19937_64 rng(seed_c);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& x : o.c) x = d(rng);
  return o;
}

// cpu::gemm_bf16 with its default arguments, as a callable check_case can take.
void plain_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda,
                const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cpu::gemm_bf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Runs one case through `gemm` and checks every element against float64.
template <typename Gemm>
void check_case(const Case& t, Gemm gemm, const char* path) {
  Operands ops = operands(t, 11 + t.m, 23 + t.n, 5);
  const int64_t ac = ops.ac, bc = ops.bc, ldc = ops.ldc;
  const std::vector<uint16_t>&a = ops.a, &b = ops.b;
  std::vector<float>& c = ops.c;
  const std::vector<float> c0 = c;
  gemm(t.ta, t.tb, t.m, t.n, t.k, t.alpha, a.data(), ac, b.data(), bc, t.beta, c.data(), ldc);
  int64_t differ = 0;
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t j = 0; j < t.n; ++j) {
      double sum = 0, mag = 0;
      for (int64_t p = 0; p < t.k; ++p) {
        const double x = f64(t.ta ? a[p * ac + i] : a[i * ac + p]), y = f64(t.tb ? b[j * bc + p] : b[p * bc + j]);
        sum += x * y;
        mag += std::fabs(x * y);
      }
      const double cold = c0[i * ldc + j];
      const double want = t.alpha * sum + (t.beta == 0.f ? 0.0 : t.beta * cold);
      const double bound = 2.0 * ((t.k + 2) * std::ldexp(1.0, -24) * (std::fabs(t.alpha) * mag + std::fabs(t.beta * cold)) +
                                  std::ldexp(1.0, -24) * std::fabs(want));
      const float got = c[i * ldc + j];
      ASSERT_LE(std::fabs(got - want), bound) << path << " m=" << t.m << " n=" << t.n << " k=" << t.k << " ta=" << t.ta
                                              << " tb=" << t.tb << " at (" << i << ", " << j << ")";
      differ += static_cast<double>(got) != want;
    }
    // Padding columns of C are never written.
    for (int64_t j = t.n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], c0[i * ldc + j]) << path << ": wrote past n";
  }
  if (t.k > 8) EXPECT_GT(differ, 0) << path << ": float32 sums equal float64 everywhere; the bound checks nothing";
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      v.push_back({1, 1, 1, ta, tb, 1.f, 0.f});
      v.push_back({12, 32, 2, ta, tb, 1.f, 0.f});
      v.push_back({13, 33, 7, ta, tb, 1.f, 0.f});
      v.push_back({37, 70, 301, ta, tb, 0.5f, 1.f, 3});
      v.push_back({100, 65, 1025, ta, tb, 1.f, 0.25f});
    }
  v.push_back({200, 2100, 64, false, false, 1.f, 0.f});  // two column panels
  v.push_back({257, 96, 2048, false, true, 1.f, 1.f});  // two depth blocks
  v.push_back({130, 40, 1400, true, false, 1.f, 0.f});  // two depth blocks, beta 0 (partial sums in C)
  v.push_back({5, 3, 0, false, false, 1.f, 0.5f});      // k = 0: C = beta * C
  return v;
}

TEST(GemmBf16, WideningPathMatchesFloat64) {
  cpu::set_bf16_gemm_widened(true);
  for (const Case& t : cases()) check_case(t, plain_gemm, "widened");
  cpu::set_bf16_gemm_widened(false);
}

TEST(GemmBf16, NativePathMatchesFloat64) {
  if (!cpu::bf16_gemm_available()) GTEST_SKIP() << "this CPU has no avx512_bf16: " << cpu::describe_bf16_gemm();
  const cpu::Isa saved = cpu::active_isa();
  cpu::set_active_isa(cpu::Isa::kAvx512);
  cpu::set_bf16_gemm_widened(false);
  ASSERT_TRUE(cpu::bf16_gemm_native()) << cpu::describe_bf16_gemm();
  for (const Case& t : cases()) check_case(t, plain_gemm, "native");
  cpu::set_active_isa(saved);
}

// The native path's work split at other thread counts: an equal share of the 12-row strips per
// thread (uneven at 3 and 5 threads, a last partial strip, a packed and an in-place A), and the
// (row block, column group) split where rows are few.
TEST(GemmBf16, NativePathSplitsRowsAtAnyThreadCount) {
  if (!cpu::bf16_gemm_available()) GTEST_SKIP() << "this CPU has no avx512_bf16: " << cpu::describe_bf16_gemm();
  const cpu::Isa saved = cpu::active_isa();
  cpu::set_active_isa(cpu::Isa::kAvx512);
  cpu::set_bf16_gemm_widened(false);
  const int threads = omp_get_max_threads();
  for (int nt : {3, 5}) {
    omp_set_num_threads(nt);
    for (const Case& t : {Case{1033, 96, 600, false, false, 1.f, 0.f}, Case{1033, 64, 300, true, true, 1.f, 1.f},
                          Case{130, 200, 96, false, true, 1.f, 0.f}, Case{30, 700, 64, false, false, 1.f, 0.f}})
      check_case(t, plain_gemm, nt == 3 ? "native, 3 threads" : "native, 5 threads");
  }
  omp_set_num_threads(threads);
  cpu::set_active_isa(saved);
}

// gemm_bf16_round must give, bit for bit, gemm_bf16 into C followed by float_to_bf16 of C: on
// both paths, every case above (one and several depth blocks, beta 0 and not, all transpositions,
// strided C and Y), with NaN, infinity and values halfway between two bf16 in C so that the
// rounding's ties and NaN quieting are exercised when beta != 0; with beta 0, also without a C.
void check_round_case(const Case& t, const char* path) {
  Operands ops = operands(t, 31 + t.m, 37 + t.n, 7);
  const int64_t ac = ops.ac, bc = ops.bc, ldc = ops.ldc;
  const std::vector<uint16_t>&a = ops.a, &b = ops.b;
  std::vector<float>& c = ops.c;
  if (c.size() > 3) {
    c[0] = NAN;
    c[1] = INFINITY;
    c[2] = bf16_to_float(0x3f81) + std::ldexp(1.0f, -8);  // halfway between two bf16: a tie
  }
  std::vector<float> ref = c, scratch = c;
  cpu::gemm_bf16(t.ta, t.tb, t.m, t.n, t.k, t.alpha, a.data(), ac, b.data(), bc, t.beta, ref.data(), ldc);
  std::vector<uint16_t> y(static_cast<size_t>(t.m * ldc), 0xdead);
  cpu::gemm_bf16_round(t.ta, t.tb, t.m, t.n, t.k, t.alpha, a.data(), ac, b.data(), bc, t.beta, scratch.data(), ldc,
                       y.data(), ldc);
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t j = 0; j < t.n; ++j)
      ASSERT_EQ(y[i * ldc + j], float_to_bf16(ref[i * ldc + j]))
          << path << " m=" << t.m << " n=" << t.n << " k=" << t.k << " ta=" << t.ta << " tb=" << t.tb << " beta="
          << t.beta << " at (" << i << ", " << j << ")";
    for (int64_t j = t.n; j < ldc; ++j) ASSERT_EQ(y[i * ldc + j], 0xdead) << path << ": wrote past n";
  }
  if (t.beta != 0.f) return;
  // Without a C of the caller's (its own buffer where it needs the sums): the same bits.
  std::vector<uint16_t> y2(static_cast<size_t>(t.m * ldc), 0xdead);
  cpu::gemm_bf16_round(t.ta, t.tb, t.m, t.n, t.k, t.alpha, a.data(), ac, b.data(), bc, 0.f, nullptr, ldc, y2.data(),
                       ldc);
  ASSERT_EQ(y2, y) << path << " without C: m=" << t.m << " n=" << t.n << " k=" << t.k;
}

TEST(GemmBf16, RoundedOutputIsTheRoundedSumOnBothPaths) {
  cpu::set_bf16_gemm_widened(true);
  for (const Case& t : cases()) check_round_case(t, "widened");
  cpu::set_bf16_gemm_widened(false);
  if (!cpu::bf16_gemm_available()) GTEST_SKIP() << "native path: this CPU has no avx512_bf16 (widened path checked)";
  const cpu::Isa saved = cpu::active_isa();
  cpu::set_active_isa(cpu::Isa::kAvx512);
  for (const Case& t : cases()) check_round_case(t, "native");
  cpu::set_active_isa(saved);
}

// The packing helpers (kernels/cpu/bf16_block_gemm.h) word for word against their definitions:
// shapes with whole 16 x 16 tiles of words (the transposing path's registers), partial ones in
// either direction, odd k (a zero-padded last word), strides wider than the rows. Every output word
// the definition names is compared; the others must stay as they were.
TEST(GemmBf16, PackingHelpersMatchTheirDefinitions) {
  if (!cpu::bf16_gemm_available()) GTEST_SKIP() << "this CPU has no avx512_bf16: " << cpu::describe_bf16_gemm();
  const uint32_t kUntouched = 0xdeadbeefu;
  struct Shape {
    int64_t m, k, ldx_pad, ldo_pad;
  };
  for (const Shape sh : {Shape{16, 32, 0, 0}, Shape{32, 512, 0, 0}, Shape{32, 256, 8, 0}, Shape{17, 33, 1, 3},
                         Shape{15, 64, 0, 5}, Shape{48, 47, 2, 1}, Shape{64, 128, 0, 32}, Shape{1, 1, 0, 0},
                         Shape{33, 95, 3, 0}, Shape{12, 512, 0, 0}}) {
    SCOPED_TRACE("m " + std::to_string(sh.m) + " k " + std::to_string(sh.k));
    const int64_t kp = (sh.k + 1) / 2, ldx = sh.k + sh.ldx_pad;
    const std::vector<uint16_t> x = random_bf16(sh.m * ldx, 31);
    // pairs_across_transposed: out[p * ldo + i] = x[i, 2p] | x[i, 2p + 1] << 16.
    const int64_t ldo = sh.m + sh.ldo_pad;
    std::vector<uint32_t> out(static_cast<size_t>(kp * ldo), kUntouched);
    cpu::bf16blk::pairs_across_transposed(x.data(), ldx, sh.m, sh.k, out.data(), ldo);
    for (int64_t p = 0; p < kp; ++p)
      for (int64_t i = 0; i < ldo; ++i) {
        const uint32_t hi = i < sh.m && 2 * p + 1 < sh.k ? x[i * ldx + 2 * p + 1] : 0u;
        const uint32_t want = i < sh.m ? (x[i * ldx + 2 * p] | hi << 16) : kUntouched;
        ASSERT_EQ(out[p * ldo + i], want) << "pairs_across_transposed word p " << p << " i " << i;
      }
    // pairs_down on the same values read as [k = m rows, n = k columns]: out[p * ldo + j] =
    // x[2p, j] | x[2p + 1, j] << 16.
    const int64_t rows = sh.m, cols = sh.k, rp = (rows + 1) / 2, ldd = cols + sh.ldo_pad;
    std::vector<uint32_t> down(static_cast<size_t>(rp * ldd), kUntouched);
    cpu::bf16blk::pairs_down(x.data(), ldx, rows, cols, down.data(), ldd);
    for (int64_t p = 0; p < rp; ++p)
      for (int64_t j = 0; j < ldd; ++j) {
        const uint32_t hi = j < cols && 2 * p + 1 < rows ? x[(2 * p + 1) * ldx + j] : 0u;
        const uint32_t want = j < cols ? (x[2 * p * ldx + j] | hi << 16) : kUntouched;
        ASSERT_EQ(down[p * ldd + j], want) << "pairs_down word p " << p << " j " << j;
      }
  }
}

// A C marked read_later (gemm_bf16.h) that the native path writes with streaming stores: 64-byte
// aligned, 256 x 1024 float32 (1 MiB), beta 0, k within one depth block; one it must write with
// ordinary stores (a row stride not a multiple of 16 floats); and one of two column panels whose
// last strip (16 columns) goes through masked ordinary stores. All hold the bits the ordinary
// path computes, and the stride's padding is not written.
TEST(GemmBf16, StreamedOutputHasTheSameBits) {
  if (!cpu::bf16_gemm_available()) GTEST_SKIP() << "this CPU has no avx512_bf16: " << cpu::describe_bf16_gemm();
  const cpu::Isa saved = cpu::active_isa();
  cpu::set_active_isa(cpu::Isa::kAvx512);
  const int64_t m = 256, k = 700;
  // Whole strips; a row stride that rules streaming out; two column panels, the last strip half.
  for (const auto [n, ldc] : {std::pair<int64_t, int64_t>{1024, 1024}, {1024, 1028}, {2064, 2064}}) {
    const std::vector<uint16_t> a = random_bf16(k * m, 41), b = random_bf16(k * n, 42);
    float* streamed = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(m * ldc) * sizeof(float)));
    std::vector<float> plain(static_cast<size_t>(m * ldc), -7.f);
    std::fill(streamed, streamed + m * ldc, -7.f);
    cpu::gemm_bf16(true, false, m, n, k, 1.f, a.data(), m, b.data(), n, 0.f, plain.data(), ldc);
    cpu::gemm_bf16(true, false, m, n, k, 1.f, a.data(), m, b.data(), n, 0.f, streamed, ldc, /*read_later=*/true);
    int64_t differ = 0, nonzero = 0;
    for (int64_t i = 0; i < m * ldc; ++i) {
      differ += float_bits(streamed[i]) != float_bits(plain[i]);
      nonzero += i % ldc < n && streamed[i] != 0.f;
    }
    EXPECT_EQ(differ, 0) << "n " << n << ", ldc " << ldc;
    EXPECT_GT(nonzero, m * n / 2) << "n " << n << ", ldc " << ldc;
    std::free(streamed);
  }
  cpu::set_active_isa(saved);
}

TEST(GemmBf16, NarrowerIsaOrWidenFlagTurnsNativeOff) {
  const cpu::Isa saved = cpu::active_isa();
  cpu::set_bf16_gemm_widened(true);
  EXPECT_FALSE(cpu::bf16_gemm_native());
  EXPECT_NE(cpu::describe_bf16_gemm().find("widened"), std::string::npos);
  cpu::set_bf16_gemm_widened(false);
  if (cpu::best_isa() >= cpu::Isa::kAvx2) {
    cpu::set_active_isa(cpu::Isa::kAvx2);
    EXPECT_FALSE(cpu::bf16_gemm_native()) << "the avx2 variant must not use AVX-512 bf16 instructions";
  }
  cpu::set_active_isa(saved);
}

}  // namespace
}  // namespace otter
