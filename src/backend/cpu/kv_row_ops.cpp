#include "backend/cpu/kv_row_ops.h"

#include "core/error.h"
#include "core/fp16.h"

namespace polykv {
namespace {

float load(DType t, const uint8_t* p, int i) {
  switch (t) {
    case DType::F32: return reinterpret_cast<const float*>(p)[i];
    case DType::F16: return fp16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
    default: fail("KV row type ", dtype_name(t), " not supported by the scalar row ops");
  }
}

float dot_scalar(DType t, const uint8_t* k, const float* q, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += load(t, k, i) * q[i];
  return s;
}

void axpy_scalar(DType t, float a, const uint8_t* v, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] += a * load(t, v, i);
}

}  // namespace

const KvRowOps& kv_row_ops_scalar() {
  static const KvRowOps ops{dot_scalar, axpy_scalar};
  return ops;
}

const KvRowOps& kv_row_ops() {
  static const KvRowOps* best = [] {
    const KvRowOps* avx2 = kv_row_ops_avx2();
    return avx2 ? avx2 : &kv_row_ops_scalar();
  }();
  return *best;
}

}  // namespace polykv
