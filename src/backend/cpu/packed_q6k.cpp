// Repacking q6_K rows into the x16 layout (packed_q6k.h) and the scalar reference of its group kernel.
#include "backend/cpu/packed_q6k.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/blocks.h"

namespace polykv::cpu {

std::unique_ptr<PackedMatrix> pack_matrix_q6_K(const void* data, int64_t n_in, int64_t n_out, size_t row_stride) {
  if (n_in % 256 != 0 || n_out < kPackRows) return nullptr;
  auto p = std::make_unique<PackedMatrix>();
  p->type = DType::Q6_K;
  p->n_in = n_in;
  p->n_groups = n_out / kPackRows;
  const int64_t nb = p->n_blocks();
  const size_t bytes = size_t(p->n_groups * nb) * kQ6KRecordBytes;
  p->qs = alloc_packed_bytes(bytes);
  const uint8_t* base = static_cast<const uint8_t*>(data);
  for (int64_t g = 0; g < p->n_groups; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* rec = p->qs.get() + size_t(g * nb + b) * kQ6KRecordBytes;
      std::memset(rec + kQ6KDOffset, 0, kQ6KRecordBytes - kQ6KDOffset);
      for (int r = 0; r < kPackRows; ++r) {
        const BlockQ6_K& blk = reinterpret_cast<const BlockQ6_K*>(base + size_t(g * kPackRows + r) * row_stride)[b];
        for (int v = 0; v < 32; ++v) std::memcpy(rec + v * 64 + 4 * r, blk.ql + 4 * v, 4);
        for (int v = 0; v < 16; ++v) std::memcpy(rec + kQ6KQhOffset + v * 64 + 4 * r, blk.qh + 4 * v, 4);
        for (int v = 0; v < 4; ++v) std::memcpy(rec + kQ6KScalesOffset + v * 64 + 4 * r, blk.scales + 4 * v, 4);
        std::memcpy(rec + kQ6KDOffset + 2 * r, &blk.d, 2);
      }
    }
  return p;
}

namespace {

// Unsigned 6-bit quant (0..63) of value 32s + 4c + i of row r in a record (packed_q6k.h).
int q6_at(const uint8_t* rec, int r, int s, int c, int i) {
  const int h = s / 4, k = s % 4;
  const uint8_t lo = rec[(16 * h + 8 * (k & 1) + c) * 64 + 4 * r + i];
  const uint8_t hi = rec[kQ6KQhOffset + (8 * h + c) * 64 + 4 * r + i];
  return ((k >> 1 ? lo >> 4 : lo) & 0x0F) | (((hi >> (2 * k)) & 3) << 4);
}

// Rows 16g .. 16g+15 against n_tok tokens, reading the packed record (packed_q6k.h for the order).
void packed_dot_q6_K_ref(const PackedMatrix& p, int64_t g, const ActRow* act, int n_tok, float* y, int64_t ldy) {
  for (int t = 0; t < n_tok; ++t)
    for (int r = 0; r < kPackRows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < p.n_blocks(); ++b) {
        const uint8_t* rec = p.qs_at(g, b);
        const int8_t* q = act[t].qs + 256 * b;
        const int16_t* bs = act[t].bsums + 16 * b;
        int32_t isum = 0, corr = 0;
        for (int k = 0; k < 16; ++k) {
          const int32_t sc = int8_t(rec[kQ6KScalesOffset + (k / 4) * 64 + 4 * r + k % 4]);
          int32_t s = 0;
          for (int i = 0; i < 16; ++i) {
            const int v = 16 * k + i;  // value index in the super-block
            s += q6_at(rec, r, v / 32, (v % 32) / 4, v % 4) * q[v];
          }
          isum += sc * s;
          corr += sc * bs[k];
        }
        isum -= 32 * corr;
        uint16_t d16;
        std::memcpy(&d16, rec + kQ6KDOffset + 2 * r, 2);
        acc = std::fma(float(isum), fp16_to_f32(d16) * act[t].d[b], acc);
      }
      y[t * ldy + r] = acc;
    }
}

}  // namespace

PackedDotFn packed_dot_q6_K_scalar() { return packed_dot_q6_K_ref; }

}  // namespace polykv::cpu
