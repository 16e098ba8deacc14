// polykv::cuda::attention (kv_cuda.h): the decode tables' upload, the plans (attention_cuda_plan.h)
// and the launches of the kernels (attention_cuda_decode.cuh, attention_cuda_kernels.cuh): the
// per-sequence kernel, the prefix pass over shared prefixes, the merge of partials.
#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/cuda/attention_cuda_decode.cuh"
#include "backend/cuda/attention_cuda_decode8.cuh"
#include "backend/cuda/attention_cuda_decode8_fixed.cuh"
#include "backend/cuda/attention_cuda_kernels.cuh"
#include "backend/cuda/attention_cuda_mma.cuh"
#include "backend/cuda/attention_cuda_plan.h"
#include "backend/cuda/attention_cuda_prefix256.cuh"
#include "backend/cuda/attention_cuda_prefix_mma.cuh"
#include "backend/cuda/kv_cuda.h"
#include "backend/cuda/matmul_cuda.h"
#include "core/error.h"

namespace polykv::cuda {

namespace {

using attn::Args;
using attn::kThreads;

template <class Kernel>
void allow_smem(Kernel* kernel, size_t smem) {
  POLYKV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
}

// The tensor-core decode kernels of head size 256: their shared memory limit (kDecodeTc256SmemCap, over the 48 KB
// default) and the largest carveout; attn::decode_tc256_fit_pairs() says which pairs' kernels then run
// kDecodeTc256MinBlocks blocks a multiprocessor at its plans' shared memory (else the plans keep the slots kernel).
void allow_decode_tc256() {
  const size_t cap = std::max(attn::kDecodeTc256SmemCap, attn::decode8_fold_bytes(256));
  int dev = 0, optin = 0;
  POLYKV_CUDA_CHECK(cudaGetDevice(&dev));
  POLYKV_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (cap > size_t(optin)) {  // the limit could not be set
    attn::decode_tc256_fit_pairs() = 0;
    return;
  }
  uint32_t fits = attn::kDecodeTcAllPairs;
  [&]<int... J>(std::integer_sequence<int, J...>) {
    const auto one = [&](auto kernel, attn::Decode8Pair p, int j) {
      allow_smem(kernel, cap);
      POLYKV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                             int(cudaSharedmemCarveoutMaxShared)));
      int stages = 0;
      size_t smem = 0;
      if (!attn::decode_tc_stages(256, p.k, p.v, stages, smem)) return;  // its plans never take it (the bit is moot)
      int blocks = 0;
      POLYKV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, smem));
      if (blocks < attn::kDecodeTc256MinBlocks) fits &= ~(1u << j);
    };
    (one(attn::decode_tc_kernel_of<J, 0, 256>(), attn::kDecodeTcPairs[J], J), ...);
    (one(attn::decode_tc_kernel_of<J, 1, 256>(), attn::kDecodeTcPairs[J], J), ...);
  }(std::make_integer_sequence<int, attn::kDecodeTcCount>{});
  attn::decode_tc256_fit_pairs() = fits;
}

// Shared memory limits of every kernel of head size HD (over 48 KB needs the opt-in).
template <int HD>
void allow_smem_hd() {
  allow_smem(attn::decode_kernel<HD>, std::max(attn::kDecodeSmemCap, attn::decode_fold_bytes(HD)));
  if constexpr (attn::decode8_supports(HD)) {
    constexpr size_t smem = std::max(attn::kDecode8SmemCap, attn::decode8_fold_bytes(HD));
    for (bool lean : {false, true}) {
      allow_smem(attn::decode8_generic_kernel<HD, attn::decode8_min_blocks(attn::DecodeVariant::Lanes8, HD)>(lean),
                 smem);
      allow_smem(attn::decode8_generic_kernel<HD, attn::decode8_min_blocks(attn::DecodeVariant::Lanes8x4, HD)>(lean),
                 smem);
    }
    // The specialized kernels plan their splits for 4 blocks per multiprocessor (4 x ~52 KB of shared
    // memory): ask for the largest shared-memory carveout so the driver never picks one that fits 3.
    const auto four_blocks = [&](auto kernel) {
      allow_smem(kernel, smem);
      POLYKV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                             int(cudaSharedmemCarveoutMaxShared)));
    };
    if constexpr (HD == 128) attn::decode8_fixed_for_each(four_blocks);
    else attn::decode_tc_for_each<HD>(four_blocks);
  }
  if constexpr (HD == 256) allow_decode_tc256();
  if constexpr (HD >= 64)  // plan_tiled_rows gives head size 32 no small shape
    allow_smem(attn::attention_kernel<HD, attn::kSmallRows>, attn::smem_bytes(HD, attn::kSmallRows));
  constexpr int rows = attn::large_rows(HD);
  allow_smem(attn::attention_kernel<HD, rows>, attn::smem_bytes(HD, rows));
  if constexpr (attn::tiled_mma_supports(HD)) {
    bool fits = true;
    if constexpr (HD == 256) {  // ~143 KB: more than sm_86 / sm_89 give a block (plans then keep the f32 kernel)
      int dev = 0, optin = 0;
      POLYKV_CUDA_CHECK(cudaGetDevice(&dev));
      POLYKV_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
      fits = attn::mma_smem_bytes(HD) + 4 * 1024 <= size_t(optin);
      attn::tiled_mma256_fits() = fits;
    }
    if (fits) allow_smem(attn::attention_mma_kernel<HD>, attn::mma_smem_bytes(HD));
  }
  if constexpr (attn::mma_supports(HD)) {
    allow_smem(attn::attention_prefix_mma_kernel<HD>, attn::prefix_mma_smem_bytes(HD));
    // The 256-row prefix kernel where the device's opt-in limit holds it with its static arrays
    // (else plan_prefix keeps the 128-row kernel).
    int dev = 0, optin = 0;
    POLYKV_CUDA_CHECK(cudaGetDevice(&dev));
    POLYKV_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    constexpr size_t smem = attn::prefix256_smem_bytes(HD);
    attn::prefix256_fits(HD) = smem + 8 * 1024 <= size_t(optin);
    if (attn::prefix256_fits(HD)) {
      allow_smem(attn::attention_prefix256_kernel<HD, true>, smem);
      allow_smem(attn::attention_prefix256_kernel<HD, false>, smem);
    }
  }
}

// Once per device: uploads the decode tables and sets the kernels' shared memory limits. The first
// call on a device must not be made while a stream is being captured into a graph
// (cudaMemcpyToSymbol is synchronous); later calls make no such call, so they can be captured.
void init_device(cudaStream_t stream) {
  static std::mutex mu;
  static std::vector<bool> done;
  int dev = 0;
  POLYKV_CUDA_CHECK(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(mu);
  if (size_t(dev) < done.size() && done[size_t(dev)]) return;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  POLYKV_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  check(capturing == cudaStreamCaptureStatusNone,
        "CUDA attention: the first call on a device must run outside graph capture (it uploads tables)");
  const KvDecodeTables t = make_kv_decode_tables();
  POLYKV_CUDA_CHECK(cudaMemcpyToSymbol(attn::g_tables, &t, sizeof t));
  int major = 0;
  POLYKV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  attn::decode_tc_bulk_device() = major >= 9;  // before allow_decode_tc256, which plans stages
  allow_smem_hd<32>();
  allow_smem_hd<64>();
  allow_smem_hd<128>();
  allow_smem_hd<256>();
  allow_smem_hd<512>();
  if (done.size() <= size_t(dev)) done.resize(size_t(dev) + 1, false);
  done[size_t(dev)] = true;
}

// The launch of one kernel of this file, with programmatic dependent launch when `pdl` (each kernel
// waits for the previous grid first: attn::pdl_enter).
template <class... KArgs, class... As>
void launch_pdl(void (*kernel)(KArgs...), dim3 grid, size_t smem, cudaStream_t stream, bool pdl, const As&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(unsigned(kThreads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  POLYKV_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

template <class Kernel>
void launch_kernel(Kernel* kernel, const Args& a, const attn::Plan& P, size_t smem, cudaStream_t stream, bool pdl) {
  launch_pdl(kernel, dim3(unsigned(P.n_splits), unsigned(P.grid_y), unsigned(P.grid_z)), smem, stream, pdl, a);
}

// The 256-thread launch of the 256-row prefix kernel (no PDL: like the 128-row one it has no wait).
template <class Kernel>
void launch_256(Kernel* kernel, const Args& a, const attn::Plan& P, size_t smem, cudaStream_t stream) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(P.n_splits), unsigned(P.grid_y), unsigned(P.grid_z));
  cfg.blockDim = dim3(unsigned(attn::kPrefix256Threads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  POLYKV_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, a));
}

template <int HD>
void launch_main(const Args& a, const attn::Plan& P, cudaStream_t stream, bool pdl) {
  if (P.kernel == attn::Kernel::Decode) {
    if constexpr (attn::decode_tc_head(HD)) {  // the tensor-core kernel when the plan takes it (attn::Plan::tc)
      if (P.tc && attn::decode_tc_pick<HD>(a.k_type, a.v_type, [&](auto kernel) {
            launch_kernel(kernel, a, P, P.smem, stream, pdl);
          }))
        return;
    }
    if constexpr (attn::decode8_supports(HD)) {
      if (P.variant == attn::DecodeVariant::Lanes8) {  // specialized per type pair where there is one (P.tc false)
        const bool lean = attn::decode8_lean(a.self_kv);
        attn::decode8_pick<HD>(
            a.k_type, a.v_type, attn::decode_tc_mode(P.tc, attn::decode8_kernels()),
            attn::decode8_generic_kernel<HD, attn::decode8_min_blocks(attn::DecodeVariant::Lanes8, HD)>(lean),
            [&](auto kernel) { launch_kernel(kernel, a, P, P.smem, stream, pdl); }, lean);
        return;
      }
      if (P.variant == attn::DecodeVariant::Lanes8x4) {
        launch_kernel(attn::decode8_generic_kernel<HD, attn::decode8_min_blocks(attn::DecodeVariant::Lanes8x4, HD)>(
                          attn::decode8_lean(a.self_kv)),
                      a, P, P.smem, stream, pdl);
        return;
      }
    }
    launch_kernel(attn::decode_kernel<HD>, a, P, P.smem, stream, pdl);
  } else if (P.rows == attn::kPrefix256Rows) {  // plan_prefix only (head sizes 64 and 128)
    if constexpr (attn::mma_supports(HD))
      attn::prefix256_pick<HD>(a.k_type, a.v_type, [&](auto kernel) {
        launch_256(kernel, a, P, attn::prefix256_smem_bytes(HD), stream);
      });
  } else if (P.rows == attn::kPrefixRows) {  // plan_prefix only (head sizes 64 and 128); no PDL wait inside
    if constexpr (attn::mma_supports(HD))
      launch_kernel(attn::attention_prefix_mma_kernel<HD>, a, P, attn::prefix_mma_smem_bytes(HD), stream, false);
  } else if (P.rows == attn::kSmallRows) {
    if constexpr (HD >= 64)
      launch_kernel(attn::attention_kernel<HD, attn::kSmallRows>, a, P, attn::smem_bytes(HD, attn::kSmallRows), stream,
                    pdl);
  } else {
    if constexpr (attn::tiled_mma_supports(HD)) {
      if (P.mma) {
        launch_kernel(attn::attention_mma_kernel<HD>, a, P, attn::mma_smem_bytes(HD), stream, pdl);
        return;
      }
    }
    constexpr int rows = attn::large_rows(HD);
    launch_kernel(attn::attention_kernel<HD, rows>, a, P, attn::smem_bytes(HD, rows), stream, pdl);
  }
}

// The per-sequence launch (a, P), the prefix pass (ap, Pp) when there are shared prefixes, and the
// merge of the partials.
template <int HD>
void launch_hd(const Args& a, const attn::Plan& P, const Args& ap, const attn::Plan& Pp, cudaStream_t stream,
               bool pdl) {
  launch_main<HD>(a, P, stream, pdl);
  if (a.n_prefix > 0) launch_main<HD>(ap, Pp, stream, pdl);
  if (a.partial)
    launch_pdl(attn::merge_grouped() ? attn::merge_kernel<HD, true> : attn::merge_kernel<HD, false>,
               dim3(unsigned(P.rows), unsigned(P.grid_y), unsigned(P.grid_z)), 0, stream, pdl, a, P.rows, ap, Pp.rows);
}

template <int HD>
void launch_hd_plain(const Args& a, const attn::Plan& P, cudaStream_t stream, bool pdl) {
  launch_hd<HD>(a, P, a, attn::Plan{}, stream, pdl);
}

// The batch-invariant path (ctx.batch_invariant(); attn::plan_invariant): no shared-prefix pass (each
// sequence reads its prefix blocks itself), the decode kernel with fixed key splits for sequences of up
// to kInvariantDecodeQ query rows, then the tiled kernel for longer ones (prefill chunks), if any.
// The early start's self-encoded new rows (Args::self_kv) for K / V of these types under attn::attention_self_encode():
// bit 0 (K) when the decode kernel can encode K and V is one it cannot (or the mode is All), bit 1 (V) when it can
// encode V too and the mode is All.
int self_kv_bits(const KvLayerDevice& L, const float* new_k, const float* new_v) {
  const attn::SelfEncode mode = attn::attention_self_encode();
  if (new_k == nullptr || new_v == nullptr || mode == attn::SelfEncode::Off || !attn::self_encodable(L.k_type))
    return 0;
  if (mode == attn::SelfEncode::All) return 1 | (attn::self_encodable(L.v_type) ? 2 : 0);
  return attn::self_encodable(L.v_type) ? 0 : 1;
}

void attention_invariant(const KvLayerDevice& L, const AttentionParams& p, const AttentionBatchDevice& b_in,
                         const float* q, float* out, CudaContext& ctx, bool after_store, bool pdl,
                         const float* new_k, const float* new_v) {
  AttentionBatchDevice b = b_in;
  b.n_prefix = 0;
  attn::Plan P[2];
  const int n_plans = attn::plan_invariant(L, p, b, ctx.sm_count(), P[0], P[1]);
  size_t floats[2] = {0, 0}, total = 0;
  for (int i = 0; i < n_plans; ++i) total += floats[i] = P[i].partial_o_floats + P[i].partial_ml_floats;
  float* part = total > 0 ? static_cast<float*>(ctx.scratch(Scratch::AttentionPartials, total * sizeof(float))) : nullptr;
  for (int i = 0; i < n_plans; ++i) {
    Args a = attn::make_args(L, p, b, P[i], q, out, floats[i] > 0 ? part + (i == 0 ? 0 : floats[0]) : nullptr);
    // The early start waits for the store before it reads new keys: only the timing changes.
    a.early = i == 0 && n_plans == 1 && after_store && pdl && attn::attention_early() && b.n_seq == 1 &&
              P[i].variant != attn::DecodeVariant::Slots ? 1 : 0;
    if (a.early) {
      a.self_kv = self_kv_bits(L, new_k, new_v);
      a.new_k = new_k;
      a.new_v = new_v;
    }
    switch (L.head_dim) {
      case 32: launch_hd_plain<32>(a, P[i], ctx.stream(), pdl); break;
      case 64: launch_hd_plain<64>(a, P[i], ctx.stream(), pdl); break;
      case 128: launch_hd_plain<128>(a, P[i], ctx.stream(), pdl); break;
      case 256: launch_hd_plain<256>(a, P[i], ctx.stream(), pdl); break;
      default: launch_hd_plain<512>(a, P[i], ctx.stream(), pdl); break;
    }
  }
}

}  // namespace

void attention(const KvLayerDevice& L, const AttentionParams& p, const AttentionBatchDevice& b, const float* q,
               float* out, CudaContext& ctx, bool after_store, const float* new_k, const float* new_v) {
  if (b.n_seq <= 0 || b.total_rows <= 0 || b.max_n_q <= 0) return;
  init_device(ctx.stream());  // first: it sets which prefix kernels the device's shared memory allows
  const bool pdl = attn::attention_pdl() && pdl_enabled(ctx);
  if (ctx.batch_invariant()) {
    attention_invariant(L, p, b, q, out, ctx, after_store, pdl, new_k, new_v);
    return;
  }
  attn::Plan P = attn::plan_attention(L, p, b, ctx.sm_count());
  // Early start (attn::attention_early()): one sequence, no shared prefix, the lanes8 kernel, launched
  // with PDL right after this layer's kv_store. Its splits leave room for the store's blocks (4 warps
  // each, one per K or V unit of a row and head), which run beside the attention's one wave.
  const bool early = after_store && pdl && attn::attention_early() && b.n_seq == 1 && b.n_prefix == 0 &&
                     P.kernel == attn::Kernel::Decode && P.variant != attn::DecodeVariant::Slots;
  if (early) {
    const int store_units = 2 * b.total_rows * L.n_head_kv * std::max(1, L.head_dim / turbo_group_of(L.head_dim));
    P = attn::plan_attention(L, p, b, ctx.sm_count(), (store_units + 3) / 4 + 1);
  }
  const attn::Plan Pp = b.n_prefix > 0 ? attn::plan_prefix(L, p, b, ctx.sm_count()) : attn::Plan{};
  const size_t own = P.partial_o_floats + P.partial_ml_floats, pre = Pp.partial_o_floats + Pp.partial_ml_floats;
  float* part = own + pre > 0 ? static_cast<float*>(ctx.scratch(Scratch::AttentionPartials, (own + pre) * sizeof(float)))
                              : nullptr;
  Args a = attn::make_args(L, p, b, P, q, out, part);
  a.early = early ? 1 : 0;
  if (early) {
    a.self_kv = self_kv_bits(L, new_k, new_v);
    a.new_k = new_k;
    a.new_v = new_v;
  }
  const Args ap = b.n_prefix > 0 ? attn::make_args(L, p, b, Pp, q, out, part + own, true) : a;
  switch (L.head_dim) {
    case 32: launch_hd<32>(a, P, ap, Pp, ctx.stream(), pdl); break;
    case 64: launch_hd<64>(a, P, ap, Pp, ctx.stream(), pdl); break;
    case 128: launch_hd<128>(a, P, ap, Pp, ctx.stream(), pdl); break;
    case 256: launch_hd<256>(a, P, ap, Pp, ctx.stream(), pdl); break;
    default: launch_hd<512>(a, P, ap, Pp, ctx.stream(), pdl); break;
  }
}

}  // namespace polykv::cuda
