// DataType helpers.
#include "graph/dtype.h"

#include "graph/error.h"

namespace otter {

size_t dtype_size(DataType t) {
  switch (t) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
    case DataType::kInt64: return 8;
    case DataType::kInt32: return 4;
    case DataType::kInt8: return 1;
    case DataType::kUInt8: return 1;
    case DataType::kBool: return 1;
    case DataType::kInt16: return 2;
    case DataType::kUInt16: return 2;
    case DataType::kUInt32: return 4;
    case DataType::kUInt64: return 8;
    case DataType::kUndefined: return 0;
  }
  return 0;
}

std::string_view dtype_name(DataType t) {
  switch (t) {
    case DataType::kFloat32: return "f32";
    case DataType::kFloat64: return "f64";
    case DataType::kFloat16: return "f16";
    case DataType::kBFloat16: return "bf16";
    case DataType::kInt64: return "i64";
    case DataType::kInt32: return "i32";
    case DataType::kInt8: return "i8";
    case DataType::kUInt8: return "u8";
    case DataType::kBool: return "bool";
    case DataType::kInt16: return "i16";
    case DataType::kUInt16: return "u16";
    case DataType::kUInt32: return "u32";
    case DataType::kUInt64: return "u64";
    case DataType::kUndefined: return "?";
  }
  return "?";
}

DataType dtype_from_name(std::string_view s) {
  struct Entry { std::string_view a, b; DataType t; };
  static const Entry kEntries[] = {
      {"f32", "float32", DataType::kFloat32}, {"f64", "float64", DataType::kFloat64},
      {"f16", "float16", DataType::kFloat16}, {"bf16", "bfloat16", DataType::kBFloat16},
      {"i64", "int64", DataType::kInt64},     {"i32", "int32", DataType::kInt32},
      {"i8", "int8", DataType::kInt8},        {"u8", "uint8", DataType::kUInt8},
      {"bool", "bool", DataType::kBool},      {"i16", "int16", DataType::kInt16},
      {"u16", "uint16", DataType::kUInt16},   {"u32", "uint32", DataType::kUInt32},
      {"u64", "uint64", DataType::kUInt64},
  };
  for (const auto& e : kEntries)
    if (s == e.a || s == e.b) return e.t;
  if (s == "fp32" || s == "float") return DataType::kFloat32;
  if (s == "fp16" || s == "half") return DataType::kFloat16;
  if (s == "double") return DataType::kFloat64;
  fail("unknown data type '", s, "' (expected one of f32 f64 f16 bf16 i64 i32 i8 u8 bool i16 u16 u32 u64)");
}

bool is_float(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 ||
         t == DataType::kBFloat16;
}

bool is_integer(DataType t) {
  return t == DataType::kInt64 || t == DataType::kInt32 || t == DataType::kInt8 ||
         t == DataType::kUInt8 || t == DataType::kInt16 || t == DataType::kUInt16 || t == DataType::kUInt32 ||
         t == DataType::kUInt64;
}

// TensorProto codes: FLOAT=1 UINT8=2 INT8=3 UINT16=4 INT16=5 INT32=6 INT64=7 STRING=8 BOOL=9
// FLOAT16=10 DOUBLE=11 UINT32=12 UINT64=13 COMPLEX64=14 COMPLEX128=15 BFLOAT16=16.
int dtype_to_onnx(DataType t) {
  switch (t) {
    case DataType::kFloat32: return 1;
    case DataType::kUInt8: return 2;
    case DataType::kInt8: return 3;
    case DataType::kInt32: return 6;
    case DataType::kInt64: return 7;
    case DataType::kBool: return 9;
    case DataType::kUInt16: return 4;
    case DataType::kInt16: return 5;
    case DataType::kUInt32: return 12;
    case DataType::kUInt64: return 13;
    case DataType::kFloat16: return 10;
    case DataType::kFloat64: return 11;
    case DataType::kBFloat16: return 16;
    case DataType::kUndefined: return 0;
  }
  return 0;
}

DataType dtype_from_onnx(int code) {
  switch (code) {
    case 1: return DataType::kFloat32;
    case 2: return DataType::kUInt8;
    case 3: return DataType::kInt8;
    case 6: return DataType::kInt32;
    case 7: return DataType::kInt64;
    case 9: return DataType::kBool;
    case 4: return DataType::kUInt16;
    case 5: return DataType::kInt16;
    case 12: return DataType::kUInt32;
    case 13: return DataType::kUInt64;
    case 10: return DataType::kFloat16;
    case 11: return DataType::kFloat64;
    case 16: return DataType::kBFloat16;
    default: return DataType::kUndefined;
  }
}

std::string onnx_dtype_name(int code) {
  static const char* kNames[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",
                                 "INT16",     "INT32",  "INT64",     "STRING",     "BOOL",
                                 "FLOAT16",   "DOUBLE", "UINT32",    "UINT64",     "COMPLEX64",
                                 "COMPLEX128", "BFLOAT16"};
  if (code >= 0 && code <= 16) return kNames[code];
  return str_cat("type#", code);
}

}  // namespace otter
