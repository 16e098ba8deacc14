// Row primitives attention uses on K/V rows stored in the cache's types. Each ISA file provides a
// table; kv_row_ops() picks the best one for this CPU once.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace polykv {

struct KvRowOps {
  // sum_i q[i] * k[i] over n values of a row of `type`.
  float (*dot)(DType type, const uint8_t* k, const float* q, int n);
  // out[i] += a * v[i] over n values of a row of `type`.
  void (*axpy)(DType type, float a, const uint8_t* v, float* out, int n);
};

const KvRowOps& kv_row_ops();
const KvRowOps& kv_row_ops_scalar();
const KvRowOps* kv_row_ops_avx2();  // nullptr if this CPU lacks AVX2/FMA/F16C

}  // namespace polykv
