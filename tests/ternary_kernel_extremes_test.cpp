// Ternary kernels at their integer extremes (backend/cpu/ternary_kernels_x86.h): the VNNI kernels for
// TQ1_0 with 1..2 tokens multiply base-3 *states* (bytes up to 255) rather than codes (0..3), relying on
// 3 * q = 256 * digit0(q) + (3q mod 256) for every byte, so a byte product or an int16 pair saturating,
// or an int32 lane overflowing, would show here first: all-0xFF / all-0xF2 / alternating bytes against
// activations at +-127 after quantization, every ISA, 1..8 tokens, against matmul_ref.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_kernels.h"
#include "core/fp16.h"
#include "core/isa.h"
#include "core/thread_pool.h"
#include "quant/quant.h"
#include "quant/ternary.h"

namespace polykv {
namespace {

using cpu::Isa;

// The identity the state kernels use, for every byte and digit: 3 * (b * 3^n mod 256) equals
// 256 * digit n of b plus (b * 3^(n+1) mod 256).
TEST(TernaryKernelExtremes, Base3StateIdentity) {
  for (int b = 0; b < 256; ++b) {
    int q = b;
    for (int n = 0; n < 5; ++n) {
      const int next = (3 * q) & 255;
      ASSERT_EQ(3 * q, 256 * base3_digit(uint8_t(b), n) + next) << "byte " << b << " digit " << n;
      q = next;
    }
  }
}

struct IsaGuard {
  explicit IsaGuard(Isa isa) { cpu::set_isa_override(isa); }
  ~IsaGuard() { cpu::clear_isa_override(); }
};

// n_out rows (8 bytes apart beyond their size) of `pattern(i)` bytes, every block's scale 1.0.
std::vector<uint8_t> filled_rows(DType t, int64_t n_in, int64_t n_out, size_t stride, uint8_t (*pattern)(size_t)) {
  std::vector<uint8_t> bytes(stride * size_t(n_out), 0);
  const DTypeInfo& info = dtype_info(t);
  const uint16_t one = f32_to_fp16(1.0f);
  for (int64_t o = 0; o < n_out; ++o) {
    uint8_t* row = bytes.data() + size_t(o) * stride;
    for (size_t i = 0; i < row_bytes(t, n_in); ++i) row[i] = pattern(i + size_t(o));
    for (int64_t b = 0; b < n_in / info.block_size; ++b) std::memcpy(row + size_t((b + 1) * info.type_size - 2), &one, 2);
  }
  return bytes;
}

TEST(TernaryKernelExtremes, SaturatedBytesAndActivations) {
  uint8_t (*const patterns[])(size_t) = {
      [](size_t) { return uint8_t(0xFF); }, [](size_t) { return uint8_t(0xF2); },
      [](size_t i) { return uint8_t(i % 2 ? 0xFF : 0x00); }, [](size_t i) { return uint8_t(i % 3 ? 0xAA : 0x55); }};
  float (*const acts[])(size_t) = {[](size_t) { return 1.0f; }, [](size_t) { return -1.0f; },
                                   [](size_t i) { return i % 2 ? 1.0f : -1.0f; }};
  ThreadPool pool(2);
  for (DType t : {DType::TQ1_0, DType::TQ2_0, DType::PTQ1_0}) {
    const int64_t n_in = 4096 + (t == DType::PTQ1_0 ? 128 : 256), n_out = 13;
    const size_t stride = row_bytes(t, n_in) + 8;
    for (auto* pattern : patterns) {
      const auto bytes = filled_rows(t, n_in, n_out, stride, pattern);
      const WeightMatrix w{t, bytes.data(), n_in, n_out, stride};
      // Σ |w_i| per row: the error scale (activations are exact at +-1 up to their f32 scale).
      std::vector<double> wabs(static_cast<size_t>(n_out));
      std::vector<float> row(static_cast<size_t>(n_in));
      for (int64_t o = 0; o < n_out; ++o) {
        dequantize_row_ref(t, bytes.data() + size_t(o) * stride, row.data(), n_in);
        for (float v : row) wabs[size_t(o)] += std::fabs(double(v));
      }
      for (auto* act : acts)
        for (int64_t n_tok = 1; n_tok <= 8; ++n_tok) {
          std::vector<float> x(size_t(n_in * n_tok));
          for (size_t i = 0; i < x.size(); ++i) x[i] = act(i);
          std::vector<float> ref(size_t(n_out * n_tok));
          matmul_ref(w, x.data(), ref.data(), n_tok);
          for (const Isa isa : supported_isas()) {
            IsaGuard guard{isa};
            std::vector<float> y(ref.size(), NAN);
            matmul(w, x.data(), y.data(), n_tok, pool);
            for (size_t k = 0; k < y.size(); ++k)
              ASSERT_NEAR(y[k], ref[k], 1e-5 * wabs[k % size_t(n_out)] + 1e-6)
                  << dtype_name(t) << " " << cpu::isa_name(isa) << " n_tok " << n_tok << " out " << k;
          }
        }
    }
  }
}

}  // namespace
}  // namespace polykv
