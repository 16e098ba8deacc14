// Row kernels attention runs on K/V rows stored in a KvType (kv/kv_type.h), one table per type and
// ISA. kv_row_kernels(t) picks the table of the active ISA (core/isa.h) at each call;
// kv_row_kernels_scalar(t) loops over the scalar reference ops and is what the fast tables are tested
// against.
//
// Rules: qp is a query prepared by kv_type_ops(t).prepare_query; rows are kv_head_bytes(t, hd) bytes;
// every function works in the type's basis (rotated for turbo).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/isa.h"
#include "kv/kv_type.h"

namespace polykv {

struct KvRowKernels {
  // ≈ q·k of one K row and one prepared query.
  float (*dot)(const uint8_t* k, const uint8_t* qp, int hd);
  // out[r] ≈ q_r·k for r < n prepared queries q_r = qp + r * q_stride bytes (one K row, several queries).
  void (*dot_n)(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd);
  // acc[i] += a * v[i], acc: [hd].
  void (*axpy)(float a, const uint8_t* v, float* acc, int hd);
  // x: [hd] <- the row decoded to f32 in the type's basis.
  void (*decode)(const uint8_t* src, float* x, int hd);
  // True when the prepared query is plain f32 ([hd] floats), so a row read by several queries
  // (GQA group, prefill tile) may be decoded once and dotted with dot_f32.
  bool f32_query = false;
  float (*dot_f32)(const float* x, const float* q, int hd);
  void (*axpy_f32)(float a, const float* x, float* acc, int hd);
  // out[r] = x·q_r for r < n, q_r = q + r * q_stride floats (one decoded row, several queries).
  void (*dot_f32_n)(const float* x, const float* q, size_t q_stride, int n, float* out, int hd);
  // acc_r[i] += a[r] * x[i] for r < n, acc_r = acc + r * acc_stride floats.
  void (*axpy_f32_n)(const float* a, const float* x, float* acc, size_t acc_stride, int n, int hd);
};

// s[i] <- exp(s[i] - m) for i < n (s[i] = -inf gives 0); returns the sum. m is finite.
using ExpSumFn = float (*)(float* s, int n, float m);
ExpSumFn exp_sum_kernel();        // the active ISA's
float exp_sum_scalar(float* s, int n, float m);
ExpSumFn exp_sum_avx2();          // nullptr if this CPU lacks AVX2/FMA

const KvRowKernels& kv_row_kernels(KvType t);         // the active ISA's (core/isa.h)
const KvRowKernels& kv_row_kernels_for(Isa isa, KvType t);  // the widest at or below isa
const KvRowKernels& kv_row_kernels_scalar(KvType t);  // reference loops
const KvRowKernels* kv_row_kernels_avx2(KvType t);    // nullptr if this CPU lacks AVX2/FMA/F16C
const KvRowKernels* kv_row_kernels_avx512(KvType t);  // nullptr if this CPU lacks the AVX-512 set
#if defined(__aarch64__)
const KvRowKernels* kv_row_kernels_neon(KvType t);  // ARM64 NEON (kv_row_ops_neon.cpp), every type
ExpSumFn exp_sum_neon();
#endif
const char* kv_row_isa();  // ISA of the active row kernels: "avx512", "avx2", "neon" or "scalar"

}  // namespace polykv
