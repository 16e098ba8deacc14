// polykv::cuda::attention (backend/cuda/kv_cuda.h) on the GPU against the CPU's attention_ref, on the
// cases of attention_cuda_cases.h (pool layout, shuffled and shared block tables, poisoned outputs,
// per-row bound kBound = 1e-4 relative L2): every K type with the main V types (f16, q8_0, turbo3,
// turbo3t) and the diagonal, every V type with q8_0 K, head sizes 64/128/256/512, GQA 1/4/8/32,
// decode, small steps and prefill (n_q 1, 4, 77, 300), contexts 1 to 5000 across key splits,
// sliding windows, softcap, shared prefix blocks (read per sequence, and once per group: cascade),
// block sizes 1 to 128, and launch bounds far above the real batch (graph replay); every case with
// each decode kernel (slots, lanes8, lanes8x4) and each prefill kernel (f32 tiled, mma). Plus DISABLED_ benchmarks: decode bandwidth, the
// kernels side by side (decode per variant, prefill), agents on one shared context with and without
// the cascade.
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

using attn_test::Case;
using attn_test::SeqSpec;

using cuda_test::DevBuf;

cuda::CudaContext& context() {
  static cuda::CudaContext ctx(0);
  return ctx;
}

// Selects a decode kernel for the scope (the choice is process-wide), and for prefill plans the f32
// tiled kernel (with Slots) or the tensor-core kernel (with Lanes8 / Lanes8x4).
struct VariantScope {
  cuda::attn::DecodeVariant saved = cuda::attn::decode_variant();
  bool saved_mma = cuda::attn::prefill_mma();
  explicit VariantScope(cuda::attn::DecodeVariant v) {
    cuda::attn::decode_variant() = v;
    cuda::attn::prefill_mma() = v != cuda::attn::DecodeVariant::Slots;
  }
  ~VariantScope() {
    cuda::attn::decode_variant() = saved;
    cuda::attn::prefill_mma() = saved_mma;
  }
};
constexpr cuda::attn::DecodeVariant kDecodeVariants[] = {
    cuda::attn::DecodeVariant::Slots, cuda::attn::DecodeVariant::Lanes8, cuda::attn::DecodeVariant::Lanes8x4};
const char* variant_name(cuda::attn::DecodeVariant v) {
  return v == cuda::attn::DecodeVariant::Slots    ? "slots, prefill f32 tiled"
         : v == cuda::attn::DecodeVariant::Lanes8 ? "lanes8, prefill mma"
                                                  : "lanes8x4, prefill mma";
}

// Builds the case on the host, uploads it, runs the CUDA attention, checks against attention_ref.
attn_test::Result run_case(const Case& c) {
  const auto f = attn_test::build(c);
  const KvBlockStore& store = *f->store;
  DevBuf<uint8_t> pool(store.block_bytes() * size_t(f->pool_blocks));
  pool.upload(store.data(), pool.n);
  DevBuf<float> dq(f->q.size()), dout(f->out_floats());
  dq.upload(f->q.data(), f->q.size());
  std::vector<float> got(f->out_floats());
  attn_test::poison(got.data(), got.size());
  dout.upload(got.data(), got.size());
  const size_t n_seq = f->pos0.size();
  DevBuf<int32_t> dflat(f->flat.size()), dstart(n_seq), dpos0(n_seq), dnq(n_seq), drow0(n_seq);
  dflat.upload(f->flat.data(), f->flat.size());
  dstart.upload(f->table_start.data(), n_seq);
  dpos0.upload(f->pos0.data(), n_seq);
  dnq.upload(f->n_q.data(), n_seq);
  drow0.upload(f->row0.data(), n_seq);

  const size_t n_prefix = f->prefix_seq0.size();
  DevBuf<int32_t> dps0(n_prefix), dpn(n_prefix), dpb(n_prefix);
  dps0.upload(f->prefix_seq0.data(), n_prefix);
  dpn.upload(f->prefix_n_seq.data(), n_prefix);
  dpb.upload(f->prefix_blocks.data(), n_prefix);

  cuda::KvLayerDevice L = f->L;
  L.layer_base = pool.p + size_t(attn_test::kLayer) * store.layer_bytes();
  cuda::AttentionBatchDevice b = f->b;
  b.tables = dflat.p;
  b.table_start = dstart.p;
  b.pos0 = dpos0.p;
  b.n_q = dnq.p;
  b.row0 = drow0.p;
  b.prefix_seq0 = dps0.p;
  b.prefix_n_seq = dpn.p;
  b.prefix_blocks = dpb.p;
  // Every decode kernel (attention_cuda_plan.h DecodeVariant; multi-token plans ignore the choice):
  // the worst of them, named.
  attn_test::Result worst;
  const std::vector<float> poisoned = got;
  for (cuda::attn::DecodeVariant v : kDecodeVariants) {
    const VariantScope scope(v);
    dout.upload(poisoned.data(), poisoned.size());
    cuda::attention(L, f->p, b, dq.p, dout.p, context());
    POLYKV_CUDA_CHECK(cudaStreamSynchronize(context().stream()));
    dout.download(got.data(), got.size());
    attn_test::Result r = attn_test::check_outputs(*f, got);
    if (!(r.worst <= worst.worst)) {  // NaN / inf count as worst
      worst = r;
      worst.where = std::string("[decode variant ") + variant_name(v) + "] " + r.where;
    }
  }
  return worst;
}

void expect_ok(const Case& c) {
  const attn_test::Result r = run_case(c);
  EXPECT_LE(r.worst, attn_test::kBound) << attn_test::describe(c) << "\n  worst row: " << r.where;
}

// Decode of several sequences of different lengths (1, 31, 1000 and 5000 keys: no split, and splits
// whose boundaries fall inside sequences) in one call.
std::vector<SeqSpec> decode_batch() { return {{0, 1}, {30, 1}, {999, 1}, {4999, 1}}; }

const KvType kVTypes[] = {KvType::F16, KvType::Q8_0, KvType::Turbo3, KvType::Turbo3T};

TEST(CudaAttention, EveryKTypeWithTheMainVTypesDecode) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 1;
  for (KvType kt : kAllKvTypes) {
    std::vector<KvType> vts(std::begin(kVTypes), std::end(kVTypes));
    if (std::find(vts.begin(), vts.end(), kt) == vts.end()) vts.push_back(kt);  // the diagonal
    for (KvType vt : vts) {
      Case c;
      c.kt = kt, c.vt = vt, c.seqs = decode_batch(), c.seed = seed++;
      expect_ok(c);
    }
  }
}

TEST(CudaAttention, EveryKTypeWithTheMainVTypesPrefill) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 100;
  for (KvType kt : kAllKvTypes) {
    std::vector<KvType> vts(std::begin(kVTypes), std::end(kVTypes));
    if (std::find(vts.begin(), vts.end(), kt) == vts.end()) vts.push_back(kt);
    for (KvType vt : vts) {
      Case c;
      c.kt = kt, c.vt = vt, c.seed = seed++;
      c.seqs = {{40, 77}, {0, 5}};  // a prefill chunk after 40 keys and a fresh short prompt
      expect_ok(c);
    }
  }
}

TEST(CudaAttention, EveryVTypeWithQ8K) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 200;
  for (KvType vt : kAllKvTypes) {
    Case c;
    c.kt = KvType::Q8_0, c.vt = vt, c.seed = seed++;
    c.seqs = {{0, 1}, {1500, 1}, {60, 4}};
    expect_ok(c);
  }
}

TEST(CudaAttention, HeadSizes) {
  POLYKV_REQUIRE_GPU();
  const std::pair<KvType, KvType> pairs[] = {{KvType::F16, KvType::F16},       {KvType::Q8_0, KvType::Turbo3},
                                             {KvType::Turbo4T, KvType::Q4_0},   {KvType::BF16, KvType::Turbo2},
                                             {KvType::Turbo3, KvType::Turbo3T}, {KvType::F32, KvType::Q8_0},
                                             {KvType::Turbo2T, KvType::Turbo4}};
  uint32_t seed = 300;
  for (int hd : {32, 64, 256, 512})
    for (const auto& [kt, vt] : pairs) {
      Case c;
      c.kt = kt, c.vt = vt, c.head_dim = hd, c.seed = seed++;
      c.seqs = {{0, 1}, {30, 1}, {2100, 1}, {70, 3}};
      expect_ok(c);
      c.seqs = {{33, 77}};
      c.seed = seed++;
      expect_ok(c);
    }
}

TEST(CudaAttention, GqaRatiosAndQueryCounts) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 400;
  for (int group : {1, 4, 8})
    for (int n_q : {1, 4, 77})
      for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Turbo3}, std::pair{KvType::Turbo3T, KvType::F16}}) {
        Case c;
        c.kt = kt, c.vt = vt, c.group = group, c.seed = seed++;
        c.n_head_kv = group == 1 ? 3 : 2;
        c.seqs = {{1000 - n_q, n_q}, {0, n_q}, {250, n_q}};
        expect_ok(c);
      }
  // One query head per KV head: the decode kernel takes 4 tokens per block, each with its own window.
  for (int window : {0, 3, 300}) {
    Case c;
    c.kt = KvType::Turbo3, c.vt = KvType::Q8_0, c.group = 1, c.n_head_kv = 4, c.window = window, c.seed = seed++;
    c.seqs = {{2000, 4}, {0, 3}, {600, 2}};
    expect_ok(c);
  }
  // More query heads per KV head than rows per block: the group is cut into head parts.
  for (int hd : {128, 512}) {
    Case c;
    c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = hd, c.group = 32, c.n_head_kv = 1, c.seed = seed++;
    c.seqs = {{700, 1}, {10, 2}};
    expect_ok(c);
  }
}

TEST(CudaAttention, LongPrefillAcrossSplits) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 500;
  for (const auto& [kt, vt] : {std::pair{KvType::F16, KvType::F16}, std::pair{KvType::Q8_0, KvType::Turbo3T},
                               std::pair{KvType::Turbo4, KvType::BF16}})
    for (int window : {0, 200}) {
      Case c;
      c.kt = kt, c.vt = vt, c.window = window, c.n_head_kv = 1, c.seed = seed++;
      c.seqs = {{700, 300}};
      expect_ok(c);
    }
}

TEST(CudaAttention, WindowAndSoftcap) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 600;
  for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Turbo3}, std::pair{KvType::Turbo3T, KvType::Turbo3T},
                               std::pair{KvType::F16, KvType::Q4_0}})
    for (int window : {0, 1, 100, 4096})
      for (float softcap : {0.0f, 30.0f}) {
        Case c;
        c.kt = kt, c.vt = vt, c.window = window, c.softcap = softcap, c.seed = seed++;
        c.seqs = {{0, 1}, {4999, 1}, {130, 77}, {2000, 4}};
        expect_ok(c);
      }
}

// Sliding-window decode at depth (Plan::window_splits: the splits cover the window, not the context): windows of 100
// and 1024 at depths up to 9000 beside shorter sequences, head sizes 64 (lanes8), 128 (the tensor-core kernel) and
// 256 (slots); then the same with the switch off (POLYKV_CUDA_WINDOW_SPLITS=0's plans).
TEST(CudaAttention, WindowedDecodeAtDepth) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 650;
  for (bool on : {true, false}) {
    bool& splits = cuda::attn::window_splits_on();
    const bool saved = splits;
    splits = on;
    for (int hd : {64, 128, 256})
      for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Q8_0}, std::pair{KvType::Q8_0, KvType::Turbo3T},
                                   std::pair{KvType::F16, KvType::F16}})
        for (int window : {100, 1024}) {
          Case c;
          c.kt = kt, c.vt = vt, c.head_dim = hd, c.window = window, c.block_tokens = 64, c.seed = seed++;
          c.seqs = {{8999, 1}, {3000, 1}, {500, 1}};
          expect_ok(c);
        }
    splits = saved;
  }
}

TEST(CudaAttention, SharedPrefixBlocks) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 700;
  for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Turbo3}, std::pair{KvType::F16, KvType::F16}})
    for (int n_q : {1, 4, 20}) {
      Case c;
      c.kt = kt, c.vt = vt, c.seed = seed++;
      // Sequence 0 owns a 2000-token context; 1 and 2 share its first 100 blocks (1600 tokens) and
      // add private suffixes; 3 shares 3 blocks of sequence 1; 4 shares nothing.
      c.seqs = {{2000 - n_q, n_q}, {1700, n_q, 0, 100}, {1600, n_q, 0, 100}, {60, n_q, 1, 3}, {500, n_q}};
      expect_ok(c);
    }
}

// The same shared blocks read once per group (cascade: prefix pass + merge), with groups of
// different sizes, unshared sequences beside them, empty groups, windows and softcap.
TEST(CudaAttention, SharedPrefixCascade) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 750;
  for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Turbo3}, std::pair{KvType::F16, KvType::F16},
                               std::pair{KvType::Turbo3T, KvType::Turbo3T}})
    for (int n_q : {1, 4, 9})
      for (int window : {0, 700}) {
        Case c;
        c.kt = kt, c.vt = vt, c.window = window, c.softcap = window ? 30.0f : 0.0f, c.seed = seed++;
        // 0..3 share 100 blocks (1600 tokens) of sequence 0; 4 is alone; 5, 6 share 3 blocks of 5.
        c.seqs = {{2000 - n_q, n_q}, {1700, n_q, 0, 100}, {1600, n_q, 0, 100}, {3100, n_q, 0, 100},
                  {500, n_q},        {60, n_q},          {48, n_q, 5, 3}};
        c.prefix = {{0, 4, 100}, {5, 2, 3}};
        c.extra_prefix_groups = n_q == 4 ? 3 : 0;
        expect_ok(c);
      }
  // 64 agents on one shared context, one token each.
  Case c;
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.seed = seed++;
  c.seqs.push_back({2048, 1});
  for (int i = 1; i < 64; ++i) c.seqs.push_back({2048 + 7 * i, 1, 0, 128});
  c.prefix = {{0, 64, 128}};
  expect_ok(c);
}

TEST(CudaAttention, BlockSizesAndLooseBounds) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 800;
  for (int bt : {1, 7, 64, 128})
    for (const auto& [kt, vt] : {std::pair{KvType::Turbo3T, KvType::Q4_0}, std::pair{KvType::Q4_0, KvType::Turbo2T}}) {
      Case c;
      c.kt = kt, c.vt = vt, c.block_tokens = bt, c.head_dim = 64, c.seed = seed++;
      c.seqs = {{0, 1}, {999, 1}, {300, 9}};
      expect_ok(c);
      // Host bounds far above the real batch (a graph captured for longer steps): the kernels must
      // take lengths from the device arrays.
      c.extra_kv_bound = 7000, c.extra_nq_bound = 60, c.seed = seed++;
      expect_ok(c);
      // The same for the decode kernel (one query per sequence).
      c.seqs = {{0, 1}, {999, 1}, {4000, 1}};
      c.extra_kv_bound = 20000, c.extra_nq_bound = 0, c.seed = seed++;
      expect_ok(c);
    }
}

// Benchmarks. Pools of n_blocks blocks (head_dim 128, 8 KV heads, 64 tokens per block, one layer)
// whose rows are copies of a few thousand encoded rows (encoding 131072 rows with the trellis encoder
// on the CPU would take minutes).
constexpr int kBenchHd = 128, kBenchHeadKv = 8, kBenchHeads = 32, kBenchBt = 64;

struct BenchPool {
  std::unique_ptr<DevBuf<uint8_t>> bytes;
  cuda::KvLayerDevice L;
};

BenchPool bench_pool(KvType kt, KvType vt, int n_blocks) {
  constexpr int kDistinct = 4096;
  const size_t kb = kv_head_bytes(kt, kBenchHd), vb = kv_head_bytes(vt, kBenchHd);
  const size_t rows_per_block = size_t(kBenchHeadKv) * kBenchBt;
  const size_t k_part = rows_per_block * kb, layer = k_part + rows_per_block * vb;
  std::vector<uint8_t> kr(kDistinct * kb), vr(kDistinct * vb);
  const auto x = test::random_floats(size_t(kDistinct) * kBenchHd, 5);
  for (int i = 0; i < kDistinct; ++i) {
    kv_type_ops(kt).quantize_head(x.data() + size_t(i) * kBenchHd, kr.data() + i * kb, kBenchHd);
    kv_type_ops(vt).quantize_head(x.data() + size_t((i * 7) % kDistinct) * kBenchHd, vr.data() + i * vb, kBenchHd);
  }
  std::vector<uint8_t> host(layer * size_t(n_blocks));
  for (size_t r = 0; r < size_t(n_blocks) * rows_per_block; ++r) {
    const size_t blk = r / rows_per_block, in = r % rows_per_block;
    std::memcpy(&host[blk * layer + in * kb], &kr[(r % kDistinct) * kb], kb);
    std::memcpy(&host[blk * layer + k_part + in * vb], &vr[(r % kDistinct) * vb], vb);
  }
  BenchPool pool;
  pool.bytes = std::make_unique<DevBuf<uint8_t>>(host.size());
  pool.bytes->upload(host.data(), host.size());
  pool.L = cuda::KvLayerDevice{kt, vt, kBenchBt, kBenchHeadKv, kBenchHd, kBenchHd, kb, vb, pool.bytes->p, layer, k_part};
  return pool;
}

// Median of 20 timed calls (after 3 warm-up calls), in seconds, by CUDA events on the context's stream.
template <class F>
double median_seconds(F&& call) {
  cuda::CudaContext& ctx = context();
  cudaEvent_t e0, e1;
  POLYKV_CUDA_CHECK(cudaEventCreate(&e0));
  POLYKV_CUDA_CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) call();
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    POLYKV_CUDA_CHECK(cudaEventRecord(e0, ctx.stream()));
    call();
    POLYKV_CUDA_CHECK(cudaEventRecord(e1, ctx.stream()));
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

AttentionParams bench_params() {
  AttentionParams p;
  p.n_head = kBenchHeads;
  p.scale = 1.0f / std::sqrt(float(kBenchHd));
  return p;
}

const std::pair<KvType, KvType> kBenchPairs[] = {{KvType::F16, KvType::F16},
                                                 {KvType::Q8_0, KvType::Q8_0},
                                                 {KvType::Q8_0, KvType::Turbo3},
                                                 {KvType::Q8_0, KvType::Turbo3T},
                                                 {KvType::Turbo3T, KvType::Turbo3T}};

// Decode attention of one sequence (32 query heads, 8 KV heads): KV bytes read per call over the
// median time.
TEST(CudaAttention, DISABLED_DecodeBandwidth) {
  POLYKV_REQUIRE_GPU();
  std::printf("%-18s %8s %10s %10s %9s\n", "K/V", "keys", "KV MB", "us", "GB/s");
  for (const auto& [kt, vt] : kBenchPairs)
    for (int n_kv : {32768, 131072}) {
      const int n_blocks = n_kv / kBenchBt;
      const BenchPool pool = bench_pool(kt, vt, n_blocks);
      std::vector<int32_t> table(static_cast<size_t>(n_blocks));
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), std::mt19937(3));
      const int32_t zero = 0, pos0 = n_kv - 1, one = 1;
      DevBuf<int32_t> dt(table.size()), dz(1), dp(1), dn(1);
      dt.upload(table.data(), table.size());
      dz.upload(&zero, 1);
      dp.upload(&pos0, 1);
      dn.upload(&one, 1);
      const auto q = test::random_floats(size_t(kBenchHeads) * kBenchHd, 9);
      DevBuf<float> dq(q.size()), dout(q.size());
      dq.upload(q.data(), q.size());
      cuda::AttentionBatchDevice b{1, dt.p, dz.p, dp.p, dn.p, dz.p, 1, 1, n_kv};
      const AttentionParams p = bench_params();
      const double sec = median_seconds([&] { cuda::attention(pool.L, p, b, dq.p, dout.p, context()); });
      const double bytes = double(n_kv) * kBenchHeadKv * double(pool.L.k_head_bytes + pool.L.v_head_bytes);
      const std::string name = std::string(kv_type_name(kt)) + "/" + kv_type_name(vt);
      std::printf("%-18s %8d %10.1f %10.1f %9.1f\n", name.c_str(), n_kv, bytes / 1e6, sec * 1e6, bytes / sec / 1e9);
    }
}

// Time of one attention call over one sequence of the bench pool: n_q queries at positions
// n_kv - n_q .. n_kv - 1 (decode: n_q = 1; prefill: n_q = n_kv from position 0), 32 query heads.
double one_sequence_seconds(const BenchPool& pool, int n_kv, int n_q) {
  const int n_blocks = (n_kv + kBenchBt - 1) / kBenchBt;
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(3));
  const int32_t zero = 0, pos0 = n_kv - n_q;
  DevBuf<int32_t> dt(table.size()), dz(1), dp(1), dn(1);
  dt.upload(table.data(), table.size());
  dz.upload(&zero, 1);
  dp.upload(&pos0, 1);
  dn.upload(&n_q, 1);
  const auto q = test::random_floats(size_t(n_q) * kBenchHeads * kBenchHd, 9);
  DevBuf<float> dq(q.size()), dout(q.size());
  dq.upload(q.data(), q.size());
  const cuda::AttentionBatchDevice b{1, dt.p, dz.p, dp.p, dn.p, dz.p, n_q, n_q, n_kv};
  const AttentionParams p = bench_params();
  return median_seconds([&] { cuda::attention(pool.L, p, b, dq.p, dout.p, context()); });
}

// The attention kernels side by side, one layer of Llama-3.1-8B's shape (32 query heads, 8 KV heads,
// head_dim 128): decode of one token at 4096, 32768 and 131072 keys with each decode kernel (µs, KV
// GB/s, and µs per layer relative to slots), then causal prefill of 512 and 4096 tokens from an
// empty context (µs per layer, f32 TFLOP/s of the causal QK and PV products, and the tokens/s a
// 32-layer model's attention alone would allow).
TEST(CudaAttention, DISABLED_AttentionKernels) {
  POLYKV_REQUIRE_GPU();
  const std::pair<KvType, KvType> pairs[] = {{KvType::F16, KvType::F16},       {KvType::Q8_0, KvType::Q8_0},
                                             {KvType::Q8_0, KvType::Turbo3},   {KvType::Q8_0, KvType::Turbo3T},
                                             {KvType::Turbo3T, KvType::Turbo3T}, {KvType::Q4_0, KvType::Q4_0}};
  std::printf("decode, one token, per layer\n%-18s %8s %9s %10s %8s %10s %8s %10s %8s %9s\n", "K/V", "keys", "KV MB",
              "slots us", "GB/s", "lanes8 us", "GB/s", "lanes8x4", "GB/s", "best/slot");
  for (const auto& [kt, vt] : pairs)
    for (int n_kv : {4096, 32768, 131072}) {
      const BenchPool pool = bench_pool(kt, vt, n_kv / kBenchBt);
      const double bytes = double(n_kv) * kBenchHeadKv * double(pool.L.k_head_bytes + pool.L.v_head_bytes);
      double sec[3];
      for (int i = 0; i < 3; ++i) {
        const VariantScope scope(kDecodeVariants[i]);
        sec[i] = one_sequence_seconds(pool, n_kv, 1);
      }
      const std::string name = std::string(kv_type_name(kt)) + "/" + kv_type_name(vt);
      std::printf("%-18s %8d %9.1f %10.1f %8.0f %10.1f %8.0f %10.1f %8.0f %9.2f\n", name.c_str(), n_kv, bytes / 1e6,
                  sec[0] * 1e6, bytes / sec[0] / 1e9, sec[1] * 1e6, bytes / sec[1] / 1e9, sec[2] * 1e6,
                  bytes / sec[2] / 1e9, std::min(sec[1], sec[2]) / sec[0]);
    }
  std::printf("\nprefill, causal from position 0, per layer\n%-18s %8s %10s %9s %14s %10s %9s %14s %8s\n", "K/V",
              "tokens", "f32 us", "TFLOP/s", "attn tok/s@32L", "mma us", "TFLOP/s", "attn tok/s@32L", "speedup");
  for (const auto& [kt, vt] : pairs)
    for (int n : {512, 4096}) {
      const BenchPool pool = bench_pool(kt, vt, n / kBenchBt);
      double sec[2];
      for (int i = 0; i < 2; ++i) {
        const VariantScope scope(kDecodeVariants[i]);  // slots: f32 tiled; lanes8: mma
        sec[i] = one_sequence_seconds(pool, n, n);
      }
      const double flops = 4.0 * kBenchHeads * kBenchHd * (double(n) * (n + 1) / 2);
      const std::string name = std::string(kv_type_name(kt)) + "/" + kv_type_name(vt);
      std::printf("%-18s %8d %10.1f %9.2f %14.0f %10.1f %9.2f %14.0f %8.2f\n", name.c_str(), n, sec[0] * 1e6,
                  flops / sec[0] / 1e12, n / (32 * sec[0]), sec[1] * 1e6, flops / sec[1] / 1e12, n / (32 * sec[1]),
                  sec[0] / sec[1]);
    }
}

// Agents on one shared context (32768 keys) plus a private block each, one decode token each: the
// whole batch in one call, the shared blocks read per agent vs once for the group (cascade). GB/s
// counts the distinct KV bytes (the shared context once).
TEST(CudaAttention, DISABLED_SharedContextAgents) {
  POLYKV_REQUIRE_GPU();
  constexpr int kShared = 32768 / kBenchBt;
  std::printf("%-18s %7s %9s %12s %12s %9s\n", "K/V", "agents", "KV MB", "us per seq", "us cascade", "GB/s");
  for (const auto& [kt, vt] : kBenchPairs)
    for (int agents : {16, 64}) {
      const BenchPool pool = bench_pool(kt, vt, kShared + agents);
      std::vector<int32_t> tables, start, pos0, nq, row0;
      for (int a = 0; a < agents; ++a) {
        start.push_back(int32_t(tables.size()));
        for (int i = 0; i < kShared; ++i) tables.push_back(i);
        tables.push_back(kShared + a);
        pos0.push_back(kShared * kBenchBt + 10 + a % 50);
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
      const auto q = test::random_floats(size_t(agents) * kBenchHeads * kBenchHd, 9);
      DevBuf<float> dq(q.size()), dout(q.size());
      dq.upload(q.data(), q.size());
      cuda::AttentionBatchDevice b{agents, dt.p, ds.p, dp.p, dn.p, dr.p, agents, 1, (kShared + 1) * kBenchBt};
      const AttentionParams p = bench_params();
      const double per_seq = median_seconds([&] { cuda::attention(pool.L, p, b, dq.p, dout.p, context()); });
      b.n_prefix = 1, b.prefix_seq0 = d0.p, b.prefix_n_seq = dgn.p, b.prefix_blocks = dgb.p;
      b.max_prefix_q = agents, b.max_prefix_kv = kShared * kBenchBt;
      const double cascade = median_seconds([&] { cuda::attention(pool.L, p, b, dq.p, dout.p, context()); });
      const double bytes = double(kShared + agents) * kBenchBt * kBenchHeadKv *
                           double(pool.L.k_head_bytes + pool.L.v_head_bytes);
      const std::string name = std::string(kv_type_name(kt)) + "/" + kv_type_name(vt);
      std::printf("%-18s %7d %9.1f %12.1f %12.1f %9.1f\n", name.c_str(), agents, bytes / 1e6, per_seq * 1e6,
                  cascade * 1e6, bytes / cascade / 1e9);
    }
}

}  // namespace
}  // namespace polykv
