// The LUT layout of ternary matrices (ternary_lut.h): shapes, packing, the switch and the scalar reference.
#include "backend/cpu/ternary_lut.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/ternary_kernels.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "core/isa.h"
#include "quant/ternary.h"

namespace polykv::cpu {
namespace {

// Bytes of the original rows per 256 values, and where code byte m / scale s of that span sit.
size_t span_bytes(DType type) {
  return type == DType::TQ1_0 ? sizeof(BlockTQ1_0) : type == DType::TQ2_0 ? sizeof(BlockTQ2_0) : 2 * sizeof(BlockPTQ1_0);
}
size_t code_offset(DType type, int m) {
  return type == DType::PTQ1_0 ? size_t(m / 26) * sizeof(BlockPTQ1_0) + size_t(m % 26) : size_t(m);
}
size_t scale_offset(DType type, int s) {
  return type == DType::TQ1_0 ? 52 : type == DType::TQ2_0 ? 64 : size_t(s) * sizeof(BlockPTQ1_0) + 26;
}

std::atomic<bool>& lut_flag() {
  static std::atomic<bool> v{[] {
    const char* e = std::getenv("POLYKV_TQ_LUT");
    return e == nullptr || std::string_view(e) != "0";
  }()};
  return v;
}

}  // namespace

LutShape lut_shape(DType type) {
  switch (type) {
    case DType::TQ1_0: return {52, 52, 1};
    case DType::PTQ1_0: return {52, 26, 2};
    case DType::TQ2_0: return {64, 32, 1};
    default: return {};
  }
}

int lut_value_index(DType type, int m, int n) {
  if (type == DType::TQ1_0) return m < 52 ? base3_value_index(48, 4, m, n) : -1;  // ternary_kernels.h
  if (type == DType::PTQ1_0) {
    if (m >= 52) return -1;
    const int v = base3_value_index(24, 2, m % 26, n);
    return v < 0 ? -1 : 128 * (m / 26) + v;
  }
  if (type == DType::TQ2_0) return m < 64 && n < 4 ? 128 * (m / 32) + 32 * n + m % 32 : -1;
  return -1;
}

int lut_digit_value(DType type, uint8_t q, int n) {
  if (type == DType::TQ2_0) return n < 4 ? int((q >> (2 * n)) & 3) - 1 : 0;
  return base3_digit(q, n) - 1;
}

void set_ternary_lut(bool on) { lut_flag().store(on, std::memory_order_relaxed); }
bool ternary_lut_enabled() { return lut_flag().load(std::memory_order_relaxed); }

bool ternary_lut_available(DType type, int64_t n_in) {
  static const bool cpu_ok = cpu_features().has_avx512_set() && cpu_features().avx512vbmi;
  return is_ternary(type) && n_in > 0 && n_in % 256 == 0 && cpu_ok && active_isa() == Isa::Avx512;
}

std::unique_ptr<PackedMatrix> pack_ternary_lut(DType type, const void* data, int64_t n_in, int64_t n_out,
                                               size_t row_stride) {
  if (!is_ternary(type) || n_in <= 0 || n_in % 256 != 0 || n_out < kLutRows) return nullptr;
  const LutShape sh = lut_shape(type);
  auto p = std::make_unique<PackedMatrix>();
  p->type = type;
  p->n_in = n_in;
  p->n_groups = n_out / kLutRows;
  p->rows_per_group = kLutRows;
  const int64_t nb = n_in / 256;
  p->qs = alloc_packed_bytes(size_t(nb * p->n_groups) * size_t(sh.record_bytes()));
  const uint8_t* base = static_cast<const uint8_t*>(data);
  const size_t span = span_bytes(type);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t c = 0; c < p->n_groups; ++c) {
      for (int m = 0; m < sh.n_code; ++m) {
        uint8_t* dst = const_cast<uint8_t*>(lut_codes_at(p->qs.get(), sh, p->n_groups, b, c, m));
        for (int lane = 0; lane < kLutRows; ++lane)
          dst[lane] = base[size_t(c * kLutRows + lut_row_of_lane(lane)) * row_stride + size_t(b) * span + code_offset(type, m)];
      }
      for (int s = 0; s < sh.n_scale; ++s) {
        uint8_t* dst = const_cast<uint8_t*>(lut_scales_at(p->qs.get(), sh, p->n_groups, b, c, s));
        for (int r = 0; r < kLutRows; ++r)
          std::memcpy(dst + 2 * r, base + size_t(c * kLutRows + r) * row_stride + size_t(b) * span + scale_offset(type, s), 2);
      }
    }
  return p;
}

void ternary_lut_ref(DType type, const void* data, int64_t n_in, int64_t n_out, size_t row_stride,
                     const ActRow* act, int n_tok, float* y, int64_t ldy) {
  const LutShape sh = lut_shape(type);
  const size_t span = span_bytes(type);
  for (int t = 0; t < n_tok; ++t)
    for (int64_t r = 0; r < n_out; ++r) {
      const uint8_t* row = static_cast<const uint8_t*>(data) + size_t(r) * row_stride;
      float acc = 0.0f;
      for (int64_t b = 0; b < n_in / 256; ++b) {
        const uint8_t* blk = row + size_t(b) * span;
        const int8_t* x = act[t].qs + 256 * b;
        int32_t seg_sum[2] = {0, 0};
        for (int m = 0; m < sh.n_code; ++m) {
          const uint8_t q = blk[code_offset(type, m)];
          for (int n = 0; n < 5; ++n) {
            const int v = lut_value_index(type, m, n);
            if (v >= 0) seg_sum[m / sh.seg] += lut_digit_value(type, q, n) * int32_t(x[v]);
          }
        }
        const float dx = act[t].d[b];
        if (sh.n_scale == 1) {
          uint16_t h;
          std::memcpy(&h, blk + scale_offset(type, 0), 2);
          acc = std::fma(float(seg_sum[0] + seg_sum[1]), fp16_to_f32(h) * dx, acc);
        } else {
          for (int s = 0; s < 2; ++s) {
            uint16_t h;
            std::memcpy(&h, blk + scale_offset(type, s), 2);
            acc = std::fma(float(seg_sum[s]), fp16_to_f32(h) * dx, acc);
          }
        }
      }
      y[t * ldy + r] = acc;
    }
}


void ternary_lut_matmul_scalar(const PackedMatrix& p, int64_t c0, int64_t c1, const ActRow* act, int n_tok,
                               float* y, int64_t ldy) {
  const LutShape sh = lut_shape(p.type);
  for (int t = 0; t < n_tok; ++t)
    for (int64_t c = c0; c < c1; ++c)
      for (int lane = 0; lane < kLutRows; ++lane) {
        const int r = lut_row_of_lane(lane);
        float acc = 0.0f;
        for (int64_t b = 0; b < p.n_in / 256; ++b) {
          const int8_t* x = act[t].qs + 256 * b;
          int32_t seg_sum[2] = {0, 0};
          for (int m = 0; m < sh.n_code; ++m)
            for (int n = 0; n < 5; ++n) {
              const int v = lut_value_index(p.type, m, n);
              if (v >= 0)
                seg_sum[m / sh.seg] +=
                    lut_digit_value(p.type, lut_codes_at(p.qs.get(), sh, p.n_groups, b, c, m)[lane], n) * int32_t(x[v]);
            }
          const float dx = act[t].d[b];
          for (int s = 0; s < sh.n_scale; ++s) {
            uint16_t h;
            std::memcpy(&h, lut_scales_at(p.qs.get(), sh, p.n_groups, b, c, s) + 2 * r, 2);
            const int32_t sum = sh.n_scale == 1 ? seg_sum[0] + seg_sum[1] : seg_sum[s];
            acc = std::fma(float(sum), fp16_to_f32(h) * dx, acc);
          }
        }
        y[t * ldy + c * kLutRows + r] = acc;
      }
}

}  // namespace polykv::cpu
