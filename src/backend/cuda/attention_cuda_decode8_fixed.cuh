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
// Pairs without a specialization, and head sizes other than 128, always take the generic kernel (in mode Mma head
// size 64 takes the tensor-core kernel for its pairs, decode_tc_pick).
// decode8_pick is the one place that chooses; the launcher (attention_cuda.cu) and the CPU emulation test
// both call it, so the emulation runs exactly the kernel the GPU would.
#pragma once
#include <utility>

#include "backend/cuda/attention_cuda_decode8.cuh"
#include "backend/cuda/attention_cuda_decode_tc.cuh"
#include "backend/cuda/attention_cuda_plan.h"

namespace polykv::cuda::attn {
inline namespace POLYKV_ATTN_NS {

// The specialized kernel of pair I with piece decoder DEC (kDec8Plain / kDec8Packed / kDec8Pairs); SELF 0: the lean
// kernel (no self-encoded rows; kDec8Pairs of the decode8_lean_pair pairs only).
template <int I, int DEC, int SELF = 1>
inline auto decode8_fixed_kernel() {
  constexpr Decode8Pair p = kDecode8FixedPairs[I];
  static_assert(SELF == 1 || (DEC == kDec8Pairs && decode8_lean_pair(p.k, p.v)), "no such lean kernel");
  return &decode8_kernel<128, kDecode8FixedMinBlocks, int(p.k), int(p.v), DEC, SELF>;
}

// The generic (runtime-dispatch) lanes8 kernel of head size HD and MINB blocks per multiprocessor; lean (SELF 0, no
// self-encoded rows) when the launch self-encodes nothing (decode8_lean). The self-encode code made it spill since
// a714bc7 (ptxas -v, sm_90: head size 128 at 3 blocks 64 bytes, 128 at 4 blocks 900, 64 at 4 blocks 488); the lean
// instantiations spill what the kernel spilled before it (0, 98, 0).
template <int HD, int MINB>
inline auto decode8_generic_kernel(bool lean) {
  return lean ? &decode8_kernel<HD, MINB, -1, -1, kDec8Plain, 0> : &decode8_kernel<HD, MINB>;
}

// The tensor-core decode kernel of pair I of kDecodeTcPairs at head size HD, with the pipeline decode_tc_bulk()
// picks (BULK: 1 bulk copies and mbarriers, 0 the cp.async ring; -1 that choice).
template <int I, int BULK = -1, int HD = 128>
inline auto decode_tc_kernel_of() {
  constexpr Decode8Pair p = kDecodeTcPairs[I];
  if constexpr (BULK >= 0) return &decode_tc_kernel<int(p.k), int(p.v), BULK, HD>;
  else return decode_tc_bulk() ? decode_tc_kernel_of<I, 1, HD>() : decode_tc_kernel_of<I, 0, HD>();
}
// Calls f(tensor-core kernel) when one takes (k, v) at head size HD; returns whether it did.
template <int HD, int I = 0, class F>
bool decode_tc_pick(KvType k, KvType v, F&& f) {
  if constexpr (decode_tc_head(HD) && I < kDecodeTcCount) {
    constexpr Decode8Pair p = kDecodeTcPairs[I];
    if (k == p.k && v == p.v) {
      f(decode_tc_kernel_of<I, -1, HD>());
      return true;
    }
    return decode_tc_pick<HD, I + 1>(k, v, f);
  } else {
    return false;
  }
}

// f(kernel) for every tensor-core kernel of head size HD, both pipelines (the launcher sets their shared memory
// limits).
template <int HD, class F>
void decode_tc_for_each(F&& f) {
  [&]<int... J>(std::integer_sequence<int, J...>) {
    (f(decode_tc_kernel_of<J, 0, HD>()), ...);
    (f(decode_tc_kernel_of<J, 1, HD>()), ...);
  }(std::make_integer_sequence<int, kDecodeTcCount>{});
}

// f(kernel) for every specialized lanes8 kernel (head size 128) and every tensor-core kernel of head size 128 (the
// launcher sets their shared memory limits).
template <int I = 0, class F>
void decode8_fixed_for_each(F&& f) {
  if constexpr (I == 0) decode_tc_for_each<128>(f);
  if constexpr (I < kDecode8FixedCount) {
    f(decode8_fixed_kernel<I, kDec8Plain>());
    f(decode8_fixed_kernel<I, kDec8Packed>());
    f(decode8_fixed_kernel<I, kDec8Pairs>());
    constexpr Decode8Pair p = kDecode8FixedPairs[I];
    if constexpr (decode8_lean_pair(p.k, p.v)) f(decode8_fixed_kernel<I, kDec8Pairs, 0>());
    decode8_fixed_for_each<I + 1>(f);
  }
}

// Calls f(kernel) with the lanes8 kernel to run for head size HD and the (k, v) types under `mode`:
// a specialized one when there is one, else `generic` (the caller's runtime-dispatch kernel).
// Returns whether a specialized kernel was chosen.
// Mode Mma: the tensor-core kernel when decode_tc_supports the pair, else as Pairs. lean: the launch does not
// self-encode and the mode is not Off (decode8_lean_pair): pairs / mma take the lean kernel where there is one.
template <int HD, int I = 0, class K, class F>
bool decode8_pick(KvType k, KvType v, Decode8Kernels mode, K* generic, F&& f, bool lean = false) {
  if constexpr (I == 0) {
    if (mode == Decode8Kernels::Mma && decode_tc_pick<HD>(k, v, f)) return true;
  }
  if constexpr (HD == 128 && I < kDecode8FixedCount) {
    constexpr Decode8Pair p = kDecode8FixedPairs[I];
    if (mode != Decode8Kernels::Generic && k == p.k && v == p.v) {
      if constexpr (decode8_lean_pair(p.k, p.v)) {
        if (lean && (mode == Decode8Kernels::Pairs || mode == Decode8Kernels::Mma)) {
          f(decode8_fixed_kernel<I, kDec8Pairs, 0>());
          return true;
        }
      }
      if (mode == Decode8Kernels::Pairs || mode == Decode8Kernels::Mma) f(decode8_fixed_kernel<I, kDec8Pairs>());
      else if (mode == Decode8Kernels::Packed) f(decode8_fixed_kernel<I, kDec8Packed>());
      else f(decode8_fixed_kernel<I, kDec8Plain>());
      return true;
    }
    return decode8_pick<HD, I + 1>(k, v, mode, generic, f, lean);
  } else {
    f(generic);
    return false;
  }
}

}  // namespace POLYKV_ATTN_NS
}  // namespace polykv::cuda::attn
