// Reference turbo quantize / dequantize of one head (layout and math in turbo.h).
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/turbo.h"
#include "quant/turbo_internal.h"

namespace polykv::turbo {

int group_size(int head_dim) {
  if (head_dim > 0 && head_dim % 128 == 0) return 128;
  check(head_dim == 64 || head_dim == 32, "turbo: head_dim must be 32, 64 or a multiple of 128, got ",
        head_dim);
  return head_dim;
}

namespace detail {
Layout layout(int bits, int head_dim) {
  check(bits >= 2 && bits <= 4, "turbo: bits must be 2, 3 or 4, got ", bits);
  const int group = group_size(head_dim);
  return Layout{bits, group, head_dim / group, 2 + size_t(group) * size_t(bits) / 8};
}
}  // namespace detail

size_t head_bytes(int bits, int head_dim) {
  const detail::Layout l = detail::layout(bits, head_dim);
  return size_t(l.n_groups) * l.group_bytes;
}

void quantize_head(int bits, const float* x, uint8_t* dst, int head_dim) {
  const detail::Layout l = detail::layout(bits, head_dim);
  const int n = l.group, n_levels = 1 << bits;
  const float* lv = detail::level_table(bits, n);
  float mid[15];  // decision boundaries: mid[k] between level k and k + 1
  for (int k = 0; k + 1 < n_levels; ++k) mid[k] = 0.5f * (lv[k] + lv[k + 1]);

  float y[128];
  for (int g = 0; g < l.n_groups; ++g) {
    uint8_t* rec = dst + size_t(g) * l.group_bytes;
    std::memset(rec, 0, l.group_bytes);
    const double r2 = detail::group_norm2(x + g * n, n);
    if (r2 == 0) continue;  // all-zero group: r' = 0, indices 0
    const double r = std::sqrt(r2);

    std::memcpy(y, x + g * n, sizeof(float) * n);
    rotate(y, n);  // y = H·S·x_g (group of n: one group)
    const float inv_r = float(1.0 / r);
    double c_sq[128];  // c_i² of the chosen levels (exact: a float squared fits a double)
    for (int i = 0; i < n; ++i) {
      const float u = y[i] * inv_r;  // coordinate of H·S·(x_g / r)
      int idx = 0;
      while (idx + 1 < n_levels && u > mid[idx]) ++idx;  // nearest level (ties go down)
      detail::write_index(rec + 2, bits, i, idx);
      c_sq[i] = double(lv[idx]) * lv[idx];
    }
    const double c2 = detail::lane_tree_sum(c_sq, n, detail::LaneOrder::Strided);
    const uint16_t h = f32_to_fp16(float(r / std::sqrt(c2)));  // r' = r / ||c||
    std::memcpy(rec, &h, 2);
  }
}

void dequantize_head(int bits, const uint8_t* src, float* x, int head_dim) {
  const detail::Layout l = detail::layout(bits, head_dim);
  const int n = l.group;
  const float* lv = detail::level_table(bits, n);
  for (int g = 0; g < l.n_groups; ++g) {
    const uint8_t* rec = src + size_t(g) * l.group_bytes;
    const float rn = detail::read_norm(rec);
    for (int i = 0; i < n; ++i) x[g * n + i] = rn * lv[detail::read_index(rec + 2, bits, i)];
    unrotate(x + g * n, n);
  }
}

}  // namespace polykv::turbo
