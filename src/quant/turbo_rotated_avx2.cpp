// AVX2 + FMA + F16C rotated-basis dot / axpy over coded heads (contracts in turbo.h; the scalar
// versions in turbo_rotated.cpp are the reference). 8 indices are unpacked at a time into the 8
// lanes of a ymm register with one variable shift (lane j shifted by bits*j), and the levels are
// gathered with _mm256_permutevar8x32_ps, which reads only the low 3 bits of each lane:
//   2 bits: table of 8 = levels[j & 3], so the neighbour index's bit in lane bit 2 is harmless;
//   3 bits: the 8 levels directly;
//   4 bits: levels 0..7 and 8..15 in two tables, blended on bit 3 of the index.
#include <immintrin.h>

#include <cstring>

#include "core/cpu_features.h"
#include "quant/turbo.h"
#include "quant/turbo_internal.h"

namespace polykv::turbo::detail {
namespace {

float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

// The group's fp16 norm r' via F16C (same value as detail::read_norm).
float norm_f16c(const uint8_t* rec) {
  uint16_t h;
  std::memcpy(&h, rec, 2);
  return _cvtsh_ss(h);
}

// Decoders: levels of indices [8k, 8k + 8) of a group's index stream at p, as 8 floats.
// Invariant: p is a group record + 2, and every load stays inside that record (group >= 32).
struct Decode2 {
  __m256 table;
  explicit Decode2(const float* lv) {
    table = _mm256_setr_ps(lv[0], lv[1], lv[2], lv[3], lv[0], lv[1], lv[2], lv[3]);
  }
  __m256 operator()(const uint8_t* p, int k) const {
    // 2 bytes per 8 indices: load the 4 bytes ending at the chunk's last byte (for chunk 0 the
    // first two are the fp16 norm, p being record + 2), and shift the chunk's 16 bits down per lane.
    const __m256i shifts = _mm256_setr_epi32(16, 18, 20, 22, 24, 26, 28, 30);
    const __m256i idx = _mm256_srlv_epi32(_mm256_set1_epi32(int(load_u32(p + 2 * k - 2))), shifts);
    return _mm256_permutevar8x32_ps(table, idx);
  }
};

struct Decode3 {
  __m256 table;
  explicit Decode3(const float* lv) { table = _mm256_loadu_ps(lv); }
  __m256 operator()(const uint8_t* p, int k) const {
    // 3 bytes per 8 indices. Load the 4 bytes ending at the chunk's last byte, so the last chunk
    // does not read past the group; for chunk 0 the extra byte is p[-1], the fp16 norm's high byte
    // (p is always record + 2), shifted out here.
    const __m256i shifts = _mm256_setr_epi32(8, 11, 14, 17, 20, 23, 26, 29);
    const __m256i idx = _mm256_srlv_epi32(_mm256_set1_epi32(int(load_u32(p + 3 * k - 1))), shifts);
    return _mm256_permutevar8x32_ps(table, idx);
  }
};

struct Decode4 {
  __m256 lo, hi;
  explicit Decode4(const float* lv) {
    lo = _mm256_loadu_ps(lv);
    hi = _mm256_loadu_ps(lv + 8);
  }
  __m256 operator()(const uint8_t* p, int k) const {
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256i idx = _mm256_srlv_epi32(_mm256_set1_epi32(int(load_u32(p + 4 * k))), shifts);
    const __m256 high = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));  // sign bit = index bit 3
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx), high);
  }
};

template <typename Decode>
float dot_groups(const Layout& l, const uint8_t* src, const float* q_rot) {
  const Decode dec(level_table(l.bits, l.group));
  __m256 total = _mm256_setzero_ps();
  for (int g = 0; g < l.n_groups; ++g) {
    const uint8_t* rec = src + size_t(g) * l.group_bytes;
    const float* q = q_rot + g * l.group;
    // Four independent accumulators hide the FMA latency (a 128-group is 16 chunks of 8).
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    for (int k = 0; k < l.group / 8; k += 4) {  // group / 8 is a multiple of 4 (group >= 32)
      acc0 = _mm256_fmadd_ps(dec(rec + 2, k), _mm256_loadu_ps(q + 8 * k), acc0);
      acc1 = _mm256_fmadd_ps(dec(rec + 2, k + 1), _mm256_loadu_ps(q + 8 * k + 8), acc1);
      acc2 = _mm256_fmadd_ps(dec(rec + 2, k + 2), _mm256_loadu_ps(q + 8 * k + 16), acc2);
      acc3 = _mm256_fmadd_ps(dec(rec + 2, k + 3), _mm256_loadu_ps(q + 8 * k + 24), acc3);
    }
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
    total = _mm256_fmadd_ps(_mm256_set1_ps(norm_f16c(rec)), sum, total);
  }
  return hsum(total);
}

template <typename Decode>
void axpy_groups(const Layout& l, float a, const uint8_t* src, float* acc_rot) {
  const Decode dec(level_table(l.bits, l.group));
  for (int g = 0; g < l.n_groups; ++g) {
    const uint8_t* rec = src + size_t(g) * l.group_bytes;
    const __m256 ar = _mm256_set1_ps(a * norm_f16c(rec));
    float* acc = acc_rot + g * l.group;
    for (int k = 0; k < l.group / 8; ++k)
      _mm256_storeu_ps(acc + 8 * k, _mm256_fmadd_ps(ar, dec(rec + 2, k), _mm256_loadu_ps(acc + 8 * k)));
  }
}

template <typename Decode>
void decode_groups(const Layout& l, const uint8_t* src, float* y_rot) {
  const Decode dec(level_table(l.bits, l.group));
  for (int g = 0; g < l.n_groups; ++g) {
    const uint8_t* rec = src + size_t(g) * l.group_bytes;
    const __m256 rn = _mm256_set1_ps(norm_f16c(rec));
    float* y = y_rot + g * l.group;
    for (int k = 0; k < l.group / 8; ++k) _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(rn, dec(rec + 2, k)));
  }
}

void decode_avx2(int bits, const uint8_t* src, float* y_rot, int head_dim) {
  const Layout l = layout(bits, head_dim);
  if (bits == 2) return decode_groups<Decode2>(l, src, y_rot);
  if (bits == 3) return decode_groups<Decode3>(l, src, y_rot);
  return decode_groups<Decode4>(l, src, y_rot);
}

float dot_avx2(int bits, const uint8_t* src, const float* q_rot, int head_dim) {
  const Layout l = layout(bits, head_dim);
  if (bits == 2) return dot_groups<Decode2>(l, src, q_rot);
  if (bits == 3) return dot_groups<Decode3>(l, src, q_rot);
  return dot_groups<Decode4>(l, src, q_rot);
}

void axpy_avx2(int bits, float a, const uint8_t* src, float* acc_rot, int head_dim) {
  const Layout l = layout(bits, head_dim);
  if (bits == 2) return axpy_groups<Decode2>(l, a, src, acc_rot);
  if (bits == 3) return axpy_groups<Decode3>(l, a, src, acc_rot);
  return axpy_groups<Decode4>(l, a, src, acc_rot);
}

}  // namespace

const Kernels* kernels_avx2() {
  static const Kernels k{dot_avx2, axpy_avx2, decode_avx2};
  return cpu_features().has_avx2_set() ? &k : nullptr;
}

}  // namespace polykv::turbo::detail
