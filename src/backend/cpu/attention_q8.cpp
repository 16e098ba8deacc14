#include "core/fp_contract_off.h"  // first: the reference's multiply and fma are written out

#include "backend/cpu/attention_q8.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace polykv {
namespace {

std::atomic<bool>& q8_flag() {
  static std::atomic<bool> v{[] {
    const char* e = std::getenv("POLYKV_ATTN_Q8");
    return e == nullptr || std::string_view(e) != "0";
  }()};
  return v;
}

}  // namespace

bool attention_q8_enabled() { return q8_flag().load(std::memory_order_relaxed); }
void set_attention_q8(bool on) { q8_flag().store(on, std::memory_order_relaxed); }

const uint8_t* q8_zero_row() {
  static const uint8_t zeros[size_t(kQ8ScoreMaxHd / kQK32) * sizeof(BlockQ8_0)] = {};
  return zeros;
}

void q8_prepare_query(const float* x, uint8_t* out, int hd) {
  const int nb = hd / kQK32;
  BlockQ8_0 blocks[kQ8ScoreMaxHd / kQK32];
  quantize_row_ref(DType::Q8_0, x, blocks, hd);  // the q8_0 reference's scales and rounding
  std::memset(out, 0, q8_prepared_bytes(hd));
  for (int b = 0; b < nb; ++b) {
    const float d = fp16_to_f32(blocks[b].d);
    int32_t sum = 0;
    for (int i = 0; i < kQK32; ++i) sum += blocks[b].qs[i];
    const int32_t q128 = 128 * sum;
    std::memcpy(out + 4 * size_t(b), &d, 4);
    std::memcpy(out + 4 * size_t(nb + b), &q128, 4);
    std::memcpy(out + 8 * size_t(nb) + size_t(kQK32) * size_t(b), blocks[b].qs, kQK32);
  }
}

void score_tile_q8_scalar(const uint8_t* const* k_rows, int hd, const uint8_t* const* q_rows, int n_rows, float* S,
                          size_t s_stride) {
  const int nb = hd / kQK32;
  for (int r = 0; r < n_rows; ++r) {
    const uint8_t* q = q_rows[r];
    const int8_t* qs = reinterpret_cast<const int8_t*>(q + 8 * size_t(nb));
    for (int j = 0; j < 32; ++j) {
      float s = 0.0f;
      for (int b = 0; b < nb; ++b) {
        BlockQ8_0 kb;
        std::memcpy(&kb, k_rows[j] + size_t(b) * sizeof(BlockQ8_0), sizeof kb);
        int32_t isum = 0;
        for (int i = 0; i < kQK32; ++i) isum += int32_t(qs[b * kQK32 + i]) * int32_t(kb.qs[i]);
        float dq;
        std::memcpy(&dq, q + 4 * size_t(b), 4);
        const float w = dq * fp16_to_f32(kb.d);
        s = std::fma(float(isum), w, s);
      }
      S[size_t(r) * s_stride + size_t(j)] = s;
    }
  }
}

}  // namespace polykv
