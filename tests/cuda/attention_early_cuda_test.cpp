// The lanes8 decode kernel's early start (Args::early: it overlaps the step's kv_store and waits for it
// only before staging the new keys; attn::attention_early(), on by default) and the pair-table piece
// decoder (Decode8Kernels::Pairs, the default; kv_decode_pairs.cuh) on the GPU (docs/CUDA_ATTENTION.md
// "Early start and pair tables").
//
// StoreThenAttentionEveryMode: the device pool holds a WRONG (other, valid) row where the new token's K/V
// go; kv_store writes the right one (PDL), then cuda::attention(after_store = true) runs, and its output
// must match the CPU's attention_ref over the right row (bound 1e-4 per row). The new key is aligned with
// its group's queries (its score ~10 above the others), so an attention that read the slot before the
// store wrote it misses by O(1); the test first checks that reading the wrong row does fail. Pairs at
// depths 0..40000 (one split, splits, the new key in the first / a middle / the last tile), every decoder
// mode x early on / off, each 3 times.
//
// DISABLED_StoreAttentionBench: one layer of Llama-3.1-8B (32 q heads, 8 KV heads, hd 128), one sequence,
// at 32768 and 131072 keys, f16/f16, q8_0/q8_0, q8_0/turbo3, q8_0/turbo3t, turbo3t/turbo3t: us per layer of
// the attention alone (back-to-back calls) and of kv_store + attention (the decode step's pair, PDL as in
// the model), for packed (the default) and pairs, early off and on; 3 interleaved rounds, medians.
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
#include "backend/cuda/matmul_cuda.h"
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
  void upload(const T* src, size_t count) { cuda_test::h2d(p, src, count * sizeof(T)); }
  void download(T* dst, size_t count) const {
    POLYKV_CUDA_CHECK(cudaMemcpy(dst, p, count * sizeof(T), cudaMemcpyDeviceToHost));
  }
};

cuda::CudaContext& ctx() {
  static cuda::CudaContext c(0);
  return c;
}

struct Scope {
  attn::Decode8Kernels saved_k = attn::decode8_kernels();
  attn::DecodeVariant saved_v = attn::decode_variant();
  bool saved_e = attn::attention_early();
  Scope(attn::Decode8Kernels k, bool early) {
    attn::decode8_kernels() = k;
    attn::decode_variant() = attn::DecodeVariant::Lanes8;
    attn::attention_early() = early;
  }
  ~Scope() {
    attn::decode8_kernels() = saved_k;
    attn::decode_variant() = saved_v;
    attn::attention_early() = saved_e;
  }
};
const char* mode_name(attn::Decode8Kernels m) {
  return m == attn::Decode8Kernels::Generic ? "generic"
         : m == attn::Decode8Kernels::Fixed ? "fixed"
         : m == attn::Decode8Kernels::Pairs ? "pairs"
                                            : "packed";
}

// ---- correctness ----

// One sequence of pos0 keys plus its new token; the new row's f32 K/V, its slot, and a wrong row's bytes.
struct StoreCase {
  std::unique_ptr<attn_test::Fixture> f;
  std::vector<float> k, v;                 // [n_head_kv][hd] the new row (what kv_store encodes)
  std::vector<uint8_t> wrong_k, wrong_v;   // [n_head_kv] rows of other values, encoded
  int blk = 0, slot = 0;
};

StoreCase make_store_case(KvType kt, KvType vt, int pos0, int bt, uint32_t seed) {
  Case c;
  c.kt = kt, c.vt = vt, c.head_dim = 128, c.n_head_kv = 2, c.group = 4, c.block_tokens = bt, c.seed = seed;
  c.seqs = {{pos0, 1}};
  StoreCase s;
  s.f = attn_test::build(c);
  attn_test::Fixture& f = *s.f;
  const int hd = 128, G = c.n_head_kv;
  s.blk = f.tables[0][size_t(pos0 / bt)];
  s.slot = pos0 % bt;
  std::mt19937 rng(seed * 7 + 1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  s.k.resize(size_t(G) * hd);
  s.v.resize(size_t(G) * hd);
  for (int g = 0; g < G; ++g)
    for (int d = 0; d < hd; ++d) {
      float mean = 0.0f;  // the group's queries (row 0): the new key scores ~ scale * 4 |q|^2 / 4 ~ 11 above 0
      for (int j = 0; j < c.group; ++j) mean += f.q[size_t((g * c.group + j) * hd + d)];
      s.k[size_t(g * hd + d)] = mean + 0.1f * normal(rng);
      s.v[size_t(g * hd + d)] = 2.0f * normal(rng);
    }
  const size_t kb = f.store->k_head_bytes(), vb = f.store->v_head_bytes();
  s.wrong_k.resize(size_t(G) * kb);
  s.wrong_v.resize(size_t(G) * vb);
  std::vector<float> x(hd);
  for (int g = 0; g < G; ++g) {
    // The right row into the host store (the reference reads it) ...
    kv_type_ops(kt).quantize_head(s.k.data() + size_t(g) * hd, f.store->k_part(s.blk, attn_test::kLayer) + (size_t(g) * bt + s.slot) * kb, hd);
    kv_type_ops(vt).quantize_head(s.v.data() + size_t(g) * hd, f.store->v_part(s.blk, attn_test::kLayer) + (size_t(g) * bt + s.slot) * vb, hd);
    // ... and a wrong one (another direction, another value) for the device pool before the store.
    for (float& e : x) e = normal(rng);
    kv_type_ops(kt).quantize_head(x.data(), s.wrong_k.data() + size_t(g) * kb, hd);
    for (float& e : x) e = -3.0f * normal(rng);
    kv_type_ops(vt).quantize_head(x.data(), s.wrong_v.data() + size_t(g) * vb, hd);
  }
  return s;
}

struct Outcome {
  attn_test::Result r;
  std::string what;
};

// Runs the case on the GPU: wrong row in the pool, then (store ? kv_store + : ) attention(after_store = store).
std::vector<Outcome> run_store_case(const StoreCase& s, bool store, const std::vector<std::pair<attn::Decode8Kernels, bool>>& modes,
                                    int reps) {
  const attn_test::Fixture& f = *s.f;
  const KvBlockStore& st = *f.store;
  Buf<uint8_t> pool(st.block_bytes() * size_t(f.pool_blocks));
  pool.upload(st.data(), pool.n);
  Buf<float> dq(f.q.size()), dout(f.out_floats()), dk(s.k.size()), dv(s.v.size());
  dq.upload(f.q.data(), f.q.size());
  dk.upload(s.k.data(), s.k.size());
  dv.upload(s.v.data(), s.v.size());
  const int32_t slot = s.blk * f.c.block_tokens + s.slot;
  Buf<int32_t> dslot(1);
  dslot.upload(&slot, 1);
  std::vector<float> poisoned(f.out_floats()), got(f.out_floats());
  attn_test::poison(poisoned.data(), poisoned.size());
  Buf<int32_t> dflat(f.flat.size()), dstart(1), dpos0(1), dnq(1), drow0(1);
  dflat.upload(f.flat.data(), f.flat.size());
  dstart.upload(f.table_start.data(), 1);
  dpos0.upload(f.pos0.data(), 1);
  dnq.upload(f.n_q.data(), 1);
  drow0.upload(f.row0.data(), 1);
  cuda::KvLayerDevice L = f.L;
  L.layer_base = pool.p + size_t(attn_test::kLayer) * st.layer_bytes();
  cuda::AttentionBatchDevice b = f.b;
  b.tables = dflat.p;
  b.table_start = dstart.p;
  b.pos0 = dpos0.p;
  b.n_q = dnq.p;
  b.row0 = drow0.p;
  const size_t kb = st.k_head_bytes(), vb = st.v_head_bytes(), bt = size_t(f.c.block_tokens);
  std::vector<Outcome> out;
  for (const auto& [m, early] : modes)
    for (int rep = 0; rep < reps; ++rep) {
      const Scope scope(m, early);
      for (int g = 0; g < f.c.n_head_kv; ++g) {  // the wrong row where the new one goes
        uint8_t* base = L.layer_base + size_t(s.blk) * L.block_stride + (size_t(g) * bt + size_t(s.slot)) * kb;
        cuda_test::h2d(base, s.wrong_k.data() + size_t(g) * kb, kb);
        uint8_t* vbase = L.layer_base + size_t(s.blk) * L.block_stride + L.v_offset + (size_t(g) * bt + size_t(s.slot)) * vb;
        cuda_test::h2d(vbase, s.wrong_v.data() + size_t(g) * vb, vb);
      }
      dout.upload(poisoned.data(), poisoned.size());
      POLYKV_CUDA_CHECK(cudaDeviceSynchronize());
      if (store) cuda::kv_store(L, dslot.p, 1, dk.p, dv.p, ctx().stream(), cuda::pdl_enabled(ctx()));
      cuda::attention(L, f.p, b, dq.p, dout.p, ctx(), store);
      POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx().stream()));
      dout.download(got.data(), got.size());
      out.push_back({attn_test::check_outputs(f, got),
                     std::string("[") + mode_name(m) + (early ? ", early" : ", late") + ", rep " + std::to_string(rep) + "]"});
    }
  return out;
}

const std::vector<std::pair<KvType, KvType>>& pairs() {
  static const std::vector<std::pair<KvType, KvType>> p = {
      {KvType::Q8_0, KvType::Turbo3T}, {KvType::Q8_0, KvType::Q8_0}, {KvType::Turbo3T, KvType::Turbo3T},
      {KvType::F16, KvType::F16},      {KvType::Q8_0, KvType::Turbo3}, {KvType::Turbo4T, KvType::Turbo2T}};
  return p;
}

TEST(CudaAttentionEarly, StoreThenAttentionEveryMode) {
  POLYKV_REQUIRE_GPU();
  ASSERT_TRUE(cuda::pdl_enabled(ctx())) << "PDL is off on this device: the early start never runs";
  const std::vector<std::pair<attn::Decode8Kernels, bool>> modes = {
      {attn::Decode8Kernels::Packed, false}, {attn::Decode8Kernels::Packed, true}, {attn::Decode8Kernels::Pairs, false},
      {attn::Decode8Kernels::Pairs, true},   {attn::Decode8Kernels::Generic, true}, {attn::Decode8Kernels::Fixed, true}};
  uint32_t seed = 7100;
  for (const auto& [kt, vt] : pairs())
    for (int pos0 : {0, 1, 31, 32, 200, 300, 1000, 4999, 40000}) {
      const int bt = pos0 == 4999 ? 17 : 64;
      const StoreCase s = make_store_case(kt, vt, pos0, bt, seed++);
      const std::string what = std::string(kv_type_name(kt)) + "/" + kv_type_name(vt) + " pos0 " + std::to_string(pos0) +
                               " block " + std::to_string(bt);
      if (pos0 == 200 || pos0 == 40000) {  // the test's teeth: the wrong row, never stored, must fail
        const auto bad = run_store_case(s, false, {{attn::Decode8Kernels::Packed, false}}, 1);
        EXPECT_GT(bad[0].r.worst, 1e-2) << what << ": the wrong row does not change the output enough";
      }
      for (const Outcome& o : run_store_case(s, true, modes, 3))
        EXPECT_LE(o.r.worst, attn_test::kBound) << what << " " << o.what << "\n  worst row: " << o.r.where;
    }
}

// ---- benchmark ----

constexpr int kHd = 128, kHeadKv = 8, kHeads = 32, kBt = 64;

struct Bench {
  std::unique_ptr<Buf<uint8_t>> pool;
  std::unique_ptr<Buf<int32_t>> table, zero, pos0, one, slot;
  std::unique_ptr<Buf<float>> q, out, k, v;
  cuda::KvLayerDevice L{};
  cuda::AttentionBatchDevice b{};
  double bytes = 0;
};

// One layer's pool whose rows are copies of 4096 encoded rows (encoding 131072 trellis rows on the CPU
// takes minutes), shuffled block table; the new token at n_kv - 1.
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
  const int32_t zero = 0, pos0 = n_kv - 1, one = 1, slot = table.back() * kBt + (kBt - 1);
  B->table = std::make_unique<Buf<int32_t>>(table.size());
  B->table->upload(table.data(), table.size());
  B->zero = std::make_unique<Buf<int32_t>>(1);
  B->zero->upload(&zero, 1);
  B->pos0 = std::make_unique<Buf<int32_t>>(1);
  B->pos0->upload(&pos0, 1);
  B->one = std::make_unique<Buf<int32_t>>(1);
  B->one->upload(&one, 1);
  B->slot = std::make_unique<Buf<int32_t>>(1);
  B->slot->upload(&slot, 1);
  const auto q = test::random_floats(size_t(kHeads) * kHd, 9);
  B->q = std::make_unique<Buf<float>>(q.size());
  B->q->upload(q.data(), q.size());
  B->out = std::make_unique<Buf<float>>(q.size());
  const auto kv = test::random_floats(size_t(kHeadKv) * kHd, 11);
  B->k = std::make_unique<Buf<float>>(kv.size());
  B->k->upload(kv.data(), kv.size());
  B->v = std::make_unique<Buf<float>>(kv.size());
  B->v->upload(kv.data(), kv.size());
  B->b = cuda::AttentionBatchDevice{1, B->table->p, B->zero->p, B->pos0->p, B->one->p, B->zero->p, 1, 1, n_kv};
  B->bytes = double(n_kv) * kHeadKv * double(kb + vb);
  return B;
}

// Seconds per iteration of `calls` back-to-back iterations (after 3 warm-up ones): attention alone, or
// kv_store + attention (after_store).
double per_call_seconds(const Bench& B, bool store, int calls = 30) {
  AttentionParams p;
  p.n_head = kHeads;
  p.scale = 1.0f / std::sqrt(float(kHd));
  const bool pdl = cuda::pdl_enabled(ctx());
  const auto one = [&] {
    if (store) cuda::kv_store(B.L, B.slot->p, 1, B.k->p, B.v->p, ctx().stream(), pdl);
    cuda::attention(B.L, p, B.b, B.q->p, B.out->p, ctx(), store);
  };
  cudaEvent_t e0, e1;
  POLYKV_CUDA_CHECK(cudaEventCreate(&e0));
  POLYKV_CUDA_CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) one();
  POLYKV_CUDA_CHECK(cudaEventRecord(e0, ctx().stream()));
  for (int i = 0; i < calls; ++i) one();
  POLYKV_CUDA_CHECK(cudaEventRecord(e1, ctx().stream()));
  POLYKV_CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  POLYKV_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms * 1e-3 / calls;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(CudaAttentionEarly, DISABLED_StoreAttentionBench) {
  POLYKV_REQUIRE_GPU();
  const std::pair<KvType, KvType> bench_pairs[] = {{KvType::F16, KvType::F16},       {KvType::Q8_0, KvType::Q8_0},
                                                   {KvType::Q8_0, KvType::Turbo3},   {KvType::Q8_0, KvType::Turbo3T},
                                                   {KvType::Turbo3T, KvType::Turbo3T}};
  struct Variant {
    const char* name;
    attn::Decode8Kernels mode;
    bool early;
  };
  const Variant vars[] = {{"packed", attn::Decode8Kernels::Packed, false},
                          {"pairs", attn::Decode8Kernels::Pairs, false},
                          {"packed+early", attn::Decode8Kernels::Packed, true},
                          {"pairs+early", attn::Decode8Kernels::Pairs, true}};
  constexpr int kRounds = 3;
  std::printf("decode attention, one token, one layer (32 q heads, 8 KV heads, hd 128), us per layer; %d interleaved "
              "rounds, medians; pdl %d\n",
              kRounds, int(cuda::pdl_enabled(ctx())));
  std::printf("attn = attention alone (back-to-back); st+attn = kv_store + attention, as in a decode step\n");
  std::printf("%-16s %7s | %11s %11s | %13s %13s %13s %13s | %s\n", "K/V", "keys", "attn packed", "attn pairs",
              "st+attn packd", "st+attn pairs", "packed+early", "pairs+early", "best / packed");
  for (const auto& [kt, vt] : bench_pairs)
    for (int n_kv : {32768, 131072}) {
      const auto B = make_bench(kt, vt, n_kv);
      std::vector<double> attn_only[2], pair[4];
      for (int round = 0; round < kRounds; ++round) {
        for (int m = 0; m < 2; ++m) {
          const Scope scope(vars[m].mode, false);
          attn_only[m].push_back(per_call_seconds(*B, false));
        }
        for (int m = 0; m < 4; ++m) {
          const Scope scope(vars[m].mode, vars[m].early);
          pair[m].push_back(per_call_seconds(*B, true));
        }
      }
      double best = 1e9;
      for (int m = 0; m < 4; ++m) best = std::min(best, median(pair[m]));
      const std::string name = std::string(kv_type_name(kt)) + "/" + kv_type_name(vt);
      std::printf("%-16s %7d | %11.1f %11.1f | %13.1f %13.1f %13.1f %13.1f | %.3f\n", name.c_str(), n_kv,
                  median(attn_only[0]) * 1e6, median(attn_only[1]) * 1e6, median(pair[0]) * 1e6, median(pair[1]) * 1e6,
                  median(pair[2]) * 1e6, median(pair[3]) * 1e6, best / median(pair[0]));
      std::fflush(stdout);
    }
}

}  // namespace
}  // namespace polykv
