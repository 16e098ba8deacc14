// Row kernels attention runs on K/V rows stored in a KvType (kv/kv_type.h), one table per type and
// ISA. kv_row_kernels(t) picks the best table for this CPU once; kv_row_kernels_scalar(t) loops over
// the scalar reference ops and is what the fast tables are tested against.
//
// Rules: qp is a query prepared by kv_type_ops(t).prepare_query; rows are kv_head_bytes(t, hd) bytes;
// every function works in the type's basis (rotated for turbo).
#pragma once
#include <cstdint>

#include "kv/kv_type.h"

namespace polykv {

struct KvRowKernels {
  // ≈ q·k of one K row and one prepared query.
  float (*dot)(const uint8_t* k, const uint8_t* qp, int hd);
  // acc[i] += a * v[i], acc: [hd].
  void (*axpy)(float a, const uint8_t* v, float* acc, int hd);
  // x: [hd] <- the row decoded to f32 in the type's basis.
  void (*decode)(const uint8_t* src, float* x, int hd);
  // True when the prepared query is plain f32 ([hd] floats), so a row read by several queries
  // (GQA group, prefill tile) may be decoded once and dotted with dot_f32.
  bool f32_query = false;
  float (*dot_f32)(const float* x, const float* q, int hd);
  void (*axpy_f32)(float a, const float* x, float* acc, int hd);
};

const KvRowKernels& kv_row_kernels(KvType t);         // best for this CPU
const KvRowKernels& kv_row_kernels_scalar(KvType t);  // reference loops
const KvRowKernels* kv_row_kernels_avx2(KvType t);    // nullptr if this CPU lacks AVX2/FMA/F16C
const KvRowKernels* kv_row_kernels_avx512(KvType t);  // nullptr if this CPU lacks the AVX-512 set
const char* kv_row_isa();                             // "avx512", "avx2" or "scalar"

}  // namespace polykv
