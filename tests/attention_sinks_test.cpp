// Attention sinks (gpt-oss, backend/cpu/attention.h AttentionParams::sinks): a per-head logit that
// joins the softmax denominator without a value. The scalar reference against a direct float64
// formula, and the fast kernels (prefill tiles, flash-decoding splits, windows, GQA) against the
// reference for K/V types of every family (plain, block-quantized, rotated turbo).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/attention.h"
#include "kv/kv_cache.h"
#include "test_util.h"

namespace polykv {
namespace {

struct Case {
  int head_dim, group, n_past, n_q, window;
};

struct SinkRun {
  std::vector<float> k, v, q, sinks;
  AttentionParams p;
};

SinkRun make_run(const Case& c, int seed) {
  constexpr int kHeadKv = 2;
  const int n_head = kHeadKv * c.group, n = c.n_past + c.n_q;
  SinkRun r;
  r.k = test::random_floats(size_t(n) * kHeadKv * c.head_dim, seed);
  r.v = test::random_floats(size_t(n) * kHeadKv * c.head_dim, seed + 1);
  r.q = test::random_floats(size_t(c.n_q) * n_head * c.head_dim, seed + 2);
  for (float& x : r.q) x *= 3.0f;  // peaky scores, so the sink competes with a large max
  r.sinks = test::random_floats(size_t(n_head), seed + 3);
  for (size_t h = 0; h < r.sinks.size(); ++h) r.sinks[h] = r.sinks[h] * 4.0f + (h == 0 ? 40.0f : 0.0f);  // head 0: sink dominates
  r.p.n_head = n_head;
  r.p.scale = 1.0f / std::sqrt(float(c.head_dim));
  r.p.window = c.window;
  r.p.sinks = r.sinks.data();
  return r;
}

TEST(AttentionSinks, ReferenceMatchesDirectFormula) {
  const Case c{64, 2, 30, 5, 16};
  SinkRun r = make_run(c, 21);
  const int n = c.n_past + c.n_q, hd = c.head_dim;
  KvCache kv(KvShape{1, 2, hd, hd, {}}, KvType::F32, KvType::F32, n, 16);
  kv.store(0, 0, n, r.k.data(), r.v.data());
  kv.commit(n);
  std::vector<float> ref(size_t(c.n_q) * r.p.n_head * hd);
  attention_ref(r.p, kv.view(0), c.n_past, c.n_q, r.q.data(), ref.data());
  double worst = 0;
  for (int i = 0; i < c.n_q; ++i) {
    const int qp = c.n_past + i, lo = std::max(0, qp - c.window + 1);
    for (int h = 0; h < r.p.n_head; ++h) {
      const int g = h / c.group;
      std::vector<double> w;
      double den = std::exp(double(r.sinks[size_t(h)]) - 50.0);  // all terms shifted by 50 (scores are smaller)
      for (int p = lo; p <= qp; ++p) {
        double d = 0;
        for (int j = 0; j < hd; ++j)
          d += double(r.q[(size_t(i) * r.p.n_head + h) * hd + j]) * r.k[(size_t(p) * 2 + g) * hd + j];
        w.push_back(std::exp(d * r.p.scale - 50.0));
        den += w.back();
      }
      for (int j = 0; j < hd; ++j) {
        double o = 0;
        for (int p = lo; p <= qp; ++p) o += w[size_t(p - lo)] / den * r.v[(size_t(p) * 2 + g) * hd + j];
        worst = std::max(worst, std::abs(o - ref[(size_t(i) * r.p.n_head + h) * hd + j]));
      }
    }
  }
  EXPECT_LE(worst, 1e-6);
}

TEST(AttentionSinks, FastMatchesReference) {
  ThreadPool pool(2);
  const Case cases[] = {
      {64, 1, 37, 1, 0},     // decode
      {64, 4, 21, 11, 0},    // prefill tiles over a cache, GQA 4
      {64, 2, 50, 9, 16},    // sliding window
      {128, 2, 1500, 1, 0},  // flash-decoding split into key chunks
      {64, 2, 0, 19, 7},     // first prompt
  };
  const std::pair<KvType, KvType> types[] = {{KvType::F32, KvType::F32},
                                             {KvType::F16, KvType::F16},
                                             {KvType::Q8_0, KvType::Q8_0},
                                             {KvType::Q8_0, KvType::Turbo3T},
                                             {KvType::Turbo4, KvType::Turbo3}};
  int seed = 100;
  for (const auto& [kt, vt] : types)
    for (const Case& c : cases) {
      SinkRun r = make_run(c, seed += 10);
      const int n = c.n_past + c.n_q;
      KvCache kv(KvShape{1, 2, c.head_dim, c.head_dim, {}}, kt, vt, n, 16);
      kv.store(0, 0, n, r.k.data(), r.v.data());
      kv.commit(n);
      std::vector<float> fast(size_t(c.n_q) * r.p.n_head * c.head_dim), ref(fast.size());
      attention(r.p, kv.view(0), c.n_past, c.n_q, r.q.data(), fast.data(), pool);
      attention_ref(r.p, kv.view(0), c.n_past, c.n_q, r.q.data(), ref.data(),
                    attention_uses_q8_scores(attention_kernels(), kt, c.head_dim));
      double worst = 0, scale = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        worst = std::max(worst, double(std::abs(fast[i] - ref[i])));
        scale = std::max(scale, double(std::abs(ref[i])));
      }
      EXPECT_LE(worst, 1e-4 * scale) << kv_type_name(kt) << "/" << kv_type_name(vt) << " hd " << c.head_dim
                                     << " past " << c.n_past << " n_q " << c.n_q << " window " << c.window;
    }
}

}  // namespace
}  // namespace polykv
