// Scalar reference quantization: ggml's round-to-nearest reference algorithms (quantize_row_*_ref),
// bit-identical to them, for f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 and the activation type
// q8_K. The k-quant weight types q2_K..q6_K (ggml's iterative scale searches) are in
// kquant_quantize_ref.cpp.
//
// Floating point: every product is rounded to float before the following add (no fused
// multiply-add). ggml's C source leaves contraction to the compiler, so an FMA build of ggml can
// differ from this in the last step of a rounding tie; gguf-py's numpy port emulates the fused form
// for q4_0/q5_0. See tests/quant_test.cpp for how the two are compared.
#include "core/fp_contract_off.h"  // first: contraction off for this TU

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kquant_quantize_ref.h"
#include "quant/mxfp4.h"
#include "quant/quant.h"
#include "quant/ternary.h"

namespace polykv {
namespace {

// The value of largest magnitude (the first one, on ties), with its sign: q4_0/q5_0 map it to the
// most negative quant so the full range -8..7 (-16..15) is used.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

inline float inverse_or_zero(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

// Packs 32 quants of 0..15 (low 4 bits used) into 16 bytes: value j in the low nibble of byte j,
// value j + 16 in the high nibble.
void pack_nibbles(const uint8_t q[kQK32], uint8_t qs[kQK32 / 2]) {
  for (int j = 0; j < kQK32 / 2; ++j) qs[j] = uint8_t((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
}

// Bit j of the result is bit 4 of q[j] (q5_0/q5_1's fifth bits), stored little-endian.
void pack_fifth_bits(const uint8_t q[kQK32], uint8_t qh[4]) {
  uint32_t bits = 0;
  for (int j = 0; j < kQK32; ++j) bits |= uint32_t((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &bits, 4);
}

// Symmetric with an offset: q = trunc(x * id + offset), clamped to qmax. offset is the zero point
// plus 0.5, so truncation rounds to nearest (x * id + zero point is >= 0 by construction of d).
void quantize_symmetric(const float* x, float id, float offset, int qmax, uint8_t q[kQK32]) {
  for (int j = 0; j < kQK32; ++j) {
    const float scaled = x[j] * id;
    q[j] = uint8_t(std::min(qmax, int(int8_t(scaled + offset))));
  }
}

// Min-offset: q = trunc((x - min) * id + 0.5), clamped to qmax.
void quantize_with_min(const float* x, float min, float id, int qmax, uint8_t q[kQK32]) {
  for (int j = 0; j < kQK32; ++j) {
    const float scaled = (x[j] - min) * id;
    q[j] = uint8_t(std::min(qmax, int(int8_t(scaled + 0.5f))));
  }
}

struct MinMax {
  float min, max;
};
MinMax min_max(const float* x, int n) {
  MinMax r{FLT_MAX, -FLT_MAX};
  for (int j = 0; j < n; ++j) {
    r.min = std::min(r.min, x[j]);
    r.max = std::max(r.max, x[j]);
  }
  return r;
}

void quantize_q4_0(const float* x, BlockQ4_0& b) {
  const float d = signed_absmax(x, kQK32) / -8.0f;
  uint8_t q[kQK32];
  quantize_symmetric(x, inverse_or_zero(d), 8.5f, 15, q);
  b.d = f32_to_fp16(d);
  pack_nibbles(q, b.qs);
}

void quantize_q5_0(const float* x, BlockQ5_0& b) {
  const float d = signed_absmax(x, kQK32) / -16.0f;
  uint8_t q[kQK32];
  quantize_symmetric(x, inverse_or_zero(d), 16.5f, 31, q);
  b.d = f32_to_fp16(d);
  pack_fifth_bits(q, b.qh);
  pack_nibbles(q, b.qs);
}

void quantize_q4_1(const float* x, BlockQ4_1& b) {
  const MinMax mm = min_max(x, kQK32);
  const float d = (mm.max - mm.min) / 15.0f;
  uint8_t q[kQK32];
  quantize_with_min(x, mm.min, inverse_or_zero(d), 15, q);
  b.d = f32_to_fp16(d);
  b.m = f32_to_fp16(mm.min);
  pack_nibbles(q, b.qs);
}

// ggml does not clamp q5_1's quants; (x - min) * id never exceeds 31.5 for finite input, so the
// clamp here only guards against overflow into the packed bits and changes no result.
void quantize_q5_1(const float* x, BlockQ5_1& b) {
  const MinMax mm = min_max(x, kQK32);
  const float d = (mm.max - mm.min) / 31.0f;
  uint8_t q[kQK32];
  quantize_with_min(x, mm.min, inverse_or_zero(d), 31, q);
  b.d = f32_to_fp16(d);
  b.m = f32_to_fp16(mm.min);
  pack_fifth_bits(q, b.qh);
  pack_nibbles(q, b.qs);
}

// q = roundf(x / d) (halves away from zero), d = max|x| / 127; the quants use the unrounded d.
void quantize_q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0.0f;
  for (int j = 0; j < kQK32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = inverse_or_zero(d);
  b.d = f32_to_fp16(d);
  for (int j = 0; j < kQK32; ++j) b.qs[j] = int8_t(std::round(x[j] * id));
}

// Round half to even, as ggml's nearest_int (valid for |v| < 2^22).
inline int nearest_int(float v) { return int(std::nearbyint(v)); }

// q8_K: the value of largest magnitude, x_max (with sign), maps to -127 exactly: iscale = -127/x_max,
// q = min(127, round_half_even(x * iscale)), d = 1/iscale (kept as float). So the largest value is
// -127 and the opposite extreme can reach at most 127. bsums[g] = sum of q over values 16g..16g+15.
// An all-zero block has d = 0, q = 0 and bsums = 0.
void quantize_q8_K(const float* x, BlockQ8_K& b) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQK_K; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax == 0.0f) {
    b.d = 0.0f;
    std::memset(b.qs, 0, sizeof(b.qs));
    std::memset(b.bsums, 0, sizeof(b.bsums));
    return;
  }
  const float iscale = -127.0f / max;
  for (int j = 0; j < kQK_K; ++j) b.qs[j] = int8_t(std::min(127, nearest_int(iscale * x[j])));
  for (int g = 0; g < kQK_K / 16; ++g) {
    int sum = 0;
    for (int j = 0; j < 16; ++j) sum += b.qs[16 * g + j];
    b.bsums[g] = int16_t(sum);
  }
  b.d = 1.0f / iscale;
}

// Applies one block function to each block of a row of n values.
template <typename Block, int values_per_block>
void quantize_blocks(void (*one)(const float*, Block&), const float* src, void* dst, int64_t n) {
  Block* blocks = static_cast<Block*>(dst);
  for (int64_t i = 0; i < n / values_per_block; ++i) one(src + i * values_per_block, blocks[i]);
}

}  // namespace

bool can_quantize(DType type) {
  switch (type) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_0:
    case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_K: case DType::Q2_K:
    case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
    case DType::TQ1_0: case DType::TQ2_0: case DType::PTQ1_0: case DType::MXFP4:
      return true;
    default:
      return false;
  }
}

void quantize_row_ref(DType type, const float* src, void* dst, int64_t n) {
  row_bytes(type, n);  // throws unless n is a whole number of blocks
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case DType::F16: {
      uint16_t* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_fp16(src[i]);
      return;
    }
    case DType::BF16: {
      uint16_t* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::Q4_0: return quantize_blocks<BlockQ4_0, kQK32>(quantize_q4_0, src, dst, n);
    case DType::Q4_1: return quantize_blocks<BlockQ4_1, kQK32>(quantize_q4_1, src, dst, n);
    case DType::Q5_0: return quantize_blocks<BlockQ5_0, kQK32>(quantize_q5_0, src, dst, n);
    case DType::Q5_1: return quantize_blocks<BlockQ5_1, kQK32>(quantize_q5_1, src, dst, n);
    case DType::Q8_0: return quantize_blocks<BlockQ8_0, kQK32>(quantize_q8_0, src, dst, n);
    case DType::Q8_K: return quantize_blocks<BlockQ8_K, kQK_K>(quantize_q8_K, src, dst, n);
    case DType::Q2_K: return quantize_row_q2_K_ref(src, static_cast<BlockQ2_K*>(dst), n);
    case DType::Q3_K: return quantize_row_q3_K_ref(src, static_cast<BlockQ3_K*>(dst), n);
    case DType::Q4_K: return quantize_row_q4_K_ref(src, static_cast<BlockQ4_K*>(dst), n);
    case DType::Q5_K: return quantize_row_q5_K_ref(src, static_cast<BlockQ5_K*>(dst), n);
    case DType::Q6_K: return quantize_row_q6_K_ref(src, static_cast<BlockQ6_K*>(dst), n);
    case DType::TQ1_0: case DType::TQ2_0: case DType::PTQ1_0: return quantize_ternary_row(type, src, dst, n);
    case DType::MXFP4: return quantize_mxfp4_row(src, dst, n);
    default:
      fail("quantize_row_ref: type ", dtype_name(type), " is not supported");
  }
}

}  // namespace polykv
