// The lanes8 decode kernel (attention_cuda_decode8.cuh) specialized for the common (K, V) type pairs at head
// size 128 (Llama-3.1-8B and most models' head size; docs/CUDA_ATTENTION.md "Specialized kernels"): the
// types are compile-time constants, so the kernel holds one K and one V decoder instead of all eleven of
// each behind a per-tile switch (fewer registers: more blocks per multiprocessor), its row strides are
// constants, and trellis rows take the packed decoder (kv_decode_trellis.cuh, bit-identical to decode8s).
//
// Which kernel runs: decode8_kernels() (attention_cuda_plan.h, with the list of pairs), from POLYKV_CUDA_ATTN_D8 = generic | fixed | packed | pairs (unset or
// other: pairs): generic = the runtime-dispatch kernel as before (the old path, for A/B runs); fixed = the
// specialized kernels with decode8s; packed = the specialized kernels with the packed trellis decoder; pairs =
// the specialized kernels with the turbo / trellis pair tables (kv_decode_pairs.cuh).
// Pairs without a specialization, and head sizes other than 128, always take the generic kernel.
// decode8_pick is the one place that chooses; the launcher (attention_cuda.cu) and the CPU emulation test
// both call it, so the emulation runs exactly the kernel the GPU would.
#pragma once
#include "backend/cuda/attention_cuda_decode8.cuh"
#include "backend/cuda/attention_cuda_plan.h"

namespace polykv::cuda::attn {
inline namespace POLYKV_ATTN_NS {

// The specialized kernel of pair I with piece decoder DEC (kDec8Plain / kDec8Packed / kDec8Pairs).
template <int I, int DEC>
inline auto decode8_fixed_kernel() {
  constexpr Decode8Pair p = kDecode8FixedPairs[I];
  return &decode8_kernel<128, kDecode8FixedMinBlocks, int(p.k), int(p.v), DEC>;
}

// f(kernel) for every specialized kernel (the launcher sets their shared memory limits).
template <int I = 0, class F>
void decode8_fixed_for_each(F&& f) {
  if constexpr (I < kDecode8FixedCount) {
    f(decode8_fixed_kernel<I, kDec8Plain>());
    f(decode8_fixed_kernel<I, kDec8Packed>());
    f(decode8_fixed_kernel<I, kDec8Pairs>());
    decode8_fixed_for_each<I + 1>(f);
  }
}

// Calls f(kernel) with the lanes8 kernel to run for head size HD and the (k, v) types under `mode`:
// a specialized one when there is one, else `generic` (the caller's runtime-dispatch kernel).
// Returns whether a specialized kernel was chosen.
template <int HD, int I = 0, class K, class F>
bool decode8_pick(KvType k, KvType v, Decode8Kernels mode, K* generic, F&& f) {
  if constexpr (HD == 128 && I < kDecode8FixedCount) {
    constexpr Decode8Pair p = kDecode8FixedPairs[I];
    if (mode != Decode8Kernels::Generic && k == p.k && v == p.v) {
      if (mode == Decode8Kernels::Pairs) f(decode8_fixed_kernel<I, kDec8Pairs>());
      else if (mode == Decode8Kernels::Packed) f(decode8_fixed_kernel<I, kDec8Packed>());
      else f(decode8_fixed_kernel<I, kDec8Plain>());
      return true;
    }
    return decode8_pick<HD, I + 1>(k, v, mode, generic, f);
  } else {
    f(generic);
    return false;
  }
}

}  // namespace POLYKV_ATTN_NS
}  // namespace polykv::cuda::attn
