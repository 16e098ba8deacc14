// Tensor element types. Ids and block layouts are ggml's (GGUF stores these ids), so files from the
// ecosystem load unchanged. A "block" is the unit of quantization: block_size values in type_size bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace polykv {

enum class DType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35,
  MXFP4 = 39,  // quant/mxfp4.h
  PTQ1_0 = 143,  // PrismML's llama.cpp fork (ternary, 128 values per block); not in upstream ggml
};

struct DTypeInfo {
  DType type;
  const char* name;    // ggml's name, e.g. "q4_K"
  int block_size;      // values per block
  int type_size;       // bytes per block
  bool weight_type;    // polykv can dequantize and multiply by it
};

// Info for a ggml type id, or nullptr if the id is unknown to polykv.
const DTypeInfo* dtype_info(uint32_t id);
const DTypeInfo& dtype_info(DType t);  // t must be a known type
inline const char* dtype_name(DType t) { return dtype_info(t).name; }
// Parses a name such as "q8_0" or "Q8_0" (case-insensitive); throws Error naming it if unknown.
DType dtype_from_name(const std::string& name);

// GGUF's general.file_type (llama.cpp's "mostly TYPE" enumeration) for a file whose matrices are all
// of type t; -1 when no value names that type.
int ggml_file_type(DType t);

// Bytes of a row of n values; throws Error unless n is a multiple of the block size.
size_t row_bytes(DType t, int64_t n);

}  // namespace polykv
