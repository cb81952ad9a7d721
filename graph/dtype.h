// Element types of otter tensors and their mapping to ONNX TensorProto codes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace otter {

enum class DataType : uint8_t {
  kUndefined = 0,
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt64,
  kInt32,
  kInt8,
  kUInt8,
  kBool,
  // The wider integer types ONNX allows in some ops (Max, Min, Mod, BitShift, Cast, data movement):
  // kernels that take them say so in their type lists.
  kInt16,
  kUInt16,
  kUInt32,
  kUInt64,
};

size_t dtype_size(DataType t);
// Short name used by the printer: f32 f64 f16 bf16 i64 i32 i8 u8 bool i16 u16 u32 u64.
std::string_view dtype_name(DataType t);
// Parses a short name (as printed) or a long one ("float32", "float16", "bfloat16", ...).
DataType dtype_from_name(std::string_view s);
bool is_float(DataType t);
bool is_integer(DataType t);
// The 16-bit float types (float16, bfloat16): stored in half, computed in float.
inline bool is_half(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }
// ONNX TensorProto::DataType codes.
int dtype_to_onnx(DataType t);
// Returns kUndefined for codes otter does not support.
DataType dtype_from_onnx(int code);
std::string onnx_dtype_name(int code);

// Compile-time mapping of C++ storage types to DataType.
struct Half { uint16_t bits; };
struct BFloat16 { uint16_t bits; };
template <typename T> struct DataTypeOf;
template <> struct DataTypeOf<float> { static constexpr DataType value = DataType::kFloat32; };
template <> struct DataTypeOf<double> { static constexpr DataType value = DataType::kFloat64; };
template <> struct DataTypeOf<Half> { static constexpr DataType value = DataType::kFloat16; };
template <> struct DataTypeOf<BFloat16> { static constexpr DataType value = DataType::kBFloat16; };
template <> struct DataTypeOf<int64_t> { static constexpr DataType value = DataType::kInt64; };
template <> struct DataTypeOf<int32_t> { static constexpr DataType value = DataType::kInt32; };
template <> struct DataTypeOf<int8_t> { static constexpr DataType value = DataType::kInt8; };
template <> struct DataTypeOf<uint8_t> { static constexpr DataType value = DataType::kUInt8; };
template <> struct DataTypeOf<bool> { static constexpr DataType value = DataType::kBool; };
template <> struct DataTypeOf<int16_t> { static constexpr DataType value = DataType::kInt16; };
template <> struct DataTypeOf<uint16_t> { static constexpr DataType value = DataType::kUInt16; };
template <> struct DataTypeOf<uint32_t> { static constexpr DataType value = DataType::kUInt32; };
template <> struct DataTypeOf<uint64_t> { static constexpr DataType value = DataType::kUInt64; };

}  // namespace otter
