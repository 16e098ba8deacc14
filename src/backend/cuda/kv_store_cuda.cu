// kv_store (backend/cuda/kv_cuda.h): new K and V rows quantized into their pool blocks on the GPU,
// with the encoders of kv_encode.cuh (bit-identical to kv_type_ops(type).quantize_head).
//
// One launch for K and V. One warp per unit (kv_encode.cuh): units [0, units_k) are K's, then V's;
// unit u of a side is (row, head, part) = u / (n_head * parts), (u / parts) % n_head, u % parts, where
// parts is the number of turbo groups of a head (1 for the other types). Each warp has its own
// Scratch in shared memory; warps never synchronize with each other.
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_cuda.h"
#include "backend/cuda/kv_encode.cuh"
#include "core/error.h"

namespace polykv::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

// The device executor of kv_encode.cuh: the 32 lanes of a converged warp.
struct WarpExec {
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

struct Side {
  enc::SideParams p;
  const float* src;  // device [n][n_head][head_dim] f32
  uint8_t* base;     // the (layer, K or V part) bytes of block 0
};

struct StoreArgs {
  Side side[2];  // K, V
  const int32_t* slots;  // device [n]
  int n_head, block_tokens;
  size_t block_stride;
  int64_t units_k, units_total;
};

__global__ void __launch_bounds__(kWarpsPerBlock * 32) kv_store_kernel(const __grid_constant__ StoreArgs a) {
  __shared__ enc::Scratch scratch[kWarpsPerBlock];
  const int warp = int(threadIdx.x) / 32;
  const int64_t unit = int64_t(blockIdx.x) * kWarpsPerBlock + warp;
  if (unit >= a.units_total) return;  // the whole warp: units are per warp
  const bool is_v = unit >= a.units_k;
  const Side& s = a.side[is_v ? 1 : 0];
  const int64_t u = is_v ? unit - a.units_k : unit;
  const int part = int(u % s.p.units);
  const int64_t row_head = u / s.p.units;
  const int head = int(row_head % a.n_head);
  const int64_t row = row_head / a.n_head;
  const int32_t slot = a.slots[row];
  if (slot < 0) return;  // a padding row (whole warp)
  const int64_t block = slot / a.block_tokens, offset = slot % a.block_tokens;

  const float* x = s.src + (row * a.n_head + head) * s.p.head_dim + int64_t(part) * s.p.unit_values;
  uint8_t* dst = s.base + size_t(block) * a.block_stride +
                 size_t(int64_t(head) * a.block_tokens + offset) * s.p.head_bytes + size_t(part) * s.p.unit_bytes;
  WarpExec ex{int(threadIdx.x) % 32};
  enc::encode_unit(ex, scratch[warp], s.p, x, dst);
}

}  // namespace

void kv_store(const KvLayerDevice& L, const int32_t* slots, int n, const float* k, const float* v,
              cudaStream_t stream) {
  if (n <= 0) return;
  check(L.layer_base != nullptr && slots != nullptr && k != nullptr && v != nullptr, "kv_store: null pointer");
  check(L.block_tokens > 0 && L.n_head_kv > 0, "kv_store: bad layer shape");
  StoreArgs a{};
  a.side[0] = Side{enc::make_side_params(L.k_type, L.head_dim), k, L.layer_base};
  a.side[1] = Side{enc::make_side_params(L.v_type, L.head_dim_v), v, L.layer_base + L.v_offset};
  check(a.side[0].p.head_bytes == L.k_head_bytes && a.side[1].p.head_bytes == L.v_head_bytes,
        "kv_store: head bytes of the layer do not match its types (K ", L.k_head_bytes, " vs ",
        a.side[0].p.head_bytes, ", V ", L.v_head_bytes, " vs ", a.side[1].p.head_bytes, ")");
  a.slots = slots;
  a.n_head = L.n_head_kv;
  a.block_tokens = L.block_tokens;
  a.block_stride = L.block_stride;
  const int64_t rows_heads = int64_t(n) * L.n_head_kv;
  a.units_k = rows_heads * a.side[0].p.units;
  a.units_total = a.units_k + rows_heads * a.side[1].p.units;
  const int64_t blocks = (a.units_total + kWarpsPerBlock - 1) / kWarpsPerBlock;
  kv_store_kernel<<<unsigned(blocks), kWarpsPerBlock * 32, 0, stream>>>(a);
  POLYKV_CUDA_LAUNCHED();
}

}  // namespace polykv::cuda
