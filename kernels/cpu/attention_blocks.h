// Pieces the CPU Attention kernels share (kernels/cpu/attention.cc for float32 and float64,
// kernels/cpu/attention_bf16.cc for bf16 on the bf16 dot products): the mask as seen by one block
// of scores, the block sizes, and when a call is worth OpenMP's threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/common/attention_params.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/isa.h"
#include "kernels/kernel.h"

namespace otter::attn {

using params::AttnAttrs;
using params::AttnShape;
using params::MaskMode;

// The mask broadcast to [..., H, S, T]: per (leading position, head) an offset, and the strides of
// the S and T axes (0 where the mask broadcasts).
template <typename T>
struct MaskView {
  MaskMode mode = MaskMode::kNone;
  T fill = 0;
  std::vector<T> add;           // kAdd: the mask in T
  const bool* flags = nullptr;  // fill modes
  std::vector<int64_t> off;     // per bh index
  int64_t ss = 0, st = 0;

  bool replaced(int64_t i) const { return flags[i] == (mode == MaskMode::kFillTrue); }
  // True when every score of the block is -inf after masking: the block adds nothing.
  bool dead(int64_t o, int64_t q0, int64_t rows, int64_t k0, int64_t cols) const {
    if (mode == MaskMode::kNone || (mode != MaskMode::kAdd && fill != -std::numeric_limits<T>::infinity()))
      return false;
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t base = o + (q0 + i) * ss + k0 * st;
      // A row of contiguous flags: one memchr for a kept score (flags are bytes 0 / 1).
      if (mode != MaskMode::kAdd && st == 1) {
        if (std::memchr(flags + base, mode == MaskMode::kFillTrue ? 0 : 1, static_cast<size_t>(cols))) return false;
        continue;
      }
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t at = base + j * st;
        if (mode == MaskMode::kAdd ? add[at] != -std::numeric_limits<T>::infinity() : !replaced(at)) return false;
      }
    }
    return true;
  }
  // True when the mask changes no score of the block other than by adding zero: no mask, or fill
  // modes with nothing replaced in the block (the causal lower triangle).
  bool clean(int64_t o, int64_t q0, int64_t rows, int64_t k0, int64_t cols) const {
    if (mode == MaskMode::kNone) return true;
    if (mode == MaskMode::kAdd) return false;
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t base = o + (q0 + i) * ss + k0 * st;
      if (st == 1) {
        if (std::memchr(flags + base, mode == MaskMode::kFillTrue ? 1 : 0, static_cast<size_t>(cols))) return false;
        continue;
      }
      for (int64_t j = 0; j < cols; ++j)
        if (replaced(base + j * st)) return false;
    }
    return true;
  }
  // Scales a block of scores (row stride ld) and applies the mask: row[j] * scale, plus the
  // additive mask, or `fill` where the mask replaces the score. Selects, so the rows vectorise
  // (contiguous mask rows, st == 1, have their own loops: a strided load does not).
  void apply(T* sc, int64_t ld, T scale, int64_t o, int64_t q0, int64_t rows, int64_t k0, int64_t cols) const {
    cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] {
      for (int64_t i = 0; i < rows; ++i) {
        T* __restrict row = sc + i * ld;
        const int64_t base = o + (q0 + i) * ss + k0 * st;
        if (mode == MaskMode::kNone) {
          for (int64_t j = 0; j < cols; ++j) row[j] *= scale;
        } else if (mode == MaskMode::kAdd) {
          const T* __restrict ad = add.data() + base;
          if (st == 1) {
            for (int64_t j = 0; j < cols; ++j) row[j] = row[j] * scale + ad[j];
          } else {
            for (int64_t j = 0; j < cols; ++j) row[j] = row[j] * scale + ad[j * st];
          }
        } else {
          // Byte compares and a float select: locals, so no member is reloaded per element.
          const uint8_t* __restrict f = reinterpret_cast<const uint8_t*>(flags + base);
          const uint8_t want = mode == MaskMode::kFillTrue ? 1 : 0;
          const T fl = fill, sc1 = scale;
          const int64_t step = st;
          if (step == 1) {
            for (int64_t j = 0; j < cols; ++j) row[j] = f[j] == want ? fl : row[j] * sc1;
          } else {
            for (int64_t j = 0; j < cols; ++j) row[j] = f[j * step] == want ? fl : row[j] * sc1;
          }
        }
      }
    });
  }
  // Zeroes the entries of a block (row stride ld) whose score the mask replaces (fill modes).
  void zero_replaced(T* g, int64_t ld, int64_t o, int64_t q0, int64_t rows, int64_t k0, int64_t cols) const {
    if (mode != MaskMode::kFillTrue && mode != MaskMode::kFillFalse) return;
    const bool want = mode == MaskMode::kFillTrue;
    cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] {
      for (int64_t i = 0; i < rows; ++i) {
        T* __restrict row = g + i * ld;
        const bool* __restrict f = flags + o + (q0 + i) * ss + k0 * st;
        if (st == 1) {
          for (int64_t j = 0; j < cols; ++j) row[j] = f[j] == want ? T(0) : row[j];
        } else {
          for (int64_t j = 0; j < cols; ++j) row[j] = f[j * st] == want ? T(0) : row[j];
        }
      }
    });
  }
};

template <typename T>
MaskView<T> mask_view(const KernelContext& ctx, const AttnAttrs& at, const AttnShape& s, int mask_input) {
  MaskView<T> mv;
  mv.mode = at.mode;
  mv.fill = static_cast<T>(at.fill);
  mv.off.assign(s.bh(), 0);
  if (at.mode == MaskMode::kNone) return mv;
  if (!ctx.has_input(mask_input)) ctx.error(str_cat("mask_mode needs input ", mask_input, " (mask)"));
  const Tensor& m = ctx.input(mask_input);
  params::MaskLayout ml = params::mask_layout(ctx, s, m, at.mode);
  if (at.mode == MaskMode::kAdd) {
    mv.add.resize(m.numel());
    for (int64_t i = 0; i < m.numel(); ++i) mv.add[i] = static_cast<T>(m.get_as_double(i));
  } else {
    mv.flags = m.data<bool>();
  }
  mv.off = std::move(ml.off);
  mv.ss = ml.ss;
  mv.st = ml.st;
  return mv;
}

// Multiply-adds of the score and output products below which a call runs on the calling thread:
// waking OpenMP's threads costs more than tiny heads compute, and on a loaded machine a wake-up
// that waits for a descheduled thread costs milliseconds.
constexpr int64_t kParallelAttentionWork = 262144;

inline int64_t attention_work(const AttnShape& s) { return s.bh() * s.s * s.t * (s.d + s.dv); }

// Block sizes: every GEMM of a block pair does at most cpu::kSerialGemmWork multiply-adds (64 x 64
// blocks at head size 64: on gpt_large 56-column key blocks left a 16-column remainder, and 128-row
// blocks skip fewer causal blocks; both were slower).
struct Blocks {
  int64_t q = 64, k = 64;
  explicit Blocks(const AttnShape& s) {
    const int64_t w = std::max<int64_t>({s.d, s.dv, 1});
    k = std::clamp<int64_t>(cpu::kSerialGemmWork / (q * w) / 8 * 8, 8, 128);
  }
};

}  // namespace otter::attn
