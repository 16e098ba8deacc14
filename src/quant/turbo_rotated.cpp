// Rotated-basis dot / axpy over coded heads: the scalar reference kernels and run-time dispatch.
#include "core/isa.h"
#include "quant/turbo.h"
#include "quant/turbo_internal.h"

namespace polykv::turbo {
namespace detail {
namespace {

float dot_scalar(int bits, const uint8_t* src, const float* q_rot, int head_dim) {
  const Layout l = layout(bits, head_dim);
  const float* lv = level_table(bits, l.group);
  float total = 0;
  for (int g = 0; g < l.n_groups; ++g) {
    const uint8_t* rec = src + size_t(g) * l.group_bytes;
    const float* q = q_rot + g * l.group;
    float s = 0;
    for (int i = 0; i < l.group; ++i) s += q[i] * lv[read_index(rec + 2, bits, i)];
    total += read_norm(rec) * s;
  }
  return total;
}

void axpy_scalar(int bits, float a, const uint8_t* src, float* acc_rot, int head_dim) {
  const Layout l = layout(bits, head_dim);
  const float* lv = level_table(bits, l.group);
  for (int g = 0; g < l.n_groups; ++g) {
    const uint8_t* rec = src + size_t(g) * l.group_bytes;
    const float ar = a * read_norm(rec);
    float* acc = acc_rot + g * l.group;
    for (int i = 0; i < l.group; ++i) acc[i] += ar * lv[read_index(rec + 2, bits, i)];
  }
}

void decode_scalar(int bits, const uint8_t* src, float* y_rot, int head_dim) {
  const Layout l = layout(bits, head_dim);
  const float* lv = level_table(bits, l.group);
  for (int g = 0; g < l.n_groups; ++g) {
    const uint8_t* rec = src + size_t(g) * l.group_bytes;
    const float rn = read_norm(rec);
    for (int i = 0; i < l.group; ++i) y_rot[g * l.group + i] = rn * lv[read_index(rec + 2, bits, i)];
  }
}

}  // namespace

const Kernels& kernels_scalar() {
  static const Kernels k{dot_scalar, axpy_scalar, decode_scalar};
  return k;
}

const Kernels& kernels() {
  const Kernels* avx2 = isa_has_avx2(active_isa()) ? kernels_avx2() : nullptr;
  return avx2 ? *avx2 : kernels_scalar();
}

}  // namespace detail

float dot_rotated(int bits, const uint8_t* src, const float* q_rot, int head_dim) {
  return detail::kernels().dot(bits, src, q_rot, head_dim);
}

void axpy_rotated(int bits, float a, const uint8_t* src, float* acc_rot, int head_dim) {
  detail::kernels().axpy(bits, a, src, acc_rot, head_dim);
}

void decode_rotated(int bits, const uint8_t* src, float* y_rot, int head_dim) {
  detail::kernels().decode(bits, src, y_rot, head_dim);
}

}  // namespace polykv::turbo
