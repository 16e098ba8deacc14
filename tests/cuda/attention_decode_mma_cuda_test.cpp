// The tensor-core decode kernel (backend/cuda/attention_cuda_decode_mma.cuh) on the GPU against the
// CPU's attention_ref (attention_cuda_cases.h, bound kBound = 1e-4 relative L2 per output row), forced
// on for every length (decode_mma_min_keys 0): every K type with V turbo3t / f16 / q8_0 and every V
// type with q8_0 K; head sizes 64, 128, 256; GQA 1, 4, 8; contexts of 1, 37, 1000 and 70000 keys;
// verify steps of up to 8 tokens, windows, softcap, sinks, pool blocks of 17 / 40 / 64 tokens, loose
// host bounds; bit-identity of a sequence alone, batched, and of a verify step's token against the
// same token decoded alone. A failure names the case, the plan and the worst row (got / expected).
//
// DISABLED_Bench: one layer of Llama-3.1-8B's decode attention (32 query heads, 8 KV heads, head_dim
// 128, one sequence) at 8192 / 32768 / 131072 keys for f16/f16, q8_0/q8_0, q8_0/turbo3t,
// turbo3t/turbo3t and q8_0/turbo3: lanes8 (the default kernel) vs mma, interleaved, µs per layer; then
// the mma kernel's chunk and ring sizes at 131072 keys for q8_0/turbo3t.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
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
struct Buf {
  T* p = nullptr;
  size_t n = 0;
  explicit Buf(size_t count) : n(count) { POLYKV_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T))); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  ~Buf() { cudaFree(p); }
  void upload(const T* src, size_t count) {
    POLYKV_CUDA_CHECK(cudaMemcpy(p, src, count * sizeof(T), cudaMemcpyHostToDevice));
  }
  void download(T* dst, size_t count) const {
    POLYKV_CUDA_CHECK(cudaMemcpy(dst, p, count * sizeof(T), cudaMemcpyDeviceToHost));
  }
};

cuda::CudaContext& ctx() {
  static cuda::CudaContext c(0);
  return c;
}

// The mma kernel for every decode length (chunk: keys per split), or off (lanes8 / slots as before).
// tr: the transposed layout (attn::decode_mma_transposed; head sizes 64 and 128).
struct MmaScope {
  int saved_min = attn::decode_mma_min_keys(), saved_chunk = attn::decode_mma_chunk();
  size_t saved_ring = attn::decode_mma_ring_bytes();
  bool saved_tr = attn::decode_mma_transposed();
  MmaScope(bool on, int chunk = 1024, size_t ring = 24 * 1024, bool tr = false) {
    attn::decode_mma_min_keys() = on ? 0 : 0x7fffffff;
    attn::decode_mma_chunk() = chunk;
    attn::decode_mma_ring_bytes() = ring;
    attn::decode_mma_transposed() = tr;
  }
  ~MmaScope() {
    attn::decode_mma_min_keys() = saved_min;
    attn::decode_mma_chunk() = saved_chunk;
    attn::decode_mma_ring_bytes() = saved_ring;
    attn::decode_mma_transposed() = saved_tr;
  }
};

std::string plan_text(const attn::Plan& P) {
  return std::string(P.kernel == attn::Kernel::DecodeMma ? (P.decode_tr ? "decode mma (transposed)" : "decode mma") : P.kernel == attn::Kernel::Decode ? "decode" : "tiled") +
         " rows " + std::to_string(P.rows) + " splits " + std::to_string(P.n_splits) + " chunk " +
         std::to_string(P.chunk) + " stages " + std::to_string(P.stages) + " smem " + std::to_string(P.smem) +
         " head parts " + std::to_string(P.hparts) + " query tiles " + std::to_string(P.qtiles);
}

// A fixture in device memory; run() takes host copies of the batch arrays (so a test can describe a
// sub-batch or a shifted step over the same pool and queries).
struct Device {
  const attn_test::Fixture& f;
  Buf<uint8_t> pool;
  Buf<float> q, out;
  explicit Device(const attn_test::Fixture& fx)
      : f(fx), pool(fx.store->block_bytes() * size_t(fx.pool_blocks)), q(fx.q.size()), out(fx.out_floats()) {
    pool.upload(f.store->data(), pool.n);
    q.upload(f.q.data(), f.q.size());
  }
  // Outputs (poisoned first) of the batch b whose arrays are the host vectors given.
  std::vector<float> run(cuda::AttentionBatchDevice b, const std::vector<int32_t>& flat, const std::vector<int32_t>& start,
                         const std::vector<int32_t>& pos0, const std::vector<int32_t>& n_q,
                         const std::vector<int32_t>& row0, attn::Plan* plan = nullptr) {
    std::vector<float> got(f.out_floats());
    attn_test::poison(got.data(), got.size());
    out.upload(got.data(), got.size());
    const size_t n = size_t(b.n_seq);
    Buf<int32_t> dflat(flat.size()), dstart(n), dpos0(n), dnq(n), drow0(n);
    dflat.upload(flat.data(), flat.size());
    dstart.upload(start.data(), n);
    dpos0.upload(pos0.data(), n);
    dnq.upload(n_q.data(), n);
    drow0.upload(row0.data(), n);
    const size_t np = f.prefix_seq0.size();
    Buf<int32_t> ps0(np), pns(np), pbl(np);
    if (np > 0) {
      ps0.upload(f.prefix_seq0.data(), np);
      pns.upload(f.prefix_n_seq.data(), np);
      pbl.upload(f.prefix_blocks.data(), np);
    }
    cuda::KvLayerDevice L = f.L;
    L.layer_base = pool.p + size_t(attn_test::kLayer) * f.store->layer_bytes();
    b.tables = dflat.p, b.table_start = dstart.p, b.pos0 = dpos0.p, b.n_q = dnq.p, b.row0 = drow0.p;
    b.prefix_seq0 = ps0.p, b.prefix_n_seq = pns.p, b.prefix_blocks = pbl.p;
    AttentionParams p = f.p;
    Buf<float> dsinks(f.sinks.size());
    if (!f.sinks.empty()) {
      dsinks.upload(f.sinks.data(), f.sinks.size());
      p.sinks = dsinks.p;
    }
    if (plan) *plan = attn::plan_attention(L, p, b, ctx().sm_count());
    cuda::attention(L, p, b, q.p, out.p, ctx());
    POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx().stream()));
    out.download(got.data(), got.size());
    return got;
  }
  std::vector<float> run_all(attn::Plan* plan = nullptr) {
    return run(f.b, f.flat, f.table_start, f.pos0, f.n_q, f.row0, plan);
  }
};

// Runs the case with the mma kernel forced on (chunk keys per split), both layouts (the transposed one
// at head sizes 64 and 128); checks plan and bound.
void expect_mma_ok(const Case& c, int chunk = 1024) {
  const auto f = attn_test::build(c);
  Device d(*f);
  for (bool tr : {false, true}) {
    const MmaScope scope(true, chunk, 24 * 1024, tr);
    attn::Plan P;
    const std::vector<float> got = d.run_all(&P);
    const attn_test::Result r = attn_test::check_outputs(*f, got);
    const std::string what = attn_test::describe(c) + "\n  plan: " + plan_text(P);
    EXPECT_EQ(P.kernel, attn::Kernel::DecodeMma) << what;
    EXPECT_EQ(P.decode_tr, tr && c.head_dim <= 128) << what;
    EXPECT_LE(r.worst, attn_test::kBound) << what << "\n  worst row: " << r.where;
  }
}

TEST(CudaAttentionDecodeMma, EveryKTypeWithTheMainVTypes) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 9000;
  for (KvType kt : kAllKvTypes)
    for (KvType vt : {KvType::Turbo3T, KvType::F16, KvType::Q8_0}) {
      Case c;
      c.kt = kt, c.vt = vt, c.head_dim = 128, c.n_head_kv = 2, c.group = 4, c.block_tokens = 64, c.seed = seed++;
      c.seqs = {{0, 1}, {36, 1}, {999, 1}};  // 1, 37 and 1000 keys
      expect_mma_ok(c, 256);
    }
}

TEST(CudaAttentionDecodeMma, EveryVTypeWithQ8K) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 9100;
  for (KvType vt : kAllKvTypes)
    for (int hd : {64, 256}) {
      Case c;
      c.kt = KvType::Q8_0, c.vt = vt, c.head_dim = hd, c.n_head_kv = hd == 64 ? 1 : 3, c.group = hd == 64 ? 8 : 1;
      c.block_tokens = 40, c.seed = seed++;
      c.seqs = {{0, 1}, {36, 1}, {999, 1}};
      expect_mma_ok(c, 256);
    }
}

TEST(CudaAttentionDecodeMma, HeadSizesGqaAndLongContexts) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 9200;
  for (int hd : {64, 128, 256})
    for (int group : {1, 4, 8}) {
      Case c;
      c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = hd, c.n_head_kv = group == 1 ? 4 : 2, c.group = group;
      c.block_tokens = 64, c.seed = seed++;
      c.seqs = {{0, 1}, {36, 1}, {999, 1}, {4100, 1}};
      expect_mma_ok(c);
    }
  // ~70000 keys (69 splits of the default 1024-key chunk), one KV head; the trellis type (slow to
  // encode on the CPU) at 12000.
  const std::pair<KvType, KvType> pairs[] = {{KvType::Q8_0, KvType::Turbo3}, {KvType::F16, KvType::F16},
                                             {KvType::Q8_0, KvType::Q8_0}, {KvType::Q8_0, KvType::Turbo3T}};
  for (const auto& [kt, vt] : pairs) {
    Case c;
    c.kt = kt, c.vt = vt, c.head_dim = 128, c.n_head_kv = 1, c.group = 4, c.block_tokens = 64, c.seed = seed++;
    c.seqs = {{vt == KvType::Turbo3T ? 11999 : 69999, 1}};
    expect_mma_ok(c);
  }
}

TEST(CudaAttentionDecodeMma, VerifyStepsWindowsSinksSoftcap) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 9300;
  for (int hd : {64, 128}) {
    Case c;
    c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = hd, c.n_head_kv = 2, c.group = 4, c.block_tokens = 64;
    c.seed = seed++;
    c.seqs = {{3000, 8}, {255, 1}, {0, 3}, {1234, 5}};  // verify steps: 8 tokens x 4 heads = 2 query tiles
    expect_mma_ok(c);
    c.window = 700, c.softcap = 30.0f, c.seed = seed++;
    expect_mma_ok(c);
    c.window = 128, c.softcap = 0.0f, c.sinks = true, c.group = 8, c.block_tokens = 17, c.seed = seed++;
    expect_mma_ok(c);
    c.seqs = {{100, 1}, {50, 2}}, c.seed = seed++;  // one split: the kernel writes the rows (sinks there)
    expect_mma_ok(c, 4096);
    c.window = 0, c.block_tokens = 64, c.extra_kv_bound = 20000, c.seed = seed++;  // a graph's loose bound
    c.seqs = {{2047, 1}, {77, 1}};
    expect_mma_ok(c);
  }
  Case c;  // shared prefixes: the per-sequence pass of the mma kernel merged with the prefix pass
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = 128, c.n_head_kv = 2, c.group = 4, c.block_tokens = 64;
  c.seed = seed++;
  c.seqs = {{2300, 1}, {2100, 1, 0, 30}, {1920, 1, 0, 30}, {400, 1}};
  c.prefix = {{0, 3, 30}};
  expect_mma_ok(c);
}

// Bits: sequence 0 (a 5-token verify step at depth ~3000) alone and batched with others (different
// lengths, host bounds), and its last token decoded alone, give the same output bits (fixed split
// points; tiles at multiples of 32 keys; rows computed independently). With and without a window.
TEST(CudaAttentionDecodeMma, BitIdenticalAloneBatchedAndVerify) {
  POLYKV_REQUIRE_GPU();
  for (bool tr : {false, true})
  for (int window : {0, 500}) {
    Case c;
    c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = 128, c.n_head_kv = 2, c.group = 4, c.block_tokens = 64;
    c.window = window, c.seed = 9400 + uint32_t(window);
    c.seqs = {{3000, 5}, {9000, 1}, {77, 3}};
    const auto f = attn_test::build(c);
    Device d(*f);
    const MmaScope scope(true, 1024, 24 * 1024, tr);
    const std::vector<float> all = d.run_all();
    EXPECT_LE(attn_test::check_outputs(*f, all).worst, attn_test::kBound) << attn_test::describe(c);
    const size_t rf = f->row_floats, r0 = size_t(f->row0[0]);
    // Alone: one sequence, its own bounds.
    cuda::AttentionBatchDevice b = f->b;
    b.n_seq = 1, b.total_rows = 5, b.max_n_q = 5, b.max_kv = 3005;
    const std::vector<int32_t> flat0(f->flat.begin(), f->flat.begin() + f->tables[0].size());
    const std::vector<float> alone = d.run(b, flat0, {0}, {3000}, {5}, {f->row0[0]});
    for (size_t i = 0; i < 5 * rf; ++i)
      ASSERT_EQ(std::memcmp(&alone[r0 * rf + i], &all[r0 * rf + i], 4), 0)
          << "tr " << tr << " window " << window << ": alone vs batched differ at token " << i / rf << " value " << i % rf << ": "
          << alone[r0 * rf + i] << " vs " << all[r0 * rf + i];
    // Its last token decoded alone (position 3004: the verify step's token 4).
    b.total_rows = 1, b.max_n_q = 1;
    const std::vector<float> dec = d.run(b, flat0, {0}, {3004}, {1}, {f->row0[0] + 4});
    for (size_t i = 0; i < rf; ++i)
      ASSERT_EQ(std::memcmp(&dec[(r0 + 4) * rf + i], &all[(r0 + 4) * rf + i], 4), 0)
          << "tr " << tr << " window " << window << ": decode vs verify token differ at value " << i << ": " << dec[(r0 + 4) * rf + i]
          << " vs " << all[(r0 + 4) * rf + i];
  }
}

// ---- benchmark ----

constexpr int kHd = 128, kHeadKv = 8, kHeads = 32, kBt = 64;

// One layer's pool of n_kv / 64 blocks whose rows are copies of 4096 encoded rows, shuffled table.
struct Bench {
  std::unique_ptr<Buf<uint8_t>> pool;
  std::unique_ptr<Buf<int32_t>> table, zero, pos0, one;
  std::unique_ptr<Buf<float>> q, out;
  cuda::KvLayerDevice L{};
  cuda::AttentionBatchDevice b{};
  double bytes = 0;
};

std::unique_ptr<Bench> make_bench(KvType kt, KvType vt, int n_kv) {
  constexpr int kDistinct = 4096;
  auto B = std::make_unique<Bench>();
  const int n_blocks = n_kv / kBt;
  const size_t kb = kv_head_bytes(kt, kHd), vb = kv_head_bytes(vt, kHd);
  const size_t rows_per_block = size_t(kHeadKv) * kBt, k_part = rows_per_block * kb, layer = k_part + rows_per_block * vb;
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
  B->pool = std::make_unique<Buf<uint8_t>>(host.size());
  B->pool->upload(host.data(), host.size());
  B->L = cuda::KvLayerDevice{kt, vt, kBt, kHeadKv, kHd, kHd, kb, vb, B->pool->p, layer, k_part};
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
  const auto q = test::random_floats(size_t(kHeads) * kHd, 9);
  B->q = std::make_unique<Buf<float>>(q.size());
  B->q->upload(q.data(), q.size());
  B->out = std::make_unique<Buf<float>>(q.size());
  B->b = cuda::AttentionBatchDevice{1, B->table->p, B->zero->p, B->pos0->p, B->one->p, B->zero->p, 1, 1, n_kv};
  B->bytes = double(n_kv) * kHeadKv * double(kb + vb);
  return B;
}

AttentionParams bench_params() {
  AttentionParams p;
  p.n_head = kHeads;
  p.scale = 1.0f / std::sqrt(float(kHd));
  return p;
}

// Median of 20 timed calls after 3 warm-up calls, seconds (CUDA events on the context's stream).
double median_call_seconds(const Bench& B) {
  const AttentionParams p = bench_params();
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

// The outputs of one call (to compare the two kernels' results on the bench's data).
std::vector<float> bench_outputs(const Bench& B) {
  cuda::attention(B.L, bench_params(), B.b, B.q->p, B.out->p, ctx());
  POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx().stream()));
  std::vector<float> o(B.out->n);
  B.out->download(o.data(), o.size());
  return o;
}

TEST(CudaAttentionDecodeMma, DISABLED_Bench) {
  POLYKV_REQUIRE_GPU();
  const std::pair<KvType, KvType> pairs[] = {{KvType::F16, KvType::F16},       {KvType::Q8_0, KvType::Q8_0},
                                             {KvType::Q8_0, KvType::Turbo3T},  {KvType::Turbo3T, KvType::Turbo3T},
                                             {KvType::Q8_0, KvType::Turbo3}};
  constexpr int kRounds = 3;
  std::printf("decode attention, one token, one layer (32 q heads, 8 KV heads, hd 128), lanes8 vs mma interleaved, "
              "%d rounds (median)\n", kRounds);
  std::printf("%-16s %7s %8s | %10s %7s | %9s %7s %7s | %9s %7s %7s |\n", "K/V", "keys", "KV MB", "lanes8 us", "GB/s",
              "mma us", "GB/s", "speedup", "mmaT us", "GB/s", "speedup");
  for (const auto& [kt, vt] : pairs)
    for (int n_kv : {8192, 32768, 131072}) {
      const auto B = make_bench(kt, vt, n_kv);
      // Variants: 0 lanes8, 1 mma, 2 mma transposed.
      std::vector<double> sec[3];
      for (int round = 0; round < kRounds; ++round)
        for (int m = 0; m < 3; ++m) {
          const MmaScope scope(m >= 1, 1024, 24 * 1024, m == 2);
          sec[m].push_back(median_call_seconds(*B));
        }
      double med[3];
      for (int m = 0; m < 3; ++m) {
        std::sort(sec[m].begin(), sec[m].end());
        med[m] = sec[m][kRounds / 2];
      }
      std::vector<float> o[3];
      attn::Plan P[3];
      for (int m = 0; m < 3; ++m) {
        const MmaScope scope(m >= 1, 1024, 24 * 1024, m == 2);
        o[m] = bench_outputs(*B);
        P[m] = attn::plan_attention(B->L, bench_params(), B->b, ctx().sm_count());
      }
      double err[3] = {0, 0, 0};
      for (int m = 1; m < 3; ++m) {
        double num = 0, den = 0;
        for (size_t i = 0; i < o[0].size(); ++i) {
          num += (double(o[m][i]) - o[0][i]) * (double(o[m][i]) - o[0][i]);
          den += double(o[0][i]) * o[0][i];
        }
        err[m] = std::sqrt(num / std::max(den, 1e-30));
      }
      const std::string name = std::string(kv_type_name(kt)) + "/" + kv_type_name(vt);
      std::printf("%-16s %7d %8.1f | %10.1f %7.0f | %9.1f %7.0f %6.2fx | %9.1f %7.0f %6.2fx | rel L2 vs lanes8 %.1e %.1e\n",
                  name.c_str(), n_kv, B->bytes / 1e6, med[0] * 1e6, B->bytes / med[0] / 1e9, med[1] * 1e6,
                  B->bytes / med[1] / 1e9, med[0] / med[1], med[2] * 1e6, B->bytes / med[2] / 1e9, med[0] / med[2],
                  err[1], err[2]);
      std::printf("    plans: mma %s; transposed %s\n", plan_text(P[1]).c_str(), plan_text(P[2]).c_str());
      std::fflush(stdout);
      EXPECT_LE(err[1], 1e-3) << name << " " << n_kv;
      EXPECT_LE(err[2], 1e-3) << name << " " << n_kv;
    }
  // merge_kernel's loops (attn::merge_parallel): serial (as before 2026-12-01e) vs parallel, for lanes8
  // and the transposed mma kernel (chunk 1024: 128 splits), 131072 keys.
  std::printf("merge serial vs parallel, 131072 keys (us per layer, median of %d rounds)\n", kRounds);
  for (const auto& [kt, vt] : pairs) {
    const auto B = make_bench(kt, vt, 131072);
    double med[2][2];
    for (int kernel = 0; kernel < 2; ++kernel) {
      std::vector<double> sec[2];
      for (int round = 0; round < kRounds; ++round)
        for (int par = 0; par < 2; ++par) {
          const MmaScope scope(kernel == 1, 1024, 24 * 1024, true);
          const bool saved = attn::merge_parallel();
          attn::merge_parallel() = par == 1;
          sec[par].push_back(median_call_seconds(*B));
          attn::merge_parallel() = saved;
        }
      for (int par = 0; par < 2; ++par) {
        std::sort(sec[par].begin(), sec[par].end());
        med[kernel][par] = sec[par][kRounds / 2];
      }
    }
    std::printf("%s/%s: lanes8 %.1f -> %.1f us; mmaT %.1f -> %.1f us\n", kv_type_name(kt), kv_type_name(vt),
                med[0][0] * 1e6, med[0][1] * 1e6, med[1][0] * 1e6, med[1][1] * 1e6);
    std::fflush(stdout);
  }
  // Tuning: the chunk at 32768 keys (transposed), q8_0/turbo3t.
  {
    const auto B = make_bench(KvType::Q8_0, KvType::Turbo3T, 32768);
    for (int chunk : {1024, 2048, 4096}) {
      const MmaScope scope(true, chunk, 24 * 1024, true);
      const double s = median_call_seconds(*B);
      std::printf("tune q8_0/turbo3t 32768 transposed: chunk %5d: %7.1f us\n", chunk, s * 1e6);
    }
  }
  // Tuning: the chunk (keys per split) and the raw ring at 131072 keys, q8_0/turbo3t and f16/f16.
  for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Turbo3T}, std::pair{KvType::F16, KvType::F16}}) {
    const auto B = make_bench(kt, vt, 131072);
    for (bool tr : {false, true})
      for (int chunk : {512, 1024, 2048, 4096})
        for (int ring_kb : {12, 24, 48}) {
          const MmaScope scope(true, chunk, size_t(ring_kb) * 1024, tr);
          const double s = median_call_seconds(*B);
          const attn::Plan P = attn::plan_attention(B->L, bench_params(), B->b, ctx().sm_count());
          std::printf("tune %s/%s 131072: chunk %5d ring %2d KB: %7.1f us %6.0f GB/s (%s)\n", kv_type_name(kt),
                      kv_type_name(vt), chunk, ring_kb, s * 1e6, B->bytes / s / 1e9, plan_text(P).c_str());
          std::fflush(stdout);
        }
  }
}

}  // namespace
}  // namespace polykv
