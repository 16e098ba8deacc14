#include "kv/kv_type_turbo.h"

#include <cstring>


#include "quant/turbo.h"
#include "quant/turbo_trellis.h"

namespace polykv {

namespace {

// The prepared query is q rotated per group (f32): q·k = (H·S·q)·(H·S·k) as H·S is orthogonal.
size_t query_bytes(int hd) { return size_t(hd) * sizeof(float); }
void prepare(const float* q, uint8_t* qp, int hd) {
  float* r = reinterpret_cast<float*>(qp);
  std::memcpy(r, q, size_t(hd) * sizeof(float));
  turbo::rotate(r, hd);
}
void finish(float* acc, int hd) { turbo::unrotate(acc, hd); }

template <int B>
void quantize(const float* x, uint8_t* dst, int hd) { turbo::quantize_head(B, x, dst, hd); }
template <int B>
void dequantize(const uint8_t* src, float* x, int hd) { turbo::dequantize_head(B, src, x, hd); }
template <int B>
float dot(const uint8_t* k, const uint8_t* qp, int hd) {
  return turbo::dot_rotated(B, k, reinterpret_cast<const float*>(qp), hd);
}
template <int B>
void axpy(float a, const uint8_t* v, float* acc, int hd) { turbo::axpy_rotated(B, a, v, acc, hd); }

template <int B>
constexpr KvTypeOps ops{query_bytes, quantize<B>, dequantize<B>, prepare, dot<B>, axpy<B>, finish};

// turbo<B>t: same rotated basis; rows are decoded (rotated) one group at a time, then dotted / accumulated.
template <int B>
float trellis_dot(const uint8_t* k, const uint8_t* qp, int hd) {
  const int n = turbo::group_size(hd);
  const size_t gb = turbo::trellis::head_bytes(B, n);
  const float* q = reinterpret_cast<const float*>(qp);
  float y[128], s = 0;
  for (int g = 0; g < hd / n; ++g) {
    turbo::trellis::decode_rotated(B, k + size_t(g) * gb, y, n);
    for (int i = 0; i < n; ++i) s += q[g * n + i] * y[i];
  }
  return s;
}
template <int B>
void trellis_axpy(float a, const uint8_t* v, float* acc, int hd) {
  const int n = turbo::group_size(hd);
  const size_t gb = turbo::trellis::head_bytes(B, n);
  float y[128];
  for (int g = 0; g < hd / n; ++g) {
    turbo::trellis::decode_rotated(B, v + size_t(g) * gb, y, n);
    for (int i = 0; i < n; ++i) acc[g * n + i] += a * y[i];
  }
}
template <int B>
void trellis_quantize(const float* x, uint8_t* dst, int hd) { turbo::trellis::quantize_head_fast(B, x, dst, hd); }
template <int B>
void trellis_dequantize(const uint8_t* src, float* x, int hd) { turbo::trellis::dequantize_head(B, src, x, hd); }
template <int B>
constexpr KvTypeOps trellis_ops{query_bytes,     trellis_quantize<B>, trellis_dequantize<B>, prepare,
                                trellis_dot<B>, trellis_axpy<B>,     finish};

}  // namespace

const KvTypeOps* turbo_kv_ops(int bits) {
  switch (bits) {
    case 2: return &ops<2>;
    case 3: return &ops<3>;
    case 4: return &ops<4>;
    default: return nullptr;
  }
}

size_t turbo_kv_head_bytes(int bits, int hd) { return turbo::head_bytes(bits, hd); }

const KvTypeOps* turbo_trellis_kv_ops(int bits) {
  switch (bits) {
    case 2: return &trellis_ops<2>;
    case 3: return &trellis_ops<3>;
    case 4: return &trellis_ops<4>;
    default: return nullptr;
  }
}
size_t turbo_trellis_kv_head_bytes(int bits, int hd) { return turbo::trellis::head_bytes(bits, hd); }


}  // namespace polykv
