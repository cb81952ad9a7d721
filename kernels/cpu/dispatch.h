// Dtype dispatch for CPU kernels: calls a generic lambda with a value of the C++ storage type.
#pragma once

#include "graph/dtype.h"
#include "graph/error.h"

namespace otter {

// OTTER_DISPATCH_FLOAT(dtype, T, body): body is instantiated with T = float and double.
#define OTTER_DISPATCH_FLOAT(dtype, T, ...)                                         \
  [&] {                                                                              \
    switch (dtype) {                                                                 \
      case ::otter::DataType::kFloat32: { using T = float; return __VA_ARGS__(); }   \
      case ::otter::DataType::kFloat64: { using T = double; return __VA_ARGS__(); }  \
      default: ::otter::fail("unsupported dtype ", ::otter::dtype_name(dtype));      \
    }                                                                                \
  }()

// OTTER_DISPATCH_HALF(dtype, T, body): body is instantiated with T = Half and BFloat16, the 16-bit
// storage types whose arithmetic is done in float (kernels/common/half.h converts, with RNE).
#define OTTER_DISPATCH_HALF(dtype, T, ...)                                             \
  [&] {                                                                                 \
    switch (dtype) {                                                                    \
      case ::otter::DataType::kFloat16: { using T = ::otter::Half; return __VA_ARGS__(); }      \
      case ::otter::DataType::kBFloat16: { using T = ::otter::BFloat16; return __VA_ARGS__(); } \
      default: ::otter::fail("unsupported dtype ", ::otter::dtype_name(dtype), " (expected f16 or bf16)"); \
    }                                                                                   \
  }()

// Float types plus the integer types.
#define OTTER_DISPATCH_NUMERIC(dtype, T, ...)                                       \
  [&] {                                                                              \
    switch (dtype) {                                                                 \
      case ::otter::DataType::kFloat32: { using T = float; return __VA_ARGS__(); }   \
      case ::otter::DataType::kFloat64: { using T = double; return __VA_ARGS__(); }  \
      case ::otter::DataType::kInt64: { using T = int64_t; return __VA_ARGS__(); }   \
      case ::otter::DataType::kInt32: { using T = int32_t; return __VA_ARGS__(); }   \
      case ::otter::DataType::kInt8: { using T = int8_t; return __VA_ARGS__(); }     \
      case ::otter::DataType::kUInt8: { using T = uint8_t; return __VA_ARGS__(); }   \
      default: ::otter::fail("unsupported dtype ", ::otter::dtype_name(dtype));      \
    }                                                                                \
  }()

// Every storage type by size-compatible copy type (for data movement ops: Transpose, Gather, ...).
#define OTTER_DISPATCH_BYTES(dtype, T, ...)                                                   \
  [&] {                                                                                        \
    switch (::otter::dtype_size(dtype)) {                                                      \
      case 1: { using T = uint8_t; return __VA_ARGS__(); }                                     \
      case 2: { using T = uint16_t; return __VA_ARGS__(); }                                    \
      case 4: { using T = uint32_t; return __VA_ARGS__(); }                                    \
      case 8: { using T = uint64_t; return __VA_ARGS__(); }                                    \
      default: ::otter::fail("unsupported dtype ", ::otter::dtype_name(dtype));                \
    }                                                                                          \
  }()

}  // namespace otter
