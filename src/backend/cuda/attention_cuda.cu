// polykv::cuda::attention (kv_cuda.h): checks, the decode tables' upload, the launch shape (rows per
// block, key splits) and the launches of attention_cuda_kernels.cuh.
#include <mutex>
#include <vector>

#include "backend/cuda/attention_cuda_decode.cuh"
#include "backend/cuda/attention_cuda_kernels.cuh"
#include "backend/cuda/kv_cuda.h"
#include "core/error.h"

namespace polykv::cuda {

namespace {

using attn::Args;
using attn::kDecodeRows;
using attn::kMaxSplits;
using attn::kThreads;
using attn::kTileKeys;

// Uploads the decode tables to the current device once. The first call on a device must not be
// made while a stream is being captured into a graph (cudaMemcpyToSymbol is synchronous).
void ensure_tables(cudaStream_t stream) {
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
  if (done.size() <= size_t(dev)) done.resize(size_t(dev) + 1, false);
  done[size_t(dev)] = true;
}

// Rows per block and kernel: decode_kernel (kDecodeRows rows) when every sequence's queries fit the
// rows of its blocks (one token per step, or a few tokens of a small group); else the tiled
// attention_kernel with the small shape for small multi-token steps (a GQA group times a few tokens)
// and the large one for prefill. Query and tile shared memory stay near 32 KB per 512 head values.
constexpr int kSmallRows = 16;
constexpr int large_rows(int hd) { return hd <= 128 ? 64 : hd == 256 ? 32 : 16; }

template <int HD, int RMAX>
void launch(const Args& a, dim3 grid, cudaStream_t stream) {
  const size_t smem = attn::smem_bytes(HD, RMAX);
  auto* kernel = attn::attention_kernel<HD, RMAX>;
  POLYKV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<grid, kThreads, smem, stream>>>(a);
  POLYKV_CUDA_LAUNCHED();
  if (a.n_splits > 1) {
    attn::merge_kernel<HD><<<dim3(RMAX, grid.y, grid.z), kThreads, 0, stream>>>(a, RMAX);
    POLYKV_CUDA_LAUNCHED();
  }
}

template <int HD>
void launch_decode(const Args& a, dim3 grid, cudaStream_t stream) {
  const size_t smem = attn::DecodeShape<HD>::smem;
  auto* kernel = attn::decode_kernel<HD>;
  POLYKV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<grid, kThreads, smem, stream>>>(a);
  POLYKV_CUDA_LAUNCHED();
  if (a.n_splits > 1) {
    attn::merge_kernel<HD><<<dim3(kDecodeRows, grid.y, grid.z), kThreads, 0, stream>>>(a, kDecodeRows);
    POLYKV_CUDA_LAUNCHED();
  }
}

template <int HD>
void launch_hd(const Args& a, int rows, dim3 grid, cudaStream_t stream) {
  if (rows == kDecodeRows) return launch_decode<HD>(a, grid, stream);
  if (rows == kSmallRows) return launch<HD, kSmallRows>(a, grid, stream);
  if constexpr (large_rows(HD) != kSmallRows) return launch<HD, large_rows(HD)>(a, grid, stream);
}

}  // namespace

void attention(const KvLayerDevice& L, const AttentionParams& p, const AttentionBatchDevice& b, const float* q,
               float* out, CudaContext& ctx) {
  if (b.n_seq <= 0 || b.total_rows <= 0 || b.max_n_q <= 0) return;
  const int hd = L.head_dim;
  check(hd == 64 || hd == 128 || hd == 256 || hd == 512, "CUDA attention: head size ", hd,
        " is not supported (64, 128, 256 or 512)");
  check(L.head_dim_v == hd, "CUDA attention: V head size ", L.head_dim_v, " differs from K's ", hd);
  check(L.k_head_bytes == kv_head_bytes(L.k_type, hd) && L.v_head_bytes == kv_head_bytes(L.v_type, hd),
        "CUDA attention: row sizes do not match the KV types");
  check(L.n_head_kv > 0 && p.n_head > 0 && p.n_head % L.n_head_kv == 0, "CUDA attention: ", p.n_head,
        " query heads do not split into ", L.n_head_kv, " KV heads");
  check(L.block_tokens > 0 && b.max_kv > 0, "CUDA attention: invalid block size or key bound");
  ensure_tables(ctx.stream());

  const int group = p.n_head / L.n_head_kv;
  const int decode_tokens = std::max(1, kDecodeRows / std::min(group, kDecodeRows));
  const int rows = b.max_n_q <= decode_tokens                ? kDecodeRows
                   : group * b.max_n_q <= kSmallRows ? kSmallRows
                                                     : large_rows(hd);
  Args a{};
  a.base = L.layer_base;
  a.block_stride = L.block_stride;
  a.v_offset = L.v_offset;
  a.k_row_bytes = L.k_head_bytes;
  a.v_row_bytes = L.v_head_bytes;
  a.block_tokens = L.block_tokens;
  a.k_type = L.k_type;
  a.v_type = L.v_type;
  a.n_head = p.n_head;
  a.group = group;
  a.gj = std::min(group, rows);
  a.hparts = (group + a.gj - 1) / a.gj;
  a.qt = rows / a.gj;
  a.qtiles = (b.max_n_q + a.qt - 1) / a.qt;
  a.scale = p.scale;
  a.softcap = p.softcap;
  a.window = p.window;
  a.tables = b.tables;
  a.table_start = b.table_start;
  a.pos0 = b.pos0;
  a.n_q = b.n_q;
  a.row0 = b.row0;
  a.q = q;
  a.out = out;

  const int64_t grid_y = int64_t(L.n_head_kv) * a.hparts, grid_z = int64_t(b.n_seq) * a.qtiles;
  check(grid_y <= 65535 && grid_z <= 65535, "CUDA attention: batch too large for one launch (", grid_y, " x ",
        grid_z, " blocks)");
  // Key splits (flash-decoding): enough blocks for about four per multiprocessor, each split at least
  // four tiles; none when the work items alone fill the GPU.
  const int64_t items = grid_y * grid_z, target = 4 * int64_t(ctx.sm_count());
  a.n_splits = 1;
  a.chunk = 1 << 30;
  if (items < target && b.max_kv > 4 * kTileKeys) {
    const int64_t want = (target + items - 1) / items;
    int64_t chunk = std::max<int64_t>((b.max_kv + want - 1) / want, 4 * kTileKeys);
    chunk = std::max<int64_t>(chunk, (b.max_kv + kMaxSplits - 1) / kMaxSplits);
    chunk = (chunk + kTileKeys - 1) / kTileKeys * kTileKeys;
    const int64_t n = (b.max_kv + chunk - 1) / chunk;
    if (n > 1) {
      a.n_splits = int(n);
      a.chunk = int(chunk);
    }
  }
  if (a.n_splits > 1) {
    const size_t blocks = size_t(items) * size_t(a.n_splits);
    const size_t o_floats = blocks * size_t(rows) * size_t(hd), ml_floats = blocks * size_t(rows) * 2;
    float* part = static_cast<float*>(ctx.scratch(Scratch::AttentionPartials, (o_floats + ml_floats) * sizeof(float)));
    a.part_o = part;
    a.part_ml = part + o_floats;
  }
  const dim3 grid(unsigned(a.n_splits), unsigned(grid_y), unsigned(grid_z));
  switch (hd) {
    case 64: launch_hd<64>(a, rows, grid, ctx.stream()); break;
    case 128: launch_hd<128>(a, rows, grid, ctx.stream()); break;
    case 256: launch_hd<256>(a, rows, grid, ctx.stream()); break;
    default: launch_hd<512>(a, rows, grid, ctx.stream()); break;
  }
}

}  // namespace polykv::cuda
