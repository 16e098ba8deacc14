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
#include <cstdio>
#include <cstdlib>
#include <random>
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
    if (!host.empty()) cuda_test::h2d(p, host.data(), host.size() * sizeof(T));
  }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { cudaFree(p); }
  void put(const std::vector<T>& host) {
    cuda_test::h2d(p, host.data(), host.size() * sizeof(T));
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

// ---- benchmark (DISABLED_: run with --gtest_also_run_disabled_tests) ----

// Microseconds per call of `call`, captured 50 times back to back in one graph (as the decode step's
// graph runs them, PDL edges included): min over 5 replays of the graph.
template <class F>
double graph_us(F&& call) {
  cudaStream_t st = context().stream();
  call();  // eager first: tables, scratch
  POLYKV_CUDA_CHECK(cudaStreamSynchronize(st));
  constexpr int kCalls = 50;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  POLYKV_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kCalls; ++i) call();
  POLYKV_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
  POLYKV_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  POLYKV_CUDA_CHECK(cudaEventCreate(&e0));
  POLYKV_CUDA_CHECK(cudaEventCreate(&e1));
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) {
    POLYKV_CUDA_CHECK(cudaEventRecord(e0, st));
    POLYKV_CUDA_CHECK(cudaGraphLaunch(exec, st));
    POLYKV_CUDA_CHECK(cudaEventRecord(e1, st));
    POLYKV_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    POLYKV_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (rep > 0) best = std::min(best, double(ms) * 1000.0 / kCalls);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return best;
}

// Decode attention of Llama-3.1-8B's shape at small depths (the backend's bucketed bound), the
// one-split plan on / off and PDL on / off; and kv_store of one decode row (8 KV heads) per KV pair,
// the encoder new / before 2026-12-02 (POLYKV_CUDA_KV_VITERBI=old). us per call in a graph.
TEST(CudaAttentionSmallDepth, DISABLED_SmallKernelsMicros) {
  POLYKV_REQUIRE_GPU();
  std::printf("decode attention, 32 q heads / 8 KV heads / hd 128, us per call (graph of 50)\n");
  std::printf("%-16s %6s %6s %14s %14s %14s\n", "K/V", "depth", "bound", "one-split+pdl", "old plan+pdl",
              "one-split nopdl");
  uint32_t seed = 9000;
  for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Turbo3T}, std::pair{KvType::F16, KvType::F16},
                               std::pair{KvType::Q8_0, KvType::Q8_0}})
    for (int depth : {1, 64, 256, 257, 512, 1000}) {
      const Case c = decode_case(kt, vt, depth, seed++);
      OnDevice d(attn_test::build(c));
      double us[3];
      const Settings set[3] = {{attn::DecodeVariant::Slots, 256, true}, {attn::DecodeVariant::Slots, 0, true},
                               {attn::DecodeVariant::Slots, 256, false}};
      for (int i = 0; i < 3; ++i) {
        const SettingsScope scope(set[i]);
        us[i] = graph_us([&] { cuda::attention(d.L, d.f->p, d.b, d.q.p, d.out.p, context()); });
      }
      std::printf("%-16s %6d %6d %14.2f %14.2f %14.2f\n",
                  (std::string(kv_type_name(kt)) + "/" + kv_type_name(vt)).c_str(), depth, d.b.max_kv, us[0], us[1],
                  us[2]);
    }

  std::printf("kv_store, one row, 8 KV heads, hd 128, us per call (graph of 50)\n");
  std::printf("%-16s %14s %14s\n", "K/V", "encoder new", "encoder old");
  for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Turbo3T}, std::pair{KvType::F16, KvType::F16},
                               std::pair{KvType::Q8_0, KvType::Q8_0}, std::pair{KvType::Turbo3T, KvType::Turbo3T}}) {
    cuda::KvLayerDevice L;
    L.k_type = kt, L.v_type = vt, L.block_tokens = 64, L.n_head_kv = 8, L.head_dim = L.head_dim_v = 128;
    L.k_head_bytes = kv_head_bytes(kt, 128), L.v_head_bytes = kv_head_bytes(vt, 128);
    L.v_offset = size_t(8) * 64 * L.k_head_bytes;
    L.block_stride = L.v_offset + size_t(8) * 64 * L.v_head_bytes;
    Dev<uint8_t> pool(std::vector<uint8_t>(L.block_stride * 2, 0));
    L.layer_base = pool.p;
    std::mt19937 rng(seed++);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> kh(8 * 128), vh(8 * 128);
    for (float& x : kh) x = normal(rng);
    for (float& x : vh) x = normal(rng);
    Dev<float> k(kh), v(vh);
    Dev<int32_t> slots(std::vector<int32_t>{70});  // block 1, slot 6
    double us[2];
    const char* saved = std::getenv("POLYKV_CUDA_KV_VITERBI");
    const std::string saved_s = saved ? saved : "";
    for (int i = 0; i < 2; ++i) {
      if (i == 0)
        unsetenv("POLYKV_CUDA_KV_VITERBI");
      else
        setenv("POLYKV_CUDA_KV_VITERBI", "old", 1);  // read by kv_store's make_side_params at each call
      us[i] = graph_us([&] { cuda::kv_store(L, slots.p, 1, k.p, v.p, context().stream(), true); });
    }
    if (saved)
      setenv("POLYKV_CUDA_KV_VITERBI", saved_s.c_str(), 1);
    else
      unsetenv("POLYKV_CUDA_KV_VITERBI");
    std::printf("%-16s %14.2f %14.2f\n", (std::string(kv_type_name(kt)) + "/" + kv_type_name(vt)).c_str(), us[0], us[1]);
  }
}

}  // namespace
}  // namespace polykv
