// The x86 kernel getters on a CPU that is not x86 (ARM64): CMake compiles this file instead of the
// *_avx2 / *_avxvnni / *_avx512 files there (their intrinsics do not exist). Every getter answers
// "no kernel", exactly as the x86 files do on an x86 CPU without the ISA, so the tables fall back
// to the scalar or NEON kernels (core/isa.h never lets an x86 ISA be active on such a CPU).
#include "backend/cpu/attention_q8.h"
#include "backend/cpu/attention_tile.h"
#include "backend/cpu/gated_delta_net.h"
#include "backend/cpu/kv_row_ops.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/mxfp4_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "backend/cpu/ternary_kernels.h"
#include "backend/cpu/ternary_lut.h"
#include "core/error.h"

namespace polykv {

ScoreTileFn score_tile_avx2() { return nullptr; }
ScoreTileFn score_tile_avx512() { return nullptr; }
Q8ScoreTileFn score_tile_q8_avx512() { return nullptr; }
AccumulateTileFn accumulate_tile_avx2() { return nullptr; }
AccumulateTileFn accumulate_tile_avx512() { return nullptr; }
SoftmaxTileFn softmax_tile_avx512() { return nullptr; }
GdnChunkedFn gdn_rule_chunked_avx2() { return nullptr; }
GdnChunkedFn gdn_rule_chunked_avx512() { return nullptr; }

ExpSumFn exp_sum_avx2() { return nullptr; }
const KvRowKernels* kv_row_kernels_avx2(KvType) { return nullptr; }
const KvRowKernels* kv_row_kernels_avx512(KvType) { return nullptr; }

namespace cpu {

TileKernel tile_kernel_avx2(DType, bool) { return {}; }
TileKernel tile_kernel_avx512(DType, bool) { return {}; }
RowDotFn row_dot_avx2(DType) { return nullptr; }
RowDotFn row_dot_avx512(DType) { return nullptr; }
RowDotFn ternary_row_dot_avx2(DType) { return nullptr; }
RowDotFn ternary_row_dot_avx512(DType) { return nullptr; }
RowDotFn ternary_row_dot_avx512vbmi(DType) { return nullptr; }
void ternary_permute_act_vbmi(DType, const int8_t*, const int16_t*, int64_t, int8_t*) {
  fail("ternary_permute_act_vbmi: not an x86 build");
}
// ternary_lut_available() is false on a CPU without AVX-512, so matmul never calls it here.
void ternary_lut_matmul_avx512vbmi(const PackedMatrix&, int64_t, int64_t, const ActRow*, int, float*, int64_t) {
  fail("ternary_lut_matmul_avx512vbmi: not an x86 build");
}
PackedDotFn packed_dot_avx512(DType) { return nullptr; }
PackedDotFn packed_dot_avx2(DType) { return nullptr; }
PackedDotFn packed_dot_avx2_maddubs(DType) { return nullptr; }
PackedDotFn packed_dot_avxvnni(DType) { return nullptr; }
RowDotFn mxfp4_row_dot_avx2(DType) { return nullptr; }
RowDotFn mxfp4_row_dot_avx512(DType) { return nullptr; }

// Only called where the AVX2 / AVX-512 set is active, which cannot happen here.
void quantize_act_q8_32_avx2(const float*, int64_t, int8_t*, float*, int32_t*) {
  fail("quantize_act_q8_32_avx2: not an x86 build");
}
void quantize_act_q8_K_avx2(const float*, int64_t, int8_t*, float*, int16_t*) {
  fail("quantize_act_q8_K_avx2: not an x86 build");
}
void quantize_act_q8_32_avx512(const float*, int64_t, int8_t*, float*, int32_t*) {
  fail("quantize_act_q8_32_avx512: not an x86 build");
}
void quantize_act_q8_K_avx512(const float*, int64_t, int8_t*, float*, int16_t*) {
  fail("quantize_act_q8_K_avx512: not an x86 build");
}

}  // namespace cpu
}  // namespace polykv
