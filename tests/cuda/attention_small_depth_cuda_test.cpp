// Single-token decode attention at small depths on the GPU (issue #9, 2026-12-01c): launches bounded by
// attn::one_split_keys() keys (the CUDA backend's smallest bucket, 256) read every key in ONE split and
// write the normalized rows (no partials, no merge launch); larger bounds split as before. Checked
// against the CPU's attention_ref (attention_cuda_cases.h, bound 1e-4 per row) for the main KV pairs at
// depths 1, 7, 255, 256, 257, 1000 with the backend's bucketed bound, every decode kernel, the
// one-split plan on (default), off (POLYKV_CUDA_ATTN_ONE_SPLIT=0's plan) and widened to 1024 keys, and
// with / without PDL; and one CUDA graph replayed while the depth grows under its bound (the decode
// step's graph: its launch shape is fixed by the bucket, the lengths are read on the device).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "attention_cuda_cases.h"
#include "backend/cuda/attention_cuda_plan.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/kv_cuda.h"
#include "cuda_test_util.h"

namespace polykv {
namespace {

using attn_test::Case;
namespace attn = cuda::attn;

cuda::CudaContext& context() {
  static cuda::CudaContext ctx(0);
  return ctx;
}

template <class T>
struct Dev {
  T* p = nullptr;
  explicit Dev(const std::vector<T>& host) {
    POLYKV_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, host.size()) * sizeof(T)));
    if (!host.empty()) POLYKV_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { cudaFree(p); }
  void put(const std::vector<T>& host) {
    POLYKV_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  void get(std::vector<T>& host) const {
    POLYKV_CUDA_CHECK(cudaMemcpy(host.data(), p, host.size() * sizeof(T), cudaMemcpyDeviceToHost));
  }
};

// A case uploaded to the device: the pool, q, the poisoned outputs and the batch arrays.
struct OnDevice {
  std::unique_ptr<attn_test::Fixture> f;
  std::vector<uint8_t> pool_bytes;
  Dev<uint8_t> pool;
  Dev<float> q, out;
  Dev<int32_t> flat, start, pos0, nq, row0;
  cuda::KvLayerDevice L;
  cuda::AttentionBatchDevice b;
  std::vector<float> poisoned;
  explicit OnDevice(std::unique_ptr<attn_test::Fixture> fx)
      : f(std::move(fx)),
        pool_bytes(f->store->data(), f->store->data() + f->store->block_bytes() * size_t(f->pool_blocks)),
        pool(pool_bytes),
        q(f->q),
        out(std::vector<float>(f->out_floats())),
        flat(f->flat),
        start(f->table_start),
        pos0(f->pos0),
        nq(f->n_q),
        row0(f->row0) {
    L = f->L;
    L.layer_base = pool.p + size_t(attn_test::kLayer) * f->store->layer_bytes();
    b = f->b;
    b.tables = flat.p, b.table_start = start.p, b.pos0 = pos0.p, b.n_q = nq.p, b.row0 = row0.p;
    poisoned.resize(f->out_floats());
    attn_test::poison(poisoned.data(), poisoned.size());
    out.put(poisoned);
  }
  attn_test::Result check() {
    std::vector<float> got(f->out_floats());
    out.get(got);
    return attn_test::check_outputs(*f, got);
  }
};

// The CUDA backend's bucket of a step's largest context (cuda_backend.cpp kv_bucket, below 4096).
int backend_bucket(int keys) {
  int b = 256;
  while (b < keys) b *= 2;
  return b;
}

struct Settings {
  attn::DecodeVariant variant;
  int one_split;
  bool pdl;
  std::string name() const {
    return std::string(variant == attn::DecodeVariant::Slots ? "slots" : variant == attn::DecodeVariant::Lanes8 ? "lanes8" : "lanes8x4") +
           " one_split_keys " + std::to_string(one_split) + (pdl ? " pdl" : " no pdl");
  }
};

// Sets the process-wide choices for the scope.
struct SettingsScope {
  attn::DecodeVariant v = attn::decode_variant();
  int o = attn::one_split_keys();
  bool p = attn::attention_pdl();
  explicit SettingsScope(const Settings& s) {
    attn::decode_variant() = s.variant;
    attn::one_split_keys() = s.one_split;
    attn::attention_pdl() = s.pdl;
  }
  ~SettingsScope() {
    attn::decode_variant() = v;
    attn::one_split_keys() = o;
    attn::attention_pdl() = p;
  }
};

std::vector<Settings> all_settings() {
  std::vector<Settings> s;
  for (attn::DecodeVariant v : {attn::DecodeVariant::Slots, attn::DecodeVariant::Lanes8, attn::DecodeVariant::Lanes8x4})
    for (int one : {256, 0, 1024}) s.push_back({v, one, true});
  s.push_back({attn::DecodeVariant::Slots, 256, false});
  return s;
}

const std::pair<KvType, KvType> kPairs[] = {
    {KvType::F16, KvType::F16},     {KvType::Q8_0, KvType::Q8_0},       {KvType::Q8_0, KvType::Turbo3T},
    {KvType::Q8_0, KvType::Turbo3}, {KvType::Turbo3T, KvType::Turbo3T}, {KvType::Q4_0, KvType::Q4_0}};

// Llama-3.1-8B's attention shape: 8 KV heads, GQA 4, head_dim 128; 64-token pool blocks.
Case decode_case(KvType kt, KvType vt, int depth, uint32_t seed) {
  Case c;
  c.kt = kt, c.vt = vt, c.head_dim = 128, c.n_head_kv = 8, c.group = 4, c.block_tokens = 64, c.seed = seed;
  c.seqs = {{depth - 1, 1}};
  c.extra_kv_bound = backend_bucket(depth) - depth;
  return c;
}

TEST(CudaAttentionSmallDepth, OneSplitMatchesTheReferenceAtEveryDepth) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 7000;
  for (const auto& [kt, vt] : kPairs)
    for (int depth : {1, 7, 255, 256, 257, 1000}) {
      const Case c = decode_case(kt, vt, depth, seed++);
      OnDevice d(attn_test::build(c));
      for (const Settings& s : all_settings()) {
        const SettingsScope scope(s);
        const attn::Plan P = attn::plan_attention(d.L, d.f->p, d.b, context().sm_count());
        const bool one = d.b.max_kv <= s.one_split;
        const std::string what = attn_test::describe(c) + " [" + s.name() + "] splits " + std::to_string(P.n_splits);
        EXPECT_EQ(P.n_splits == 1, one) << what;
        d.out.put(d.poisoned);
        cuda::attention(d.L, d.f->p, d.b, d.q.p, d.out.p, context());
        POLYKV_CUDA_CHECK(cudaStreamSynchronize(context().stream()));
        const attn_test::Result r = d.check();
        EXPECT_LE(r.worst, attn_test::kBound) << what << "\n  worst row: " << r.where;
      }
    }
}

// One graph recorded at a bound of 256 keys (the backend's first bucket), replayed while the sequence
// grows from 1 to 256 keys (pos0 and the output poison change between replays, outside the graph):
// every replay must match the reference at its own depth.
TEST(CudaAttentionSmallDepth, GraphReplayWhileTheDepthGrows) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 7500;
  for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Turbo3T}, std::pair{KvType::F16, KvType::F16}})
    for (const Settings& s : {Settings{attn::DecodeVariant::Slots, 256, true}, Settings{attn::DecodeVariant::Slots, 0, true},
                              Settings{attn::DecodeVariant::Lanes8, 256, true}}) {
      const SettingsScope scope(s);
      Case c = decode_case(kt, vt, 256, seed++);  // 256 keys stored, bound 256
      OnDevice d(attn_test::build(c));
      cudaStream_t st = context().stream();
      // Eager first (uploads the decode tables, grows the partials' scratch), then the recording.
      cuda::attention(d.L, d.f->p, d.b, d.q.p, d.out.p, context());
      POLYKV_CUDA_CHECK(cudaStreamSynchronize(st));
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      POLYKV_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      cuda::attention(d.L, d.f->p, d.b, d.q.p, d.out.p, context());
      POLYKV_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
      POLYKV_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      for (int depth : {1, 2, 7, 64, 65, 200, 255, 256}) {
        d.f->c.seqs[0].pos0 = depth - 1;  // the reference's view
        d.f->pos0[0] = depth - 1;
        d.pos0.put(d.f->pos0);
        d.out.put(d.poisoned);
        POLYKV_CUDA_CHECK(cudaGraphLaunch(exec, st));
        POLYKV_CUDA_CHECK(cudaStreamSynchronize(st));
        const attn_test::Result r = d.check();
        EXPECT_LE(r.worst, attn_test::kBound) << attn_test::describe(d.f->c) << " [" << s.name()
                                              << "] graph replay at depth " << depth << "\n  worst row: " << r.where;
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
}

}  // namespace
}  // namespace polykv
