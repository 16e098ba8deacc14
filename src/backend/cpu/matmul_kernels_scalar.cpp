// Scalar (baseline x86-64) dot kernels for the float and legacy quant weight types: the fallback on
// CPUs without AVX2, and the definition the SIMD kernels must agree with up to float rounding.
// The k-quant kernels are in kquant_kernels_scalar.cpp.
#include <cstring>

#include "backend/cpu/matmul_kernels.h"
#include "core/fp16.h"
#include "quant/blocks.h"

namespace polykv::cpu {

// Defined in kquant_kernels_scalar.cpp.
RowDotFn row_dot_kquant_scalar(DType type);

namespace {

float dot_f32(const void* w_row, const ActRow& a, int64_t n) {
  const float* w = static_cast<const float*>(w_row);
  float acc[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) acc[k] += w[i + k] * a.f32[i + k];
  for (; i < n; ++i) acc[0] += w[i] * a.f32[i];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

template <float (*kToF32)(uint16_t)>
float dot_half(const void* w_row, const ActRow& a, int64_t n) {
  const uint16_t* w = static_cast<const uint16_t*>(w_row);
  float acc[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) acc[k] += kToF32(w[i + k]) * a.f32[i + k];
  for (; i < n; ++i) acc[0] += kToF32(w[i]) * a.f32[i];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

// Σ u[i] * a[i] over one block of 32 (u: the block's unsigned quants, before any offset).
inline int32_t dot32(const uint8_t* u, const int8_t* a) {
  int32_t s = 0;
  for (int i = 0; i < 32; ++i) s += int32_t(u[i]) * a[i];
  return s;
}

// Unsigned quants of a block of 32: low nibbles are values 0..15, high nibbles 16..31, plus the
// fifth bit from qh (bit j of value j) when `qh` is given.
inline void unpack_nibbles(const uint8_t* qs, const uint8_t* qh, uint8_t* u) {
  uint32_t h = 0;
  if (qh) std::memcpy(&h, qh, 4);
  for (int j = 0; j < 16; ++j) {
    u[j] = uint8_t((qs[j] & 0x0F) | (((h >> j) & 1) << 4));
    u[j + 16] = uint8_t((qs[j] >> 4) | (((h >> (j + 16)) & 1) << 4));
  }
}

// q4_0 / q5_0: x = d * (u - kOffset).
template <typename Block, int kOffset>
float dot_legacy_sym(const void* w_row, const ActRow& a, int64_t n) {
  const Block* w = static_cast<const Block*>(w_row);
  float acc = 0.0f;
  uint8_t u[32];
  for (int64_t b = 0; b < n / 32; ++b) {
    if constexpr (kOffset == 16) unpack_nibbles(w[b].qs, w[b].qh, u);
    else unpack_nibbles(w[b].qs, nullptr, u);
    const int32_t s = dot32(u, a.qs + b * 32) - kOffset * a.sum[b];
    acc += fp16_to_f32(w[b].d) * a.d[b] * float(s);
  }
  return acc;
}

// q4_1 / q5_1: x = d * u + m, so the dot is d*da*Σu·q + m*da*Σq.
template <typename Block, bool kFiveBit>
float dot_legacy_min(const void* w_row, const ActRow& a, int64_t n) {
  const Block* w = static_cast<const Block*>(w_row);
  float acc = 0.0f;
  uint8_t u[32];
  for (int64_t b = 0; b < n / 32; ++b) {
    if constexpr (kFiveBit) unpack_nibbles(w[b].qs, w[b].qh, u);
    else unpack_nibbles(w[b].qs, nullptr, u);
    const int32_t s = dot32(u, a.qs + b * 32);
    acc += fp16_to_f32(w[b].d) * a.d[b] * float(s) + fp16_to_f32(w[b].m) * a.d[b] * float(a.sum[b]);
  }
  return acc;
}

float dot_q8_0(const void* w_row, const ActRow& a, int64_t n) {
  const BlockQ8_0* w = static_cast<const BlockQ8_0*>(w_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    const int8_t* q = a.qs + b * 32;
    int32_t s = 0;
    for (int i = 0; i < 32; ++i) s += int32_t(w[b].qs[i]) * q[i];
    acc += fp16_to_f32(w[b].d) * a.d[b] * float(s);
  }
  return acc;
}

}  // namespace

RowDotFn row_dot_scalar(DType type) {
  switch (type) {
    case DType::F32: return each_token<dot_f32>;
    case DType::F16: return each_token<dot_half<fp16_to_f32>>;
    case DType::BF16: return each_token<dot_half<bf16_to_f32>>;
    case DType::Q4_0: return each_token<dot_legacy_sym<BlockQ4_0, 8>>;
    case DType::Q5_0: return each_token<dot_legacy_sym<BlockQ5_0, 16>>;
    case DType::Q4_1: return each_token<dot_legacy_min<BlockQ4_1, false>>;
    case DType::Q5_1: return each_token<dot_legacy_min<BlockQ5_1, true>>;
    case DType::Q8_0: return each_token<dot_q8_0>;
    default: return row_dot_kquant_scalar(type);
  }
}

}  // namespace polykv::cpu
