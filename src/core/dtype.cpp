#include "core/dtype.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace polykv {
namespace {

constexpr DTypeInfo kTypes[] = {
    {DType::F32, "f32", 1, 4, true},       {DType::F16, "f16", 1, 2, true},
    {DType::Q4_0, "q4_0", 32, 18, true},   {DType::Q4_1, "q4_1", 32, 20, true},
    {DType::Q5_0, "q5_0", 32, 22, true},   {DType::Q5_1, "q5_1", 32, 24, true},
    {DType::Q8_0, "q8_0", 32, 34, true},   {DType::Q8_1, "q8_1", 32, 36, false},
    {DType::Q2_K, "q2_K", 256, 84, true},  {DType::Q3_K, "q3_K", 256, 110, true},
    {DType::Q4_K, "q4_K", 256, 144, true}, {DType::Q5_K, "q5_K", 256, 176, true},
    {DType::Q6_K, "q6_K", 256, 210, true}, {DType::Q8_K, "q8_K", 256, 292, false},
    {DType::I8, "i8", 1, 1, false},        {DType::I16, "i16", 1, 2, false},
    {DType::I32, "i32", 1, 4, false},      {DType::I64, "i64", 1, 8, false},
    {DType::F64, "f64", 1, 8, false},      {DType::BF16, "bf16", 1, 2, true},
    {DType::TQ1_0, "tq1_0", 256, 54, true}, {DType::TQ2_0, "tq2_0", 256, 66, true},
    {DType::MXFP4, "mxfp4", 32, 17, true},  {DType::PTQ1_0, "ptq1_0", 128, 28, true},
};

}  // namespace

const DTypeInfo* dtype_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (uint32_t(t.type) == id) return &t;
  return nullptr;
}

const DTypeInfo& dtype_info(DType t) {
  const DTypeInfo* info = dtype_info(uint32_t(t));
  check(info != nullptr, "unknown tensor type id ", uint32_t(t));
  return *info;
}

DType dtype_from_name(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const auto& t : kTypes) {
    std::string n = t.name;
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    if (n == lower) return t.type;
  }
  fail("unknown type name '", name, "'");
}

int ggml_file_type(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q4_1: return 3;
    case DType::Q8_0: return 7;
    case DType::Q5_0: return 8;
    case DType::Q5_1: return 9;
    case DType::Q6_K: return 18;
    case DType::BF16: return 32;
    case DType::TQ1_0: return 36;  // LLAMA_FTYPE_MOSTLY_TQ1_0
    case DType::TQ2_0: return 37;
    case DType::MXFP4: return 38;  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE: experts mxfp4, other matrices q8_0
    default: return -1;
  }
}

size_t row_bytes(DType t, int64_t n) {
  const DTypeInfo& info = dtype_info(t);
  check(n >= 0 && n % info.block_size == 0, "row of ", n, " values is not a multiple of ", info.name,
        "'s block of ", info.block_size);
  return size_t(n / info.block_size) * size_t(info.type_size);
}

}  // namespace polykv
