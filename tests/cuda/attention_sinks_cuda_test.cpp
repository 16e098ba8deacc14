// gpt-oss attention on the GPU (issue #11 on the CUDA backend of issue #9): attention sinks (one
// learned logit per query head in the softmax denominator, no value) and sliding windows, through
// polykv::cuda::attention against the CPU's attention_ref (attention_cuda_cases.h: per-row bound
// 1e-4 relative L2, poisoned outputs, shuffled pool blocks). Every path that finalizes a row must add
// the sink exactly once: the decode kernels at depth 1 (one split, no merge), 300 and 5000 (key
// splits merged by merge_kernel); prefill with and without splits (f32 tiled and tensor-core
// kernels); sequences sharing a prefix (the prefix pass, with each prefix kernel, merged with their
// own keys). K/V f16/f16, q8_0/q8_0, q8_0/turbo3t; head sizes 64 (gpt-oss) and 128; GQA 8 (gpt-oss:
// 64 query heads over 8 KV heads); windows 128 and 7 (smaller than a pool block) with depths beyond
// them. Each case runs with every decode kernel (slots, lanes8, lanes8x4; prefill f32 / mma) and, with
// shared prefixes, every prefix kernel; a failure names them, the case and the worst row.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "attention_cuda_cases.h"
#include "backend/cuda/attention_cuda_plan.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/kv_cuda.h"
#include "cuda_test_util.h"

namespace polykv {
namespace {

using attn_test::Case;
using attn_test::SeqSpec;
namespace attn = cuda::attn;

using cuda_test::DevBuf;

cuda::CudaContext& context() {
  static cuda::CudaContext ctx(0);
  return ctx;
}

// The process-wide kernel choices for a scope: decode variant, prefill mma (on with lanes8*), prefix
// kernel.
struct KernelScope {
  attn::DecodeVariant saved_v = attn::decode_variant();
  bool saved_mma = attn::prefill_mma();
  attn::PrefixKernel saved_k = attn::prefix_kernel();
  KernelScope(attn::DecodeVariant v, attn::PrefixKernel k) {
    attn::decode_variant() = v;
    attn::prefill_mma() = v != attn::DecodeVariant::Slots;
    attn::prefix_kernel() = k;
  }
  ~KernelScope() {
    attn::decode_variant() = saved_v;
    attn::prefill_mma() = saved_mma;
    attn::prefix_kernel() = saved_k;
  }
};
const char* variant_name(attn::DecodeVariant v) {
  return v == attn::DecodeVariant::Slots    ? "slots / prefill f32"
         : v == attn::DecodeVariant::Lanes8 ? "lanes8 / prefill mma"
                                            : "lanes8x4 / prefill mma";
}
const char* prefix_name(attn::PrefixKernel k) {
  return k == attn::PrefixKernel::F32 ? "f32" : k == attn::PrefixKernel::Mma ? "mma64" : "wide";
}
std::string plan_name(const attn::Plan& P) {
  const char* kernel = P.kernel == attn::Kernel::Decode ? (P.variant == attn::DecodeVariant::Slots ? "decode slots"
                                                                                                    : "decode lanes8")
                       : P.rows == attn::kPrefixRows ? "wide mma"
                       : P.mma                       ? "tiled mma"
                                                     : "tiled f32";
  return std::string(kernel) + " rows " + std::to_string(P.rows) + " splits " + std::to_string(P.n_splits) +
         " chunk " + std::to_string(P.chunk);
}

// Builds the case (with sinks when c.sinks), uploads it, runs it with every kernel choice and checks
// each against attention_ref: one failure per choice, with the plans and the worst row.
void expect_ok(const Case& c) {
  const auto f = attn_test::build(c);
  const KvBlockStore& store = *f->store;
  const size_t pool_bytes = store.block_bytes() * size_t(f->pool_blocks);
  DevBuf<uint8_t> pool(pool_bytes);
  pool.upload(store.data(), pool_bytes);
  DevBuf<float> dq(f->q.size()), dout(f->out_floats()), dsinks(f->sinks.size());
  dq.upload(f->q.data(), f->q.size());
  dsinks.upload(f->sinks.data(), f->sinks.size());
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
  AttentionParams p = f->p;
  if (c.sinks) p.sinks = dsinks.p;
  std::vector<float> got(f->out_floats());
  attn_test::poison(got.data(), got.size());
  const std::vector<float> poisoned = got;
  std::vector<attn::PrefixKernel> prefix_kernels = {attn::prefix_kernel()};
  if (b.n_prefix > 0) prefix_kernels = {attn::PrefixKernel::F32, attn::PrefixKernel::Mma, attn::PrefixKernel::Wide};
  for (attn::DecodeVariant v : {attn::DecodeVariant::Slots, attn::DecodeVariant::Lanes8, attn::DecodeVariant::Lanes8x4})
    for (attn::PrefixKernel k : prefix_kernels) {
      const KernelScope scope(v, k);
      const attn::Plan P = attn::plan_attention(L, p, b, context().sm_count());
      std::string plans = "plan: " + plan_name(P);
      if (b.n_prefix > 0)
        plans += std::string(", prefix kernel ") + prefix_name(k) + " plan: " +
                 plan_name(attn::plan_prefix(L, p, b, context().sm_count()));
      dout.upload(poisoned.data(), poisoned.size());
      cuda::attention(L, p, b, dq.p, dout.p, context());
      POLYKV_CUDA_CHECK(cudaStreamSynchronize(context().stream()));
      dout.download(got.data(), got.size());
      const attn_test::Result r = attn_test::check_outputs(*f, got);
      EXPECT_LE(r.worst, attn_test::kBound) << attn_test::describe(c) << "\n  [" << variant_name(v) << "] " << plans
                                            << "\n  worst row: " << r.where;
    }
}

// gpt-oss's attention shape, smaller: GQA 8 over 2 KV heads.
Case oss_case(KvType kt, KvType vt, int hd, uint32_t seed) {
  Case c;
  c.kt = kt, c.vt = vt, c.head_dim = hd, c.n_head_kv = 2, c.group = 8, c.block_tokens = 16, c.sinks = true;
  c.seed = seed;
  return c;
}

struct TypePair {
  KvType k, v;
};
constexpr TypePair kPairs[] = {{KvType::F16, KvType::F16}, {KvType::Q8_0, KvType::Q8_0}, {KvType::Q8_0, KvType::Turbo3T}};

TEST(CudaAttentionSinks, DecodeDepths) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 1;
  for (const TypePair& t : kPairs)
    for (int hd : {64, 128}) {
      Case c = oss_case(t.k, t.v, hd, seed++);
      c.seqs = {{0, 1}};  // depth 1, the backend's smallest bucket: one split, the kernel writes the row
      c.extra_kv_bound = 255;
      expect_ok(c);
      c.extra_kv_bound = 0, c.seed = seed++;
      c.seqs = {{299, 1}};  // depth 300: key splits merged
      expect_ok(c);
      c.seqs = {{4999, 1}}, c.seed = seed++;  // depth 5000: many splits
      expect_ok(c);
      c.seqs = {{0, 1}, {299, 1}, {4999, 1}, {30, 1}}, c.seed = seed++;  // together in one call
      expect_ok(c);
    }
}

TEST(CudaAttentionSinks, Prefill) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 100;
  for (const TypePair& t : kPairs)
    for (int hd : {64, 128}) {
      Case c = oss_case(t.k, t.v, hd, seed++);
      c.seqs = {{0, 77}};  // from position 0
      expect_ok(c);
      c.seqs = {{1000, 77}, {0, 5}, {40, 2}}, c.seed = seed++;  // after a context, with small steps
      expect_ok(c);
    }
}

TEST(CudaAttentionSinks, SlidingWindows) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 200;
  for (int window : {128, 7})
    for (const TypePair& t : kPairs)
      for (int hd : {64, 128}) {
        Case c = oss_case(t.k, t.v, hd, seed++);
        c.window = window;
        c.seqs = {{0, 1}, {299, 1}, {4999, 1}};
        expect_ok(c);
        c.seqs = {{1000, 77}, {3, 5}}, c.seed = seed++;
        expect_ok(c);
        c.sinks = false, c.seed = seed++;  // the window alone (gpt-oss's sliding layers have sinks too)
        expect_ok(c);
      }
}

// Many sequences sharing a prefix (the prefix pass with each prefix kernel, merged with each
// sequence's own keys): decode (16 and 64 agents) and 3-token steps, and a window over the prefix.
TEST(CudaAttentionSinks, SharedPrefix) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 300;
  for (const TypePair& t : kPairs)
    for (int hd : {64, 128})
      for (int n : {16, 64}) {
        Case c = oss_case(t.k, t.v, hd, seed++);
        const int blocks = 62;  // 992 shared keys in blocks of 16
        c.seqs.push_back({blocks * 16 + 17, 1});
        for (int i = 1; i < n; ++i) c.seqs.push_back({blocks * 16 + (7 * i) % 41, 1, 0, blocks});
        c.prefix = {{0, n, blocks}};
        expect_ok(c);
        if (n == 16) {
          for (SeqSpec& s : c.seqs) s.n_q = 3;
          c.seed = seed++;
          expect_ok(c);
          c.window = 128, c.seed = seed++;
          expect_ok(c);
        }
      }
}

}  // namespace
}  // namespace polykv
