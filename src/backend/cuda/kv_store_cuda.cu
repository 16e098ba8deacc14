// kv_store (backend/cuda/kv_cuda.h): new K and V rows quantized into their pool blocks on the GPU,
// with the encoders of kv_encode.cuh (bit-identical to kv_type_ops(type).quantize_head).
//
// One launch for K and V; one warp per unit (a (row, head), or a turbo group of one), numbered and
// addressed by kv_encode.cuh's StoreArgs / locate_unit. Each warp has its own Scratch in shared
// memory; warps never synchronize with each other. No host synchronization: graph-capturable.
// Cost (H200, decode row, 8 KV heads, in the step's graph, 2026-12-02): q8_0/turbo3t 11.2 us, q8_0/turbo3
// 5.8 us with the register forms of kv_encode.cuh (the array forms before them: 13.9 / 9.35); a turbo group is one warp's
// latency-bound chain (the trellis Viterbi ~43% of its instructions). Prefill is throughput-bound: tests/cuda's
// PrefillSpeed prints ns per row (turbo3t 62.5, turbo3 19.1 at 4096 rows).
// Build flags: the encoders need IEEE float behaviour (kv_encode_scalar.cuh); this file must not be
// compiled with --use_fast_math or -ftz=true (subnormal inputs would be flushed: the GPU test's
// subnormal rows catch that).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_cuda.h"
#include "backend/cuda/kv_encode.cuh"
#include "backend/cuda/matmul_cuda_launch.cuh"
#include "core/error.h"

namespace polykv::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

// The device executor of kv_encode.cuh: the 32 lanes of a converged warp.
struct WarpExec {
  static constexpr bool kWarpShuffles = true;  // kv_encode.cuh's viterbi keeps its costs in registers
  int lane;
  template <class F>
  __device__ void each(F&& f) {
    f(lane);
    __syncwarp();
  }
  template <class F>
  __device__ void one(F&& f) {
    if (lane == 0) f();
    __syncwarp();
  }
};

__global__ void __launch_bounds__(kWarpsPerBlock * 32) kv_store_kernel(const __grid_constant__ enc::StoreArgs a) {
  __shared__ enc::Scratch scratch[kWarpsPerBlock];
  const int warp = int(threadIdx.x) / 32;
  const int64_t unit = int64_t(blockIdx.x) * kWarpsPerBlock + warp;
  // The unit's slot and addresses first: the slots come from the step's upload, which precedes every
  // kernel of the step, so reading them needs no wait and their latency overlaps the kernel before.
  int side = 0;
  const float* x = nullptr;
  uint8_t* dst = nullptr;
  const bool mine = unit < a.units_total && enc::locate_unit(a, unit, side, x, dst);
  // Launched with PDL: the kernel before writes k and v. Every thread waits before it exits, so this
  // grid never completes before the one before it (the kernels after rely on that order).
  wait_for_previous_grid();
  allow_next_grid();
  if (!mine) return;  // past the units, or a padding row (the whole warp: one unit per warp)
  WarpExec ex{int(threadIdx.x) % 32};
  enc::encode_unit(ex, scratch[warp], a.side[side].p, x, dst);
}

// A decode step's store is a few latency-bound warps (one per turbo group). Since the attention kernel after it
// starts early (PDL) and fills the GPU, its blocks shared the store's multiprocessors and took most of their issue
// slots: at 32768 keys the q8_0/turbo3t store ran 25 us against 11 at depth 0 (H200 timelines, 2026-12-02, call
// M8). Small launches (at most one block per multiprocessor) therefore ask for all the shared memory a block may
// have, so no other block shares their multiprocessors. The bytes are the same. POLYKV_CUDA_KV_STORE_ALONE=0: off.
struct AloneConfig {
  size_t smem = 0;  // dynamic shared memory that fills a multiprocessor (0: off or not possible)
  int sm_count = 0;
};

const AloneConfig& alone_config() {
  static const AloneConfig c = [] {
    AloneConfig a;
    const char* e = std::getenv("POLYKV_CUDA_KV_STORE_ALONE");
    if (e && std::strcmp(e, "0") == 0) return a;
    int dev = 0, optin = 0, sms = 0;
    cudaFuncAttributes fa{};
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaFuncGetAttributes(&fa, kv_store_kernel) != cudaSuccess || size_t(optin) <= fa.sharedSizeBytes) {
      cudaGetLastError();
      return a;
    }
    const size_t dyn = size_t(optin) - fa.sharedSizeBytes;
    if (cudaFuncSetAttribute(kv_store_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dyn)) != cudaSuccess) {
      cudaGetLastError();
      return a;
    }
    a.smem = dyn;
    a.sm_count = sms;
    return a;
  }();
  return c;
}

}  // namespace

void kv_store(const KvLayerDevice& L, const int32_t* slots, int n, const float* k, const float* v,
              cudaStream_t stream, bool pdl) {
  if (n <= 0) return;
  check(L.layer_base != nullptr && slots != nullptr && k != nullptr && v != nullptr, "kv_store: null pointer");
  const enc::StoreArgs a =
      enc::make_store_args(L.k_type, L.head_dim, L.v_type, L.head_dim_v, L.n_head_kv, L.block_tokens, L.layer_base,
                           L.block_stride, L.v_offset, slots, n, k, v);
  check(a.side[0].p.head_bytes == L.k_head_bytes && a.side[1].p.head_bytes == L.v_head_bytes,
        "kv_store: head bytes of the layer do not match its types (K ", L.k_head_bytes, " vs ",
        a.side[0].p.head_bytes, ", V ", L.v_head_bytes, " vs ", a.side[1].p.head_bytes, ")");
  const int64_t blocks = (a.units_total + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const AloneConfig& alone = alone_config();
  const size_t smem = alone.smem > 0 && blocks <= alone.sm_count ? alone.smem : 0;
  launch_kernel(kv_store_kernel, dim3(unsigned(blocks)), dim3(kWarpsPerBlock * 32), smem, stream, pdl, a);
}

}  // namespace polykv::cuda
