#include "kv/kv_type_turbo.h"

#include <cstring>


#include "quant/turbo.h"

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


}  // namespace polykv
