// The V precision window (kv/v_window.h): attention reads the precise copies of the sink and recent
// positions, the fast path agrees with the reference, a window covering every position gives q8_0
// accuracy, and positions whose slot was reused or rolled back fall back to the compressed rows.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/attention.h"
#include "core/error.h"
#include "kv/kv_cache.h"
#include "test_util.h"

namespace polykv {
namespace {

constexpr int kHeadKv = 2, kGroup = 2, kHd = 128;

struct Inputs {
  std::vector<float> k, v, q;
  AttentionParams p;
};

Inputs make(int n, int n_q, uint32_t seed) {
  Inputs s;
  s.k = test::random_floats(size_t(n) * kHeadKv * kHd, seed);
  s.v = test::random_floats(size_t(n) * kHeadKv * kHd, seed + 1);
  s.q = test::random_floats(size_t(n_q) * kHeadKv * kGroup * kHd, seed + 2, 3.0f);  // peaky softmax
  s.p.n_head = kHeadKv * kGroup;
  s.p.scale = 1.0f / std::sqrt(float(kHd));
  return s;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, double(std::abs(a[i] - b[i])));
    scale = std::max(scale, double(std::abs(b[i])));
  }
  return worst / scale;
}

// Attention output of the last n_q positions of n, with V in vt and the given window.
std::vector<float> attend(KvType vt, const VPrecisionWindow& w, const Inputs& s, int n, int n_q, bool reference) {
  KvShape shape{1, kHeadKv, kHd, kHd, {}};
  KvCache kv(shape, KvType::F32, vt, n, 16);
  if (w.enabled()) kv.set_v_window(w);
  kv.store(0, 0, n, s.k.data(), s.v.data());
  kv.commit(n);
  std::vector<float> out(size_t(n_q) * s.p.n_head * kHd);
  ThreadPool pool(2);
  if (reference)
    attention_ref(s.p, kv.view(0), n - n_q, n_q, s.q.data(), out.data());
  else
    attention(s.p, kv.view(0), n - n_q, n_q, s.q.data(), out.data(), pool);
  return out;
}

TEST(VWindow, FastMatchesReference) {
  for (KvType vt : {KvType::Turbo3, KvType::Turbo2, KvType::Q4_0, KvType::F16}) {
    for (int n : {20, 77, 1400}) {
      const Inputs s = make(n, 3, 40 + uint32_t(n));
      const VPrecisionWindow w{4, 26, KvType::Q8_0};
      const double err = max_rel_diff(attend(vt, w, s, n, 3, false), attend(vt, w, s, n, 3, true));
      EXPECT_LE(err, 1e-4) << kv_type_name(vt) << " n " << n;
    }
  }
}

TEST(VWindow, FullWindowGivesQ8Accuracy) {
  const int n = 300;
  const Inputs s = make(n, 2, 7);
  const auto exact = attend(KvType::F32, {}, s, n, 2, true);
  const double plain = max_rel_diff(attend(KvType::Turbo3, {}, s, n, 2, false), exact);
  const double windowed = max_rel_diff(attend(KvType::Turbo3, {0, n, KvType::Q8_0}, s, n, 2, false), exact);
  const double q8 = max_rel_diff(attend(KvType::Q8_0, {}, s, n, 2, false), exact);
  EXPECT_LT(windowed, 2 * q8 + 1e-6) << "windowed " << windowed << " q8_0 " << q8;
  EXPECT_LT(windowed * 5, plain) << "windowed " << windowed << " turbo3 " << plain;
}

TEST(VWindow, ReusedAndRolledBackSlotsFallBack) {
  const int n = 64;
  const Inputs s = make(n, 1, 9);
  KvShape shape{1, kHeadKv, kHd, kHd, {}};
  KvCache kv(shape, KvType::F32, KvType::Turbo3, n, 16);
  kv.set_v_window({2, 8, KvType::Q8_0});
  kv.store(0, 0, n, s.k.data(), s.v.data());
  kv.commit(n);
  const KvLayerView view = kv.view(0);
  EXPECT_NE(view.v_hi_row(0, 0), nullptr);
  EXPECT_NE(view.v_hi_row(1, 1), nullptr);
  EXPECT_EQ(view.v_hi_row(2, 0), nullptr);   // neither sink nor recent
  EXPECT_EQ(view.v_hi_row(55, 0), nullptr);  // its slot now holds position 63
  EXPECT_NE(view.v_hi_row(56, 0), nullptr);
  EXPECT_NE(view.v_hi_row(63, 1), nullptr);
  // Roll back 4 positions and store 2 new ones: slots of 60, 61 now hold the new 60, 61; 62, 63 keep
  // stale entries that no query can reach (positions >= n_tokens are never read).
  kv.truncate(60);
  kv.store(0, 60, 2, s.k.data(), s.v.data());
  kv.commit(62);
  const KvLayerView v2 = kv.view(0);
  EXPECT_NE(v2.v_hi_row(61, 0), nullptr);
  EXPECT_NE(v2.v_hi_row(56, 0), nullptr);  // held since the first store (its slot untouched)
  EXPECT_EQ(v2.v_hi_row(54, 0), nullptr);  // recent again, but never held: read compressed
  EXPECT_THROW(kv.set_v_window({1, 1, KvType::Q8_0}), Error);  // only before first use
}

TEST(VWindow, SpecNames) {
  EXPECT_FALSE(parse_v_cache_spec("turbo3").window.enabled());
  const VCacheSpec w = parse_v_cache_spec("turbo3w");
  EXPECT_EQ(w.type, KvType::Turbo3);
  EXPECT_EQ(w.window.n_sink, kDefaultSinks);
  EXPECT_EQ(w.window.recent, kDefaultRecent);
  EXPECT_THROW(parse_v_cache_spec("turbo9w"), Error);
  EXPECT_THROW(parse_v_cache_spec("w"), Error);
}

}  // namespace
}  // namespace polykv
