// Repacking q4_K / q5_K rows into the x16 layouts (packed_q4k.h) and the scalar reference of their
// group kernels.
#include "backend/cpu/packed_q4k.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "backend/cpu/kernel_kquant_scales.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/blocks.h"

namespace polykv::cpu {
namespace {

template <bool kFive>
std::unique_ptr<PackedMatrix> pack_k45(const void* data, int64_t n_in, int64_t n_out, size_t row_stride) {
  using L = K45Layout<kFive>;
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  if (n_in % 256 != 0 || n_out < kPackRows) return nullptr;
  auto p = std::make_unique<PackedMatrix>();
  p->type = kFive ? DType::Q5_K : DType::Q4_K;
  p->n_in = n_in;
  p->n_groups = n_out / kPackRows;
  const int64_t nb = p->n_blocks();
  const size_t bytes = size_t(p->n_groups * nb) * L::kRecord;
  p->qs = alloc_packed_bytes(bytes);
  const uint8_t* base = static_cast<const uint8_t*>(data);
  for (int64_t g = 0; g < p->n_groups; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* rec = p->qs.get() + size_t(g * nb + b) * L::kRecord;
      for (int r = 0; r < kPackRows; ++r) {
        const Block& blk = reinterpret_cast<const Block*>(base + size_t(g * kPackRows + r) * row_stride)[b];
        for (int pr = 0; pr < 4; ++pr)
          for (int c = 0; c < 8; ++c) std::memcpy(rec + pr * 512 + c * 64 + 4 * r, blk.qs + 32 * pr + 4 * c, 4);
        if constexpr (kFive)
          for (int c = 0; c < 8; ++c) std::memcpy(rec + kQ5KQhOffset + c * 64 + 4 * r, blk.qh + 4 * c, 4);
        for (int v = 0; v < 3; ++v) std::memcpy(rec + L::kScales + v * 64 + 4 * r, blk.scales + 4 * v, 4);
        std::memcpy(rec + L::kD + 2 * r, &blk.d, 2);
        std::memcpy(rec + L::kDmin + 2 * r, &blk.dmin, 2);
      }
    }
  return p;
}

// Rows 16g .. 16g+15 against n_tok tokens, reading the packed record (packed_q4k.h for the order).
template <bool kFive>
void packed_dot_k45_ref(const PackedMatrix& p, int64_t g, const ActRow* act, int n_tok, float* y, int64_t ldy) {
  using L = K45Layout<kFive>;
  for (int t = 0; t < n_tok; ++t)
    for (int r = 0; r < kPackRows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < p.n_blocks(); ++b) {
        const uint8_t* rec = p.qs_at(g, b);
        uint8_t scales[12], sc[8], m[8];
        for (int v = 0; v < 3; ++v) std::memcpy(scales + 4 * v, rec + L::kScales + v * 64 + 4 * r, 4);
        unpack_scales_mins_k4(scales, sc, m);
        const int8_t* q = act[t].qs + 256 * b;
        const int16_t* bs = act[t].bsums + 16 * b;
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < 8; ++j) {
          int32_t s = 0;
          for (int i = 0; i < 32; ++i) {
            const uint8_t byte = rec[(j / 2) * 512 + (i / 4) * 64 + 4 * r + i % 4];
            int32_t u = j % 2 ? byte >> 4 : byte & 0x0F;
            if constexpr (kFive) u |= ((rec[kQ5KQhOffset + (i / 4) * 64 + 4 * r + i % 4] >> j) & 1) << 4;
            s += u * q[32 * j + i];
          }
          isum += int32_t(sc[j]) * s;
          msum += int32_t(m[j]) * (int32_t(bs[2 * j]) + int32_t(bs[2 * j + 1]));
        }
        uint16_t d16, dmin16;
        std::memcpy(&d16, rec + L::kD + 2 * r, 2);
        std::memcpy(&dmin16, rec + L::kDmin + 2 * r, 2);
        const float dd = fp16_to_f32(d16) * act[t].d[b], dm = fp16_to_f32(dmin16) * act[t].d[b];
        acc = std::fma(float(isum), dd, acc);
        acc = std::fma(-float(msum), dm, acc);
      }
      y[t * ldy + r] = acc;
    }
}

}  // namespace

std::unique_ptr<PackedMatrix> pack_matrix_q4_K(const void* data, int64_t n_in, int64_t n_out, size_t row_stride) {
  return pack_k45<false>(data, n_in, n_out, row_stride);
}
std::unique_ptr<PackedMatrix> pack_matrix_q5_K(const void* data, int64_t n_in, int64_t n_out, size_t row_stride) {
  return pack_k45<true>(data, n_in, n_out, row_stride);
}

PackedDotFn packed_dot_q4_K_scalar() { return packed_dot_k45_ref<false>; }
PackedDotFn packed_dot_q5_K_scalar() { return packed_dot_k45_ref<true>; }

}  // namespace polykv::cpu
