// Internal to the CPU matmul: the per-ISA dot-product kernels and the quantized activation rows they
// read. matmul.cpp owns threading and dispatch; the kernels compute one weight row · one activation
// row. Not a public interface (tests include it to force an ISA).
//
// Activation formats (chosen by the weight type, see act_format()):
//   F32    f32/f16/bf16 weights read the f32 activations directly.
//   Q8_32  legacy quant weights: per 32 values, d (f32) and qs (int8, |q| <= 127) with x ≈ d * q,
//          plus sum = Σ qs (int32) for the zero-point / min terms.
//   Q8_K   k-quant weights: per 256 values, d (f32) and qs (int8, |q| <= 127), plus bsums = Σ qs per
//          16 values (int16).
// Every ISA reads the same quantized activations (made once per matmul by the scalar code in
// act_quant.cpp), so scalar and SIMD kernels agree up to float rounding.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstdint>

#include "core/dtype.h"
#include "core/isa.h"

namespace polykv::cpu {

using ::polykv::Isa;  // the one ISA decision: core/isa.h
using ::polykv::isa_name;

enum class ActFormat { F32, Q8_32, Q8_K };
ActFormat act_format(DType weight_type);  // throws Error for a type matmul does not support

// One token's activations in its ActFormat. Pointers not used by the format are null.
struct ActRow {
  const float* f32 = nullptr;      // [n_in]                    (F32)
  const int8_t* qs = nullptr;      // [n_in]                    (Q8_32, Q8_K)
  const float* d = nullptr;        // [n_in / 32] or [n_in/256] (Q8_32, Q8_K)
  const int32_t* sum = nullptr;    // [n_in / 32]               (Q8_32)
  const int16_t* bsums = nullptr;  // [n_in / 16]               (Q8_K)
  // [n_in / 32] (Q8_32, optional): zp[b] = -packed_zero_point(type) * sum[b], the start of block b's
  // integer sum in the AVX-512 packed kernels (q4_0, q8_0, mxfp4), precomputed once per matmul so
  // that a kernel starts each (block, token) sum with a broadcast load rather than a multiply and a
  // register broadcast (an ALU uop per token and block, issue #10). Null: the kernel uses sum.
  const int32_t* zp = nullptr;
  // [n_in / 256][4] (Q8_K, optional; the AVX-512 packed q4_K kernel): per super-block the sums of
  // 32 values bs_j = bsums[2j] + bsums[2j+1] as int16 pairs (bs0, bs2), (bs1, bs3), (bs4, bs6),
  // (bs5, bs7) (low half first), so that the mins term takes 4 vpdpwssd per token, not 8.
  const int32_t* bsp = nullptr;
  // [ternary_perm_bytes(type, n_in)] (Q8_K, optional): the activations in the byte order of the VBMI
  // TQ1_0 / PTQ1_0 kernels (ternary_kernels.h), when ternary_wants_perm() says so.
  const int8_t* tperm = nullptr;
};

// The packed AVX-512 kernels' software prefetch distance in bytes (packed_kernels_avx512.cpp says
// why): POLYKV_PACKED_PF=<bytes> when set (0: no prefetch, for A/B runs), else `dflt`. Read once per
// caller (a function-local static there).
inline ptrdiff_t packed_prefetch_env(ptrdiff_t dflt) {
  const char* e = std::getenv("POLYKV_PACKED_PF");
  return e ? ptrdiff_t(std::atoll(e)) : dflt;
}

// The zero point a packed kernel removes from its unsigned quants (q4_0: u = q + 8; q8_0: u = q + 128;
// mxfp4: u = value + 12, packed_weights.h), or 0 for types whose packed kernels take no zp.
constexpr int32_t packed_zero_point(DType t) {
  return t == DType::Q4_0 ? 8 : t == DType::Q8_0 ? 128 : t == DType::MXFP4 ? 12 : 0;
}

// Σ_i W[i] * x[i] over one weight row of n_in values (a whole number of the type's blocks).
using VecDotFn = float (*)(const void* w_row, const ActRow& act, int64_t n_in);

// The kernels' interface: one weight row against n_tok tokens at once, out[t] = Σ_i W[i] * act[t][i]
// for 1 <= n_tok <= kMaxTokensPerCall. A multi-token kernel unpacks each weight block once and uses
// it for every token (what makes small-batch decode, e.g. speculative verification, cheap).
// Batch invariance (issue #8): out[t] is bit-identical whatever n_tok is and wherever token t sits
// among them: each token's sum runs in one order fixed by the kernel alone (the engine relies on
// it: a sequence's logits must not depend on the sequences batched with it).
constexpr int kMaxTokensPerCall = 8;
// Widest call matmul() makes to the row kernels of `isa`: 8 on AVX-512 (32 vector registers: a verify
// step of k <= 8 tokens unpacks each weight block once), 4 elsewhere (AVX2's 16 registers would spill
// the accumulators of more tokens; a row is then read twice from L1, once from memory).
inline int row_call_tokens(Isa isa) { return isa == Isa::Avx512 ? 8 : 4; }
using RowDotFn = void (*)(const void* w_row, const ActRow* act, int n_tok, int64_t n_in, float* out);

// Adapts a single-token kernel to RowDotFn (each token in turn; the row stays hot in L1).
template <VecDotFn kDot>
void each_token(const void* w_row, const ActRow* act, int n_tok, int64_t n_in, float* out) {
  for (int t = 0; t < n_tok; ++t) out[t] = kDot(w_row, act[t], n_in);
}

// Adapts a multi-token kernel K (a struct with `template <int NT> static void run(w_row, act, n_in,
// out)`, NT tokens at a time) to RowDotFn.
template <typename K>
void by_tokens(const void* w_row, const ActRow* act, int n_tok, int64_t n_in, float* out) {
  switch (n_tok) {
    case 1: K::template run<1>(w_row, act, n_in, out); break;
    case 2: K::template run<2>(w_row, act, n_in, out); break;
    case 3: K::template run<3>(w_row, act, n_in, out); break;
    case 4: K::template run<4>(w_row, act, n_in, out); break;
    case 5: K::template run<5>(w_row, act, n_in, out); break;
    case 6: K::template run<6>(w_row, act, n_in, out); break;
    case 7: K::template run<7>(w_row, act, n_in, out); break;
    default: K::template run<8>(w_row, act, n_in, out); break;
  }
}
static_assert(kMaxTokensPerCall == 8, "by_tokens handles 1..8 tokens");

// Register-blocked kernel for float weights: `rows` consecutive rows (row_stride bytes apart) against
// n_tok tokens, 1 <= n_tok <= max_tokens:
//   y[t * ldy + r] = Σ_i W[r][i] * act[t][i]   for r < rows, t < n_tok.
// Each weight vector is converted once for all tokens and each activation vector loaded once for all
// rows. Every shape, and the same ISA's row kernel, computes each (row, token) dot in the same order
// (float_kernels_x86.h), so the shape may depend on n_tokens without changing any result; the
// n_out % rows tail rows go through the row kernel. Its scalar reference is the scalar row kernel
// (same sums, other order).
using TileDotFn = void (*)(const void* w, size_t row_stride, const ActRow* act, int n_tok, int64_t n_in,
                           float* y, int64_t ldy);
struct TileKernel {
  TileDotFn fn = nullptr;  // nullptr for types without one
  int rows = 0;
  int max_tokens = 0;
};
// The ISA's tile for a one-token call (decode: many rows, so that their FMA chains overlap) or for
// more tokens (prefill: weight and activation vectors reused across a rows × tokens block).
TileKernel tile_kernel_avx2(DType type, bool one_token);
TileKernel tile_kernel_avx512(DType type, bool one_token);

// Kernel of each ISA for a weight type, or nullptr where that ISA has none (the caller then falls
// back to a narrower ISA). The AVX2/AVX-512 tables may only be called when the CPU supports them.
RowDotFn row_dot_scalar(DType type);
RowDotFn row_dot_avx2(DType type);
RowDotFn row_dot_avx512(DType type);
#if defined(__aarch64__)
RowDotFn row_dot_neon(DType type);        // SDOT kernels where the CPU has them (matmul_kernels_neon.cpp)
RowDotFn row_dot_neon_plain(DType type);  // the ARMv8-A integer kernels on any CPU (tests)
#endif

// Activation quantization (scalar, shared by every ISA). n is a multiple of 32 (resp. 256).
void quantize_act_q8_32(const float* x, int64_t n, int8_t* qs, float* d, int32_t* sum);
void quantize_act_q8_K(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums);
// The same, bit for bit, with AVX-512 (only call on a CPU with the AVX-512 set).
void quantize_act_q8_32_avx512(const float* x, int64_t n, int8_t* qs, float* d, int32_t* sum);
void quantize_act_q8_K_avx512(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums);
// The same, bit for bit, with AVX2 (only call on a CPU with AVX2).
void quantize_act_q8_32_avx2(const float* x, int64_t n, int8_t* qs, float* d, int32_t* sum);
void quantize_act_q8_K_avx2(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums);

// Tokens per pass over the weights in matmul() for weights of `weight_type` and rows of n_in values:
// the activations of one token tile stay in L2 while the weight rows stream by.
int64_t token_tile(DType weight_type, int64_t n_in);

// ISA selection (core/isa.h decides; these names stay for the kernel tests and benchmarks):
// detected_isa() is the widest the CPU supports; matmul() uses active_isa(), which is detected_isa()
// unless POLYKV_ISA or a test forced another one (set_isa_override; must be supported).
using ::polykv::active_isa;
using ::polykv::detected_isa;
inline void set_isa_override(Isa isa) { force_isa(isa); }
inline void clear_isa_override() { clear_forced_isa(); }

}  // namespace polykv::cpu
