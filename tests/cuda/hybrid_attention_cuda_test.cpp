// The store_kv + attention ops alone, in the exact shape of the qwen35 fixture's gated attention layer
// (one KV layer beside a recurrent state, 4 query / 2 KV heads of 64, blocks of 16, a 40-row prompt then
// 8 single-row decode steps), CUDA against the CPU backend, per KV type. On the H200 (2026-12-01d) the
// qwen35 model diverged at f16 KV decode only (4.64 in log-prob) while f32 KV and the f16 full pass
// matched: store_kv and attention are the only ops whose work depends on the KV type, so this test
// says whether they alone reproduce it. Inputs are random (fixed seed); outputs are compared per row
// (relative L2) with the first bad row, head and value printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/attention_q8.h"
#include "cuda_test_util.h"
#include "kv/owned_paged_kv.h"

namespace polykv {
namespace {

constexpr int kHead = 4, kHeadKv = 2, kDim = 64, kPrompt = 40, kTotal = 48, kBlock = 16;

KvShape qwen35_attention_shape() {
  KvShape s{1, kHeadKv, kDim, kDim, {0}, {}};
  s.recurrent = RecurrentShape{3, 4, 2, 4, 32};  // the fixture's three GDN layers (states unused here)
  return s;
}

// Device (or host) copies of host floats on `be`.
float* put(Backend& be, const std::vector<float>& h) {
  auto* p = static_cast<float*>(be.allocate(h.size() * sizeof(float)));
  be.upload(p, h.data(), h.size() * sizeof(float));
  return p;
}

// Runs the prompt then the decode steps on `be`; returns the attention outputs [48][n_head][64].
std::vector<float> run(Backend& be, KvType type, const std::vector<float>& q, const std::vector<float>& k,
                       const std::vector<float>& v) {
  OwnedPagedKv kv(qwen35_attention_shape(), type, type, 128, kBlock, be.kv_memory());
  const size_t qd = size_t(kHead) * kDim, kd = size_t(kHeadKv) * kDim;
  std::vector<float> out(size_t(kTotal) * qd, NAN);
  AttentionParams p;
  p.n_head = kHead;
  p.scale = 1.0f / 8.0f;
  auto step = [&](int pos0, int n) {
    const std::vector<float> qs(q.begin() + long(pos0 * qd), q.begin() + long((pos0 + n) * qd));
    const std::vector<float> ks(k.begin() + long(pos0 * kd), k.begin() + long((pos0 + n) * kd));
    const std::vector<float> vs(v.begin() + long(pos0 * kd), v.begin() + long((pos0 + n) * kd));
    float *dq = put(be, qs), *dk = put(be, ks), *dv = put(be, vs);
    auto* dout = static_cast<float*>(be.allocate(size_t(n) * qd * sizeof(float)));
    const StepSeq seq{&kv, pos0, n, 0};
    be.begin_step(std::span(&seq, 1));
    be.store_kv(0, dk, dv);
    be.attention(0, p, dq, dout);
    be.download(out.data() + size_t(pos0) * qd, dout, size_t(n) * qd * sizeof(float));
    kv.commit(pos0 + n);
    for (float* f : {dq, dk, dv, dout}) be.release(f);
  };
  step(0, kPrompt);
  for (int pos = kPrompt; pos < kTotal; ++pos) step(pos, 1);
  return out;
}

TEST(HybridAttentionCuda, StoreAndAttentionInTheQwen35ShapeMatchTheCpu) {
  POLYKV_REQUIRE_GPU();
  auto gpu = make_backend({"cuda", 0});
  auto cpu = make_backend({"cpu", 2});
  // The CUDA kernels score q8_0 K against the f32 query; the CPU's AVX-512 VNNI path rounds the query to q8_0
  // first (attention_q8.h), which moved this shape's q8_0 rows by ~1e-2 relative L2 (call Y2, 2026-12-05). The
  // reference here is the same arithmetic as the GPU's: f32 scores on the CPU for the duration of the test.
  const bool q8_scores = attention_q8_enabled();
  set_attention_q8(false);
  struct Restore {
    bool on;
    ~Restore() { set_attention_q8(on); }
  } restore{q8_scores};
  std::mt19937 rng(35);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto fill = [&](size_t n) {
    std::vector<float> x(n);
    for (float& f : x) f = nd(rng);
    return x;
  };
  const auto q = fill(size_t(kTotal) * kHead * kDim), k = fill(size_t(kTotal) * kHeadKv * kDim),
             v = fill(size_t(kTotal) * kHeadKv * kDim);
  for (const KvType type : {KvType::F32, KvType::F16, KvType::Q8_0}) {
    SCOPED_TRACE(kv_type_name(type));
    const auto want = run(*cpu, type, q, k, v), got = run(*gpu, type, q, k, v);
    double worst_prompt = 0, worst_decode = 0;
    int first_bad = -1;
    for (int r = 0; r < kTotal; ++r)
      for (int h = 0; h < kHead; ++h) {
        const float* g = got.data() + (size_t(r) * kHead + h) * kDim;
        const float* w = want.data() + (size_t(r) * kHead + h) * kDim;
        double e2 = 0, w2 = 0;
        for (int i = 0; i < kDim; ++i) e2 += (double(g[i]) - w[i]) * (double(g[i]) - w[i]), w2 += double(w[i]) * w[i];
        const double e = std::isfinite(e2) ? std::sqrt(e2 / std::max(w2, 1e-30)) : INFINITY;
        double& worst = r < kPrompt ? worst_prompt : worst_decode;
        if (!(e <= worst)) worst = e;
        if (!(e <= 5e-3) && first_bad < 0) {
          first_bad = r;
          std::printf("  %s: first bad row %d (%s) head %d: relative L2 %.3g; value 0 got %.6g want %.6g\n",
                      kv_type_name(type), r, r < kPrompt ? "prompt" : "decode", h, e, g[0], w[0]);
        }
      }
    std::printf("  %s KV, qwen35 attention shape: worst relative L2 prompt rows %.3g, decode rows %.3g\n",
                kv_type_name(type), worst_prompt, worst_decode);
    EXPECT_LE(worst_prompt, 5e-3);
    EXPECT_LE(worst_decode, 5e-3);
  }
}

}  // namespace
}  // namespace polykv
