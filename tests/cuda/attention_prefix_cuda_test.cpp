// The prefix pass of polykv::cuda::attention (shared prefixes read once for a group's queries, then
// merged with each sequence's own keys) on the GPU, with each prefix kernel (attention_cuda_plan.h
// PrefixKernel: f32 tiled, 64-row tensor-core, 128-row "wide" tensor-core, the 256-row kernel with split and
// with scaled products), against the CPU's
// attention_ref (attention_cuda_cases.h: per-row bound 1e-4, poisoned outputs). 2, 5, 16 and 64
// sequences (8 to 256 rows per KV head: the small f32 shape, the 64-row shape, the wide one) share
// prefixes of awkward lengths (1000 keys in blocks of 8, 4097 in blocks of 17) and add private
// suffixes; the main KV type pairs. Plus DISABLED_PrefixPassBench: agents on one 32768-key context,
// the call's time with each prefix kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
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

using attn_test::Case;
namespace attn = cuda::attn;

using cuda_test::DevBuf;

cuda::CudaContext& context() {
  static cuda::CudaContext ctx(0);
  return ctx;
}

struct PrefixScope {
  attn::PrefixKernel saved = attn::prefix_kernel();
  explicit PrefixScope(attn::PrefixKernel k) { attn::prefix_kernel() = k; }
  ~PrefixScope() { attn::prefix_kernel() = saved; }
};
struct Products256Scope {
  attn::Prefix256Products saved = attn::prefix256_products();
  explicit Products256Scope(attn::Prefix256Products p) { attn::prefix256_products() = p; }
  ~Products256Scope() { attn::prefix256_products() = saved; }
};
// A prefix kernel and, for the 256-row one, its products (attention_cuda_plan.h Prefix256Products).
struct PrefixVariant {
  attn::PrefixKernel kernel;
  attn::Prefix256Products products;
};
constexpr PrefixVariant kPrefixKernels[] = {{attn::PrefixKernel::F32, attn::Prefix256Products::Scaled},
                                            {attn::PrefixKernel::Mma, attn::Prefix256Products::Scaled},
                                            {attn::PrefixKernel::Wide, attn::Prefix256Products::Scaled},
                                            {attn::PrefixKernel::Wide256, attn::Prefix256Products::Split},
                                            {attn::PrefixKernel::Wide256, attn::Prefix256Products::Scaled}};
const char* prefix_kernel_name(PrefixVariant v) {
  return v.kernel == attn::PrefixKernel::F32    ? "f32 tiled"
         : v.kernel == attn::PrefixKernel::Mma  ? "mma 64 rows"
         : v.kernel == attn::PrefixKernel::Wide ? "wide mma 128 rows"
         : v.products == attn::Prefix256Products::Split ? "mma 256 rows (256 threads), split products"
                                                        : "mma 256 rows (256 threads), scaled products";
}

// Builds the case, uploads it, runs the CUDA attention with each prefix kernel and checks each
// against attention_ref; one failure per kernel, naming it, the prefix plan and the worst row.
void expect_ok(const Case& c) {
  const auto f = attn_test::build(c);
  const KvBlockStore& store = *f->store;
  const size_t pool_bytes = store.block_bytes() * size_t(f->pool_blocks);
  DevBuf<uint8_t> pool(pool_bytes);
  pool.upload(store.data(), pool_bytes);
  DevBuf<float> dq(f->q.size()), dout(f->out_floats());
  dq.upload(f->q.data(), f->q.size());
  const size_t n_seq = f->pos0.size(), n_prefix = f->prefix_seq0.size();
  DevBuf<int32_t> dflat(f->flat.size()), dstart(n_seq), dpos0(n_seq), dnq(n_seq), drow0(n_seq);
  dflat.upload(f->flat.data(), f->flat.size());
  dstart.upload(f->table_start.data(), n_seq);
  dpos0.upload(f->pos0.data(), n_seq);
  dnq.upload(f->n_q.data(), n_seq);
  drow0.upload(f->row0.data(), n_seq);
  DevBuf<int32_t> dps0(n_prefix), dpn(n_prefix), dpb(n_prefix);
  dps0.upload(f->prefix_seq0.data(), n_prefix);
  dpn.upload(f->prefix_n_seq.data(), n_prefix);
  dpb.upload(f->prefix_blocks.data(), n_prefix);

  cuda::KvLayerDevice L = f->L;
  L.layer_base = pool.p + size_t(attn_test::kLayer) * store.layer_bytes();
  cuda::AttentionBatchDevice b = f->b;
  b.tables = dflat.p, b.table_start = dstart.p, b.pos0 = dpos0.p, b.n_q = dnq.p, b.row0 = drow0.p;
  b.prefix_seq0 = dps0.p, b.prefix_n_seq = dpn.p, b.prefix_blocks = dpb.p;
  std::vector<float> got(f->out_floats());
  attn_test::poison(got.data(), got.size());
  const std::vector<float> poisoned = got;
  for (PrefixVariant k : kPrefixKernels) {
    const PrefixScope scope(k.kernel);
    const Products256Scope products(k.products);
    const attn::Plan Pp = attn::plan_prefix(L, f->p, b, context().sm_count());
    dout.upload(poisoned.data(), poisoned.size());
    cuda::attention(L, f->p, b, dq.p, dout.p, context());
    POLYKV_CUDA_CHECK(cudaStreamSynchronize(context().stream()));
    dout.download(got.data(), got.size());
    const attn_test::Result r = attn_test::check_outputs(*f, got);
    EXPECT_LE(r.worst, attn_test::kBound)
        << attn_test::describe(c) << "\n  prefix kernel " << prefix_kernel_name(k) << ": prefix plan rows " << Pp.rows
        << (Pp.mma ? " (mma)" : " (f32)") << " splits " << Pp.n_splits << " chunk " << Pp.chunk << " query tiles "
        << Pp.qtiles << "\n  worst row: " << r.where;
  }
}

// n sequences sharing the first `blocks` blocks of sequence 0, n_q queries each, private suffixes
// of different lengths (0 to 40 keys); head_dim 128, 2 KV heads, GQA 4.
Case prefix_case(KvType kt, KvType vt, int block_tokens, int blocks, int n, int n_q, uint32_t seed) {
  Case c;
  c.kt = kt, c.vt = vt, c.head_dim = 128, c.n_head_kv = 2, c.group = 4, c.block_tokens = block_tokens, c.seed = seed;
  const int prefix = blocks * block_tokens;
  c.seqs.push_back({prefix + 17, n_q});
  for (int i = 1; i < n; ++i) c.seqs.push_back({prefix + (7 * i) % 41, n_q, 0, blocks});
  c.prefix = {{0, n, blocks}};
  return c;
}

TEST(CudaAttentionPrefix, ManySequencesSharingAPrefix) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 1200;
  for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Turbo3T}, std::pair{KvType::F16, KvType::F16},
                               std::pair{KvType::Q8_0, KvType::Q8_0}})
    for (const auto& [bt, blocks] : {std::pair{8, 125}, std::pair{17, 241}})  // 1000 and 4097 shared keys
      for (int n : {2, 5, 16, 40, 64}) expect_ok(prefix_case(kt, vt, bt, blocks, n, 1, seed++));
}

// Multi-token steps of many sequences (16 x 4 tokens x GQA 4 = 256 rows; 70 x 4 = 1120 rows: 5 query
// tiles of the 256-row kernel), windows and softcap, turbo K (queries rotated by the prologue in parts).
TEST(CudaAttentionPrefix, MultiTokenWindowsTurboK) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 1300;
  expect_ok(prefix_case(KvType::Q8_0, KvType::Turbo3T, 17, 241, 16, 4, seed++));
  expect_ok(prefix_case(KvType::Turbo3T, KvType::F16, 8, 125, 70, 4, seed++));
  Case c = prefix_case(KvType::Turbo3T, KvType::Turbo3T, 8, 125, 33, 1, seed++);
  expect_ok(c);
  c.window = 300, c.softcap = 30.0f, c.seed = seed++;
  expect_ok(c);
}

// Agents on one shared context of 32768 keys (Llama-3.1-8B's attention: head_dim 128, 8 KV heads,
// 32 query heads), one decode token each plus a private block: the whole call (per-sequence pass,
// prefix pass, merge) with each prefix kernel, µs per layer (interleaved rounds, median), the prefix
// pass's products as TFLOP/s (4 x agents x 32 heads x 32768 x 128 flops) and the shared KV's GB/s of
// the whole call's time (the per-sequence pass and the merge, ~60 us on the H200, are included).
TEST(CudaAttentionPrefix, DISABLED_PrefixPassBench) {
  POLYKV_REQUIRE_GPU();
  constexpr int kHd = 128, kHeadKv = 8, kHeads = 32, kBt = 64, kShared = 32768 / kBt, kDistinct = 4096;
  // Per row: the whole call's us per layer with each prefix kernel (f32 tiled, mma64, wide128 = the
  // 128-row kernel, w256 = the 256-row kernel), w256's spread over the rounds, the prefix products
  // (4 x agents x 32 heads x 32768 keys x 128) as TFLOP/s of the whole call with wide128 and w256,
  // the shared KV bytes / w256's time, and the speedups wide128 / w256 and mma64 / w256.
  // (w256 is the default: scaled products where both types allow them; split: POLYKV_CUDA_PREFIX256=split.)
  std::printf("%-16s %6s %10s %10s %10s %10s %9s %9s %9s %9s %9s %9s %10s %9s %9s\n", "K/V", "agents", "f32 us",
              "mma64 us", "wide128us", "w256 us", "spread", "TF wide", "TF w256", "KV GB/s", "w128/w256", "m64/w256",
              "split us", "spl spread", "w256/split");
  for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Turbo3T}, std::pair{KvType::F16, KvType::F16},
                               std::pair{KvType::Q8_0, KvType::Q8_0}, std::pair{KvType::Q8_0, KvType::Turbo3},
                               std::pair{KvType::Turbo3T, KvType::Turbo3T}})
    for (int agents : {16, 64}) {
      // The pool: kShared + agents blocks whose rows repeat kDistinct encoded rows.
      const size_t kb = kv_head_bytes(kt, kHd), vb = kv_head_bytes(vt, kHd);
      const size_t rows_per_block = size_t(kHeadKv) * kBt, k_part = rows_per_block * kb,
                   layer = k_part + rows_per_block * vb;
      const int n_blocks = kShared + agents;
      std::vector<uint8_t> kr(kDistinct * kb), vr(kDistinct * vb);
      const auto x = test::random_floats(size_t(kDistinct) * kHd, 5);
      for (int i = 0; i < kDistinct; ++i) {
        kv_type_ops(kt).quantize_head(x.data() + size_t(i) * kHd, kr.data() + i * kb, kHd);
        kv_type_ops(vt).quantize_head(x.data() + size_t((i * 7) % kDistinct) * kHd, vr.data() + i * vb, kHd);
      }
      std::vector<uint8_t> host(layer * size_t(n_blocks));
      for (size_t r = 0; r < size_t(n_blocks) * rows_per_block; ++r) {
        const size_t blk = r / rows_per_block, in = r % rows_per_block;
        std::memcpy(&host[blk * layer + in * kb], &kr[(r % kDistinct) * kb], kb);
        std::memcpy(&host[blk * layer + k_part + in * vb], &vr[(r % kDistinct) * vb], vb);
      }
      DevBuf<uint8_t> pool(host.size());
      pool.upload(host.data(), host.size());
      const cuda::KvLayerDevice L{kt, vt, kBt, kHeadKv, kHd, kHd, kb, vb, pool.p, layer, k_part};

      std::vector<int32_t> tables, start, pos0, nq, row0;
      for (int a = 0; a < agents; ++a) {
        start.push_back(int32_t(tables.size()));
        for (int i = 0; i < kShared; ++i) tables.push_back(i);
        tables.push_back(kShared + a);
        pos0.push_back(kShared * kBt + 10 + a % 50);
        nq.push_back(1);
        row0.push_back(a);
      }
      const int32_t g_seq0 = 0, g_n = agents, g_blocks = kShared;
      DevBuf<int32_t> dt(tables.size()), ds(start.size()), dp(pos0.size()), dn(nq.size()), dr(row0.size()), d0(1),
          dgn(1), dgb(1);
      dt.upload(tables.data(), tables.size());
      ds.upload(start.data(), start.size());
      dp.upload(pos0.data(), pos0.size());
      dn.upload(nq.data(), nq.size());
      dr.upload(row0.data(), row0.size());
      d0.upload(&g_seq0, 1);
      dgn.upload(&g_n, 1);
      dgb.upload(&g_blocks, 1);
      const auto q = test::random_floats(size_t(agents) * kHeads * kHd, 9);
      DevBuf<float> dq(q.size()), dout(q.size());
      dq.upload(q.data(), q.size());
      cuda::AttentionBatchDevice b{agents, dt.p, ds.p, dp.p, dn.p, dr.p, agents, 1, (kShared + 1) * kBt};
      b.n_prefix = 1, b.prefix_seq0 = d0.p, b.prefix_n_seq = dgn.p, b.prefix_blocks = dgb.p;
      b.max_prefix_q = agents, b.max_prefix_kv = kShared * kBt;
      AttentionParams p;
      p.n_head = kHeads;
      p.scale = 1.0f / std::sqrt(float(kHd));

      // Interleaved: 3 rounds of (every kernel: median of 20 calls); per kernel the median round.
      // Variants: f32 tiled, mma64, wide128, w256 (scaled products), w256 with split products.
      constexpr int kKernels = 5, kRounds = 3;
      constexpr int kOrder[kKernels] = {0, 1, 2, 4, 3};  // kPrefixKernels index of column i
      double sec[kKernels][kRounds];
      cudaEvent_t e0, e1;
      POLYKV_CUDA_CHECK(cudaEventCreate(&e0));
      POLYKV_CUDA_CHECK(cudaEventCreate(&e1));
      for (int round = 0; round < kRounds; ++round)
        for (int i = 0; i < kKernels; ++i) {
          const PrefixScope scope(kPrefixKernels[kOrder[i]].kernel);
          const Products256Scope products(kPrefixKernels[kOrder[i]].products);
          for (int w = 0; w < 3; ++w) cuda::attention(L, p, b, dq.p, dout.p, context());
          std::vector<float> ms;
          for (int r = 0; r < 20; ++r) {
            POLYKV_CUDA_CHECK(cudaEventRecord(e0, context().stream()));
            cuda::attention(L, p, b, dq.p, dout.p, context());
            POLYKV_CUDA_CHECK(cudaEventRecord(e1, context().stream()));
            POLYKV_CUDA_CHECK(cudaEventSynchronize(e1));
            float t = 0;
            POLYKV_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
            ms.push_back(t);
          }
          std::sort(ms.begin(), ms.end());
          sec[i][round] = ms[ms.size() / 2] * 1e-3;
        }
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      double med[kKernels], spread[kKernels], raw[kKernels][kRounds];
      std::memcpy(raw, sec, sizeof raw);
      for (int i = 0; i < kKernels; ++i) {
        std::sort(sec[i], sec[i] + kRounds);
        med[i] = sec[i][kRounds / 2];
        spread[i] = (sec[i][kRounds - 1] - sec[i][0]) / med[i];
      }
      const double flops = 4.0 * agents * kHeads * double(kShared * kBt) * kHd;
      const double kv_bytes = double(kShared * kBt) * kHeadKv * double(kb + vb);  // the shared keys, read once
      const std::string name = std::string(kv_type_name(kt)) + "/" + kv_type_name(vt);
      // w256 / split per round (interleaved: the two ran back to back), median and range.
      double ratio[kRounds];
      for (int round = 0; round < kRounds; ++round) ratio[round] = raw[3][round] / raw[4][round];
      std::sort(ratio, ratio + kRounds);
      std::printf("%-16s %6d %10.1f %10.1f %10.1f %10.1f %8.1f%% %9.2f %9.2f %9.1f %9.2f %9.2f %10.1f %8.1f%% %5.3f (%5.3f-%5.3f)\n",
                  name.c_str(), agents, med[0] * 1e6, med[1] * 1e6, med[2] * 1e6, med[3] * 1e6, spread[3] * 100,
                  flops / med[2] / 1e12, flops / med[3] / 1e12, kv_bytes / med[3] / 1e9, med[2] / med[3],
                  med[1] / med[3], med[4] * 1e6, spread[4] * 100, ratio[kRounds / 2], ratio[0], ratio[kRounds - 1]);
    }
}

}  // namespace
}  // namespace polykv
