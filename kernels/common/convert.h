// Storage type <-> compute type of tensor elements, usable on host and device: half types load as
// float and store with round-to-nearest-even; Cast's conversion rule between any two storage types.
#pragma once

#include <type_traits>

#include "graph/dtype.h"
#include "kernels/common/elementwise.h"
#include "kernels/common/half.h"

namespace otter {

// The type arithmetic on a storage type runs in: float for the half types, else the type itself.
template <typename S> struct ComputeTypeOf { using type = S; };
template <> struct ComputeTypeOf<Half> { using type = float; };
template <> struct ComputeTypeOf<BFloat16> { using type = float; };
template <typename S> using compute_type = typename ComputeTypeOf<S>::type;

template <typename S> OTTER_HD compute_type<S> load_value(S v) { return v; }
OTTER_HD float load_value(Half v) { return half_to_float(v.bits); }
OTTER_HD float load_value(BFloat16 v) { return bf16_to_float(v.bits); }

template <typename S, typename C> OTTER_HD S store_value(C v) {
  if constexpr (std::is_same_v<S, Half>) return Half{float_to_half(static_cast<float>(v))};
  else if constexpr (std::is_same_v<S, BFloat16>) return BFloat16{float_to_bf16(static_cast<float>(v))};
  else return static_cast<S>(v);
}

// Cast from storage type S to storage type D (ONNX Cast): to a half type with one rounding (types
// exact in float go through float; wider ones through double_to_float_round_odd), float to
// integer truncating and saturating (convert_value), everything else by value.
template <typename D, typename S>
OTTER_HD D cast_value(S v) {
  if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) {
    if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16> || std::is_same_v<S, float> ||
                  std::is_same_v<S, bool> || std::is_same_v<S, int8_t> || std::is_same_v<S, uint8_t>) {
      return store_value<D>(static_cast<float>(load_value(v)));
    } else {
      return store_value<D>(double_to_float_round_odd(static_cast<double>(v)));
    }
  } else {
    return convert_value<D>(load_value(v));
  }
}

}  // namespace otter
