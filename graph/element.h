// One element of a tensor's storage read as double by its runtime dtype, on host and device: the
// one definition behind Tensor::get_as_double (graph/tensor.cc) and the CUDA kernels'
// load_as_double (kernels/cuda/common.cuh).
#pragma once

#include <cstdint>

#include "graph/dtype.h"
#include "graph/half.h"

namespace otter {

// Element i of the array p of dtype t (any numeric or bool dtype; 0 for kUndefined).
OTTER_HD double element_as_double(const void* p, DataType t, int64_t i) {
  switch (t) {
    case DataType::kFloat32: return static_cast<const float*>(p)[i];
    case DataType::kFloat64: return static_cast<const double*>(p)[i];
    case DataType::kFloat16: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DataType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DataType::kInt32: return static_cast<const int32_t*>(p)[i];
    case DataType::kInt8: return static_cast<const int8_t*>(p)[i];
    case DataType::kUInt8: return static_cast<const uint8_t*>(p)[i];
    case DataType::kBool: return static_cast<const uint8_t*>(p)[i] ? 1.0 : 0.0;
    case DataType::kInt16: return static_cast<const int16_t*>(p)[i];
    case DataType::kUInt16: return static_cast<const uint16_t*>(p)[i];
    case DataType::kUInt32: return static_cast<const uint32_t*>(p)[i];
    case DataType::kUInt64: return static_cast<double>(static_cast<const uint64_t*>(p)[i]);
    case DataType::kUndefined: break;
  }
  return 0.0;
}

}  // namespace otter
