// Scalar dot kernels for the k-quant weight types against Q8_K activations. Each super-block of 256
// values is unpacked to unsigned quants u[256] (the stored bits, before any offset), then
//   q2_K: x = d*sc[k]*u - dmin*m[k]       (16 sub-blocks of 16)
//   q3_K: x = d*s[k]*(u - 4)              (16 sub-blocks of 16, s signed)
//   q4_K, q5_K: x = d*sc[j]*u - dmin*m[j] (8 sub-blocks of 32)
//   q6_K: x = d*s[k]*(u - 32)             (16 sub-blocks of 16, s signed int8)
// and the offsets/mins are folded in with the activations' per-16 sums (bsums). All integer sums
// are exact; float rounding only enters when scaling by d and the activation scale.
#include "backend/cpu/kernel_kquant_scales.h"
#include "backend/cpu/matmul_kernels.h"
#include "core/fp16.h"
#include "quant/blocks.h"

namespace polykv::cpu {
namespace {

// Σ u[i] * a[i] over 16 values.
inline int32_t dot16(const uint8_t* u, const int8_t* a) {
  int32_t s = 0;
  for (int i = 0; i < 16; ++i) s += int32_t(u[i]) * a[i];
  return s;
}

float dot_q2_K(const void* w_row, const ActRow& a, int64_t n) {
  const BlockQ2_K* w = static_cast<const BlockQ2_K*>(w_row);
  float acc = 0.0f;
  uint8_t u[256];
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockQ2_K& x = w[b];
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l) u[128 * h + 32 * j + l] = (x.qs[32 * h + l] >> (2 * j)) & 3;
    const int8_t* q = a.qs + b * 256;
    const int16_t* bs = a.bsums + b * 16;
    int32_t sum_q = 0, sum_m = 0;
    for (int k = 0; k < 16; ++k) {
      sum_q += (x.scales[k] & 0x0F) * dot16(u + 16 * k, q + 16 * k);
      sum_m += (x.scales[k] >> 4) * bs[k];
    }
    acc += a.d[b] * (fp16_to_f32(x.d) * float(sum_q) - fp16_to_f32(x.dmin) * float(sum_m));
  }
  return acc;
}

float dot_q3_K(const void* w_row, const ActRow& a, int64_t n) {
  const BlockQ3_K* w = static_cast<const BlockQ3_K*>(w_row);
  float acc = 0.0f;
  uint8_t u[256];
  int8_t s[16];
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockQ3_K& x = w[b];
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l)
          u[128 * h + 32 * j + l] = uint8_t(((x.qs[32 * h + l] >> (2 * j)) & 3) |
                                            (((x.hmask[l] >> (4 * h + j)) & 1) << 2));
    unpack_scales_q3_K(x.scales, s);
    const int8_t* q = a.qs + b * 256;
    const int16_t* bs = a.bsums + b * 16;
    int32_t sum = 0;
    for (int k = 0; k < 16; ++k) sum += s[k] * (dot16(u + 16 * k, q + 16 * k) - 4 * bs[k]);
    acc += a.d[b] * fp16_to_f32(x.d) * float(sum);
  }
  return acc;
}

// q4_K and q5_K share everything but the fifth bit.
template <typename Block, bool kFiveBit>
float dot_q45_K(const void* w_row, const ActRow& a, int64_t n) {
  const Block* w = static_cast<const Block*>(w_row);
  float acc = 0.0f;
  uint8_t u[256], sc[8], m[8];
  for (int64_t b = 0; b < n / 256; ++b) {
    const Block& x = w[b];
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l) {
        u[64 * j + l] = x.qs[32 * j + l] & 0x0F;
        u[64 * j + 32 + l] = x.qs[32 * j + l] >> 4;
        if constexpr (kFiveBit) {
          u[64 * j + l] |= ((x.qh[l] >> (2 * j)) & 1) << 4;
          u[64 * j + 32 + l] |= ((x.qh[l] >> (2 * j + 1)) & 1) << 4;
        }
      }
    unpack_scales_mins_k4(x.scales, sc, m);
    const int8_t* q = a.qs + b * 256;
    const int16_t* bs = a.bsums + b * 16;
    int32_t sum_q = 0, sum_m = 0;
    for (int j = 0; j < 8; ++j) {
      sum_q += sc[j] * (dot16(u + 32 * j, q + 32 * j) + dot16(u + 32 * j + 16, q + 32 * j + 16));
      sum_m += m[j] * (bs[2 * j] + bs[2 * j + 1]);
    }
    acc += a.d[b] * (fp16_to_f32(x.d) * float(sum_q) - fp16_to_f32(x.dmin) * float(sum_m));
  }
  return acc;
}

float dot_q6_K(const void* w_row, const ActRow& a, int64_t n) {
  const BlockQ6_K* w = static_cast<const BlockQ6_K*>(w_row);
  float acc = 0.0f;
  uint8_t u[256];
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockQ6_K& x = w[b];
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x.ql + 64 * h;
      const uint8_t* qh = x.qh + 32 * h;
      uint8_t* y = u + 128 * h;
      for (int l = 0; l < 32; ++l) {
        y[l] = uint8_t((ql[l] & 0x0F) | ((qh[l] & 3) << 4));
        y[l + 32] = uint8_t((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4));
        y[l + 64] = uint8_t((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
        y[l + 96] = uint8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
      }
    }
    const int8_t* q = a.qs + b * 256;
    const int16_t* bs = a.bsums + b * 16;
    int32_t sum = 0;
    for (int k = 0; k < 16; ++k) sum += x.scales[k] * (dot16(u + 16 * k, q + 16 * k) - 32 * bs[k]);
    acc += a.d[b] * fp16_to_f32(x.d) * float(sum);
  }
  return acc;
}

}  // namespace

RowDotFn row_dot_kquant_scalar(DType type) {
  switch (type) {
    case DType::Q2_K: return each_token<dot_q2_K>;
    case DType::Q3_K: return each_token<dot_q3_K>;
    case DType::Q4_K: return each_token<dot_q45_K<BlockQ4_K, false>>;
    case DType::Q5_K: return each_token<dot_q45_K<BlockQ5_K, true>>;
    case DType::Q6_K: return each_token<dot_q6_K>;
    default: return nullptr;
  }
}

}  // namespace polykv::cpu
