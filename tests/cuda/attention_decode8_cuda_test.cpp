// The lanes8 decode kernels specialized per (K, V) type pair (backend/cuda/attention_cuda_decode8_fixed.cuh)
// on the GPU against the CPU's attention_ref (attention_cuda_cases.h, bound kBound = 1e-4 per row), in each
// mode of attn::decode8_kernels() (generic: the runtime-dispatch kernel; fixed: specialized, decode8s;
// packed: specialized, packed trellis decoder): every specialized pair plus one without a specialization,
// contexts of 1 to 5000 keys across splits, a window with softcap, shuffled blocks of 64 and 17 tokens. A
// failure names the mode, the case, the worst row with got / expected.
//
// Mode mma (the tensor-core kernel, attention_cuda_decode_tc.cuh) runs too, for the pairs it takes, at head sizes 128,
// 64 (TcPairsHeadSize64: at 64 the other modes run the generic kernel) and 256 (TcPairsHeadSize256: the other modes
// run the slots kernel).
//
// DISABLED_DecodeModesBench: one layer of Llama-3.1-8B's decode attention (32 query heads, 8 KV heads,
// head_dim 128, one sequence) and the same heads at head sizes 256 (pairs: the slots kernel there) and 64 (Llama-3.2-1B's;
// pairs: the generic lanes8 kernel) at 4096, 32768 and 131072 keys for
// f16/f16, q8_0/q8_0, q8_0/turbo3, q8_0/turbo3t and turbo3t/turbo3t, modes pairs, mma with the cp.async ring
// (POLYKV_CUDA_ATTN_TC_PIPE=sync) and mma with bulk copies interleaved (3 rounds, each the median of 20 calls): µs
// per layer, KV GB/s, and the bulk pipeline's time over the ring's and over pairs' (median of the rounds, min-max).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../test_util.h"
#include "attention_cuda_cases.h"
#include "backend/cuda/attention_cuda_plan.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/kv_cuda.h"
#include "cuda_test_util.h"

namespace polykv {
namespace {

namespace attn = cuda::attn;
using attn_test::Case;

template <class T>
using Buf = cuda_test::DevBuf<T>;

cuda::CudaContext& ctx() {
  static cuda::CudaContext c(0);
  return c;
}

struct ModeScope {
  attn::Decode8Kernels saved_k = attn::decode8_kernels();
  attn::DecodeVariant saved_v = attn::decode_variant();
  explicit ModeScope(attn::Decode8Kernels k) {
    attn::decode8_kernels() = k;
    attn::decode_variant() = attn::DecodeVariant::Lanes8;
  }
  ~ModeScope() {
    attn::decode8_kernels() = saved_k;
    attn::decode_variant() = saved_v;
  }
};
// The correctness tests run every mode (pairs: kv_decode_pairs.cuh; mma: the tensor-core kernel,
// attention_cuda_decode_tc.cuh, for the pairs it takes, with both tile pipelines); the bench times pairs and mma
// with each pipeline.
constexpr attn::Decode8Kernels kModes[] = {attn::Decode8Kernels::Generic, attn::Decode8Kernels::Fixed,
                                           attn::Decode8Kernels::Packed, attn::Decode8Kernels::Pairs,
                                           attn::Decode8Kernels::Mma};
const char* mode_name(attn::Decode8Kernels m) {
  return m == attn::Decode8Kernels::Generic ? "generic"
         : m == attn::Decode8Kernels::Fixed ? "fixed"
         : m == attn::Decode8Kernels::Pairs ? "pairs"
         : m == attn::Decode8Kernels::Mma   ? "mma"
                                            : "packed";
}

// Runs the case on the GPU in each mode; the worst row over the modes, named.
attn_test::Result run_modes(const Case& c) {
  const auto f = attn_test::build(c);
  const KvBlockStore& store = *f->store;
  Buf<uint8_t> pool(store.block_bytes() * size_t(f->pool_blocks));
  pool.upload(store.data(), pool.n);
  Buf<float> dq(f->q.size()), dout(f->out_floats());
  dq.upload(f->q.data(), f->q.size());
  std::vector<float> poisoned(f->out_floats()), got(f->out_floats());
  attn_test::poison(poisoned.data(), poisoned.size());
  const size_t n_seq = f->pos0.size();
  Buf<int32_t> dflat(f->flat.size()), dstart(n_seq), dpos0(n_seq), dnq(n_seq), drow0(n_seq);
  dflat.upload(f->flat.data(), f->flat.size());
  dstart.upload(f->table_start.data(), n_seq);
  dpos0.upload(f->pos0.data(), n_seq);
  dnq.upload(f->n_q.data(), n_seq);
  drow0.upload(f->row0.data(), n_seq);
  cuda::KvLayerDevice L = f->L;
  L.layer_base = pool.p + size_t(attn_test::kLayer) * store.layer_bytes();
  cuda::AttentionBatchDevice b = f->b;
  b.tables = dflat.p;
  b.table_start = dstart.p;
  b.pos0 = dpos0.p;
  b.n_q = dnq.p;
  b.row0 = drow0.p;
  attn_test::Result worst;
  for (int mi = 0; mi <= int(std::size(kModes)); ++mi) {  // the last: mma with the cp.async ring
    const attn::Decode8Kernels m = mi < int(std::size(kModes)) ? kModes[mi] : attn::Decode8Kernels::Mma;
    const ModeScope scope(m);
    const attn_test::TcPipeScope pipe(mi < int(std::size(kModes)));
    dout.upload(poisoned.data(), poisoned.size());
    cuda::attention(L, f->p, b, dq.p, dout.p, ctx());
    POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx().stream()));
    dout.download(got.data(), got.size());
    attn_test::Result r = attn_test::check_outputs(*f, got);
    if (!(r.worst <= worst.worst)) {  // NaN / inf count as worst
      worst = r;
      const char* pipe = mi < int(std::size(kModes)) ? "" : "-sync";
      worst.where = std::string("[mode ") + mode_name(m) + pipe + "] " + r.where;
    }
  }
  return worst;
}

// Every mode on each pair at head size hd, shapes 0 .. n_shapes - 1 (seeds from seed): 0 contexts of 0 to 4999 keys in
// 64-key pool blocks; 1 a window of 700 with softcap in pool blocks of window_bt keys; 2 a launch bound far above the
// batch (graph replay: lengths come from the device); 3 GQA 8 (two head parts, gpt-oss's group).
void expect_every_mode(const std::vector<std::pair<KvType, KvType>>& pairs, int hd, int n_shapes, int window_bt,
                       uint32_t seed) {
  for (const auto& [kt, vt] : pairs)
    for (int shape = 0; shape < n_shapes; ++shape) {
      Case c;
      c.kt = kt, c.vt = vt, c.head_dim = hd, c.n_head_kv = 2, c.group = 4, c.seed = seed++;
      c.block_tokens = 64;
      if (shape == 0) {
        c.seqs = {{0, 1}, {30, 1}, {999, 1}, {4999, 1}};
      } else if (shape == 1) {
        c.block_tokens = window_bt;
        c.seqs = {{3000, 1}, {255, 1}, {256, 1}};
        c.window = 700;
        c.softcap = 30.0f;
      } else if (shape == 2) {
        c.seqs = {{2047, 1}, {77, 1}};
        c.extra_kv_bound = 20000;
      } else {
        c.group = 8;
        c.seqs = {{1500, 1}};
      }
      const attn_test::Result r = run_modes(c);
      EXPECT_LE(r.worst, attn_test::kBound) << attn_test::describe(c) << "\n  worst row: " << r.where;
    }
}

TEST(CudaAttentionDecode8, FixedPairsEveryMode) {
  POLYKV_REQUIRE_GPU();
  const attn_test::TcF16Scope f16(true);  // f16/f16 on the tensor-core kernel (off by default until run on a GPU)
  std::vector<std::pair<KvType, KvType>> pairs;
  for (const attn::Decode8Pair& p : attn::kDecode8FixedPairs) pairs.push_back({p.k, p.v});
  for (const attn::Decode8Pair& p : attn::kDecodeTcPairs) pairs.push_back({p.k, p.v});
  pairs.push_back({KvType::Turbo4T, KvType::Turbo2T});  // no specialization
  expect_every_mode(pairs, 128, 3, 17, 4100);
}

// The tensor-core kernel at head size 64 (Llama 3.2, Qwen 2.5 0.5B, gpt-oss) on every pair it takes, and one it does
// not: the same shapes as above (the window in 128-key pool blocks, which the tensor-core kernel's 64-key tiles take)
// plus GQA 8.
TEST(CudaAttentionDecode8, TcPairsHeadSize64) {
  POLYKV_REQUIRE_GPU();
  const attn_test::TcF16Scope f16(true);  // f16/f16 on the tensor-core kernel (off by default until run on a GPU)
  std::vector<std::pair<KvType, KvType>> pairs;
  for (const attn::Decode8Pair& p : attn::kDecodeTcPairs) pairs.push_back({p.k, p.v});
  pairs.push_back({KvType::F16, KvType::Turbo3T});  // no tensor-core kernel: the generic lanes8 kernel
  expect_every_mode(pairs, 64, 4, 128, 6400);
}

// The tensor-core kernel at head size 256 (Gemma 2 / 3, Qwen 3.5's attention layers; turbo rows of two groups) on every
// pair it takes and one it does not (the slots kernel in every mode), the shapes above; and the device holds its 3
// blocks a multiprocessor (attn::decode_tc256_fit_pairs, set by the first call: on sm_90 every pair must).
TEST(CudaAttentionDecode8, TcPairsHeadSize256) {
  POLYKV_REQUIRE_GPU();
  const attn_test::TcF16Scope f16(true);  // f16/f16 on the tensor-core kernel (off by default until run on a GPU)
  std::vector<std::pair<KvType, KvType>> pairs;
  for (const attn::Decode8Pair& p : attn::kDecodeTcPairs) pairs.push_back({p.k, p.v});
  pairs.push_back({KvType::F16, KvType::Turbo3T});
  expect_every_mode(pairs, 256, 4, 128, 7300);
  int dev = 0, major = 0;
  POLYKV_CUDA_CHECK(cudaGetDevice(&dev));
  POLYKV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major == 9) EXPECT_EQ(attn::decode_tc256_fit_pairs(), attn::kDecodeTcAllPairs);
  // f16/f16's one-stage plans (head sizes 128 and 256) need the bulk pipeline: sm_90 and later.
  EXPECT_EQ(attn::decode_tc_bulk_device(), major >= 9);
}

// ---- benchmark ----

constexpr int kHeadKv = 8, kHeads = 32, kBt = 64;

// One layer's pool of n_blocks blocks whose rows are copies of 4096 encoded rows (encoding 131072
// trellis rows on the CPU would take minutes), shuffled block table.
struct Bench {
  std::unique_ptr<Buf<uint8_t>> pool;
  std::unique_ptr<Buf<int32_t>> table, zero, pos0, one;
  std::unique_ptr<Buf<float>> q, out;
  cuda::KvLayerDevice L{};
  cuda::AttentionBatchDevice b{};
  double bytes = 0;
  int hd = 128;
};

std::unique_ptr<Bench> make_bench(KvType kt, KvType vt, int n_kv, int hd) {
  constexpr int kDistinct = 4096;
  auto B = std::make_unique<Bench>();
  const int n_blocks = n_kv / kBt;
  const size_t kb = kv_head_bytes(kt, hd), vb = kv_head_bytes(vt, hd);
  const size_t rows_per_block = size_t(kHeadKv) * kBt, k_part = rows_per_block * kb, layer = k_part + rows_per_block * vb;
  std::vector<uint8_t> kr(kDistinct * kb), vr(kDistinct * vb);
  const auto x = test::random_floats(size_t(kDistinct) * hd, 5);
  for (int i = 0; i < kDistinct; ++i) {
    kv_type_ops(kt).quantize_head(x.data() + size_t(i) * hd, kr.data() + i * kb, hd);
    kv_type_ops(vt).quantize_head(x.data() + size_t((i * 7) % kDistinct) * hd, vr.data() + i * vb, hd);
  }
  std::vector<uint8_t> host(layer * size_t(n_blocks));
  for (size_t r = 0; r < size_t(n_blocks) * rows_per_block; ++r) {
    const size_t blk = r / rows_per_block, in = r % rows_per_block;
    std::memcpy(&host[blk * layer + in * kb], &kr[(r % kDistinct) * kb], kb);
    std::memcpy(&host[blk * layer + k_part + in * vb], &vr[(r % kDistinct) * vb], vb);
  }
  B->pool = std::make_unique<Buf<uint8_t>>(host.size());
  B->pool->upload(host.data(), host.size());
  B->L = cuda::KvLayerDevice{kt, vt, kBt, kHeadKv, hd, hd, kb, vb, B->pool->p, layer, k_part};
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(3));
  const int32_t zero = 0, pos0 = n_kv - 1, one = 1;
  B->table = std::make_unique<Buf<int32_t>>(table.size());
  B->table->upload(table.data(), table.size());
  B->zero = std::make_unique<Buf<int32_t>>(1);
  B->zero->upload(&zero, 1);
  B->pos0 = std::make_unique<Buf<int32_t>>(1);
  B->pos0->upload(&pos0, 1);
  B->one = std::make_unique<Buf<int32_t>>(1);
  B->one->upload(&one, 1);
  const auto q = test::random_floats(size_t(kHeads) * hd, 9);
  B->q = std::make_unique<Buf<float>>(q.size());
  B->q->upload(q.data(), q.size());
  B->out = std::make_unique<Buf<float>>(q.size());
  B->b = cuda::AttentionBatchDevice{1, B->table->p, B->zero->p, B->pos0->p, B->one->p, B->zero->p, 1, 1, n_kv};
  B->bytes = double(n_kv) * kHeadKv * double(kb + vb);
  B->hd = hd;
  return B;
}

// Median of 20 timed calls after 3 warm-up calls, seconds (CUDA events on the context's stream).
double median_call_seconds(const Bench& B) {
  AttentionParams p;
  p.n_head = kHeads;
  p.scale = 1.0f / std::sqrt(float(B.hd));
  cudaEvent_t e0, e1;
  POLYKV_CUDA_CHECK(cudaEventCreate(&e0));
  POLYKV_CUDA_CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) cuda::attention(B.L, p, B.b, B.q->p, B.out->p, ctx());
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    POLYKV_CUDA_CHECK(cudaEventRecord(e0, ctx().stream()));
    cuda::attention(B.L, p, B.b, B.q->p, B.out->p, ctx());
    POLYKV_CUDA_CHECK(cudaEventRecord(e1, ctx().stream()));
    POLYKV_CUDA_CHECK(cudaEventSynchronize(e1));
    float t = 0;
    POLYKV_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e-3;
}

TEST(CudaAttentionDecode8, DISABLED_DecodeModesBench) {
  POLYKV_REQUIRE_GPU();
  const attn_test::TcF16Scope f16(true);  // f16/f16 on the tensor-core kernel (off by default until run on a GPU)
  const std::pair<KvType, KvType> pairs[] = {{KvType::F16, KvType::F16},       {KvType::Q8_0, KvType::Q8_0},
                                             {KvType::Q8_0, KvType::Turbo3},   {KvType::Q8_0, KvType::Turbo3T},
                                             {KvType::Turbo3T, KvType::Turbo3T}, {KvType::Q4_0, KvType::Q4_0}};
  constexpr int kRounds = 3, kModes = 3;
  // pairs; mma with the cp.async ring (sync); mma with bulk copies and mbarriers (bulk, the default).
  constexpr attn::Decode8Kernels kTimed[kModes] = {attn::Decode8Kernels::Pairs, attn::Decode8Kernels::Mma,
                                                   attn::Decode8Kernels::Mma};
  constexpr bool kBulk[kModes] = {true, false, true};
  std::printf("decode attention, one token, one layer (32 q heads, 8 KV heads); modes interleaved, %d rounds\n",
              kRounds);
  std::printf("%-16s %3s %7s %8s | %9s %7s | %9s %7s | %9s %7s %20s %20s\n", "K/V", "hd", "keys", "KV MB", "pairs us",
              "GB/s", "mma-sync", "GB/s", "mma-bulk", "GB/s", "bulk/sync (range)", "bulk/pairs (range)");
  for (const int hd : {256, 128, 64})
    for (const auto& [kt, vt] : pairs)
      for (int n_kv : {4096, 32768, 131072}) {
        const auto B = make_bench(kt, vt, n_kv, hd);
        std::vector<double> sec[kModes];
        for (int round = 0; round < kRounds; ++round)
          for (int m = 0; m < kModes; ++m) {
            const ModeScope scope(kTimed[m]);
            const attn_test::TcPipeScope pipe(kBulk[m]);
            sec[m].push_back(median_call_seconds(*B));
          }
        double med[kModes];
        for (int m = 0; m < kModes; ++m) {
          std::vector<double> s = sec[m];
          std::sort(s.begin(), s.end());
          med[m] = s[kRounds / 2];
        }
        // Per-round ratios of mode x over mode y: median (min-max).
        const auto ratio = [&](int x, int y, double& lo, double& hi) {
          std::vector<double> r;
          for (int i = 0; i < kRounds; ++i) r.push_back(sec[x][size_t(i)] / sec[y][size_t(i)]);
          std::sort(r.begin(), r.end());
          lo = r.front(), hi = r.back();
          return r[kRounds / 2];
        };
        double l0, h0, l1, h1;
        const double bs = ratio(2, 1, l0, h0), bp = ratio(2, 0, l1, h1);
        const std::string name = std::string(kv_type_name(kt)) + "/" + kv_type_name(vt);
        std::printf("%-16s %3d %7d %8.1f | %9.1f %7.0f | %9.1f %7.0f | %9.1f %7.0f  %6.3f (%.3f-%.3f)  "
                    "%6.3f (%.3f-%.3f)\n",
                    name.c_str(), hd, n_kv, B->bytes / 1e6, med[0] * 1e6, B->bytes / med[0] / 1e9, med[1] * 1e6,
                    B->bytes / med[1] / 1e9, med[2] * 1e6, B->bytes / med[2] / 1e9, bs, l0, h0, bp, l1, h1);
        std::fflush(stdout);
      }
}

}  // namespace
}  // namespace polykv
