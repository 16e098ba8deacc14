// kv/gated_delta_kernels.h: the SIMD token step of every supported ISA gives token_step_ref's bytes, state
// and output, for head sizes around the vector widths (1 .. 260), in place and from a separate source,
// with and without a query, over several tokens, with zeros, signed zeros, subnormals, infinities and NaNs
// in the state; gdn_rule_tokens reading S0 leaves S0 alone and writes only its heads of S; and the chunked
// recurrence of every ISA (gdn_rule_chunked_fast) gives gdn_rule_chunked's bytes at awkward d, rows and chunks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/gated_delta_net.h"
#include "core/isa.h"
#include "kv/gated_delta_kernels.h"
#include "kv/gated_delta_math.h"
#include "test_util.h"

namespace polykv {
namespace {

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A state with awkward values sprinkled in (special = true): what a long-running recurrence could hold.
std::vector<float> state(int d, uint32_t seed, bool special) {
  std::vector<float> S = test::random_floats(size_t(d) * d, seed, 0.3f);
  if (special) {
    std::mt19937 rng(seed);
    const float odd[] = {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), -1e-39f, 3e38f, -3e38f,
                         std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
    for (int n = 0; n < d / 4 + 1; ++n) S[rng() % S.size()] = odd[rng() % 8];
  }
  return S;
}

TEST(GatedDeltaKernels, EveryIsaGivesTheReferencesBytes) {
  for (Isa isa : supported_isas()) {
    IsaScope scope(isa);
    for (int d : {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 127, 128, 130, 256, 260}) {
      for (int variant = 0; variant < 6; ++variant) {
        const bool with_q = variant % 2 == 0, in_place = variant / 2 == 0, special = variant / 2 == 2;
        SCOPED_TRACE(testing::Message() << isa_name(isa) << " d " << d << " q " << with_q << " in place " << in_place
                                        << " special " << special);
        const uint32_t seed = uint32_t(d * 131 + variant);
        const std::vector<float> S0 = state(d, seed, special);
        std::vector<float> S_ref = S0, S_fast = in_place ? S0 : std::vector<float>(S0.size(), -7.0f);
        std::vector<float> tmp_r(static_cast<size_t>(d)), tmp_f(static_cast<size_t>(d)), o_r(size_t(d), 5.0f), o_f(size_t(d), 5.0f);
        std::mt19937 rng(seed);
        for (int step = 0; step < 3; ++step) {
          std::vector<float> k = test::random_floats(size_t(d), seed + 10 + step);
          std::vector<float> q = test::random_floats(size_t(d), seed + 20 + step);
          const std::vector<float> v = test::random_floats(size_t(d), seed + 30 + step, 2.0f);
          gdn::l2_normalize(k.data(), k.data(), d, 1e-6f, 1.0f);
          gdn::l2_normalize(q.data(), q.data(), d, 1e-6f, 1.0f / std::sqrt(float(d)));
          const float decay = std::exp(gdn::log_decay(float(int(rng() % 600) - 300) / 100.0f, 0.5f, -0.7f));
          const float beta = gdn::sigmoid(float(int(rng() % 600) - 300) / 100.0f);
          const float* q_ptr_r = with_q ? q.data() : nullptr;
          // The first step from a separate source (unless in place), the others in place, as a verify step runs.
          gdn::token_step_ref(step == 0 ? S0.data() : S_ref.data(), S_ref.data(), k.data(), v.data(), q_ptr_r, decay,
                              beta, d, tmp_r.data(), o_r.data());
          gdn::token_step_fast(step == 0 && !in_place ? S0.data() : S_fast.data(), S_fast.data(), k.data(), v.data(),
                               q_ptr_r, decay, beta, d, tmp_f.data(), o_f.data());
          ASSERT_TRUE(same_bytes(S_ref, S_fast)) << "state after step " << step;
          ASSERT_TRUE(same_bytes(o_r, o_f)) << "output of step " << step;
        }
        // The test must see real values: a NaN or infinity poisons its column, never most of them (d >= 8).
        int finite = 0;
        for (float x : S_ref) finite += std::isfinite(x);
        if (d >= 8) EXPECT_GT(finite, d * d / 2);
      }
    }
  }
}

TEST(GatedDeltaKernels, RuleTokensFromASeparateSourceMatchesInPlace) {
  GdnParams p;
  p.n_k_heads = 2;
  p.n_v_heads = 4;
  p.head_dim = 24;
  p.q_scale = 1.0f / std::sqrt(24.0f);
  const int d = p.head_dim, n = 3;
  auto qk = [&](uint32_t s, float scale) {
    auto x = test::random_floats(size_t(n) * p.n_k_heads * d, s);
    for (size_t r = 0; r < x.size(); r += size_t(d)) gdn::l2_normalize(&x[r], &x[r], d, 1e-6f, scale);
    return x;
  };
  const auto q = qk(1, p.q_scale), k = qk(2, 1.0f);
  const auto v = test::random_floats(size_t(n) * p.n_v_heads * d, 3);
  std::vector<float> g(size_t(n) * p.n_v_heads, -0.3f), beta(size_t(n) * p.n_v_heads, 0.6f);
  const GdnInputs in{n, q.data(), k.data(), v.data(), g.data(), beta.data()};
  const std::vector<float> S0 = test::random_floats(size_t(p.n_v_heads) * d * d, 4, 0.3f);
  std::vector<float> S_in_place = S0, o_a(size_t(n) * p.n_v_heads * d), o_b(o_a.size());
  gdn_rule_tokens(p, in, S_in_place.data(), S_in_place.data(), o_a.data(), 0, p.n_v_heads);
  const std::vector<float> S0_copy = S0;
  std::vector<float> S(S0.size(), 9.0f);
  gdn_rule_tokens(p, in, S0.data(), S.data(), o_b.data(), 1, 3);  // heads 1 and 2 only
  EXPECT_TRUE(same_bytes(S0, S0_copy)) << "the source was written";
  const size_t hf = size_t(d) * d;
  for (int j = 0; j < p.n_v_heads; ++j) {
    for (size_t x = 0; x < hf; ++x) {
      const float want = (j == 1 || j == 2) ? S_in_place[j * hf + x] : 9.0f;
      ASSERT_EQ(std::memcmp(&S[j * hf + x], &want, sizeof(float)), 0) << "head " << j << " float " << x;
    }
    for (int t = 0; t < n; ++t)
      if (j == 1 || j == 2)
        ASSERT_EQ(std::memcmp(&o_a[(size_t(t) * p.n_v_heads + j) * d], &o_b[(size_t(t) * p.n_v_heads + j) * d],
                              size_t(d) * sizeof(float)), 0);
  }
}

TEST(GatedDeltaKernels, ChunkedOfEveryIsaGivesTheReferencesBytes) {
  for (Isa isa : supported_isas()) {
    IsaScope scope(isa);
    for (int d : {1, 7, 16, 33, 64, 128}) {
      GdnParams p;
      p.n_k_heads = 2;
      p.n_v_heads = 4;
      p.head_dim = d;
      p.q_scale = 1.0f / std::sqrt(float(d));
      for (int n : {1, 5, 17, 64, 70}) {
        const uint32_t seed = uint32_t(d * 1000 + n);
        auto qk = [&](uint32_t sd, float scale) {
          auto x = test::random_floats(size_t(n) * p.n_k_heads * d, sd);
          for (size_t r = 0; r < x.size(); r += size_t(d)) gdn::l2_normalize(&x[r], &x[r], d, 1e-6f, scale);
          return x;
        };
        const auto q = qk(seed, p.q_scale), k = qk(seed + 1, 1.0f);
        const auto v = test::random_floats(size_t(n) * p.n_v_heads * d, seed + 2);
        auto g = test::random_floats(size_t(n) * p.n_v_heads, seed + 3, 3.0f);
        auto beta = test::random_floats(size_t(n) * p.n_v_heads, seed + 4, 3.0f);
        for (float& x : g) x = gdn::log_decay(x, 0.5f, -0.7f);
        for (float& x : beta) x = gdn::sigmoid(x);
        const GdnInputs in{n, q.data(), k.data(), v.data(), g.data(), beta.data()};
        const std::vector<float> S0 = test::random_floats(size_t(p.n_v_heads) * d * d, seed + 5, 0.3f);
        for (int chunk : {1, 7, 16, 64}) {
          SCOPED_TRACE(testing::Message() << isa_name(isa) << " d " << d << " n " << n << " chunk " << chunk);
          std::vector<float> S_ref = S0, S_fast = S0, o_ref(size_t(n) * p.n_v_heads * d, 3.0f), o_fast = o_ref;
          gdn_rule_chunked(p, in, S_ref.data(), o_ref.data(), 0, p.n_v_heads, chunk);
          gdn_rule_chunked_fast(p, in, S_fast.data(), o_fast.data(), 0, p.n_v_heads, chunk);
          ASSERT_TRUE(same_bytes(S_ref, S_fast)) << "state";
          ASSERT_TRUE(same_bytes(o_ref, o_fast)) << "outputs";
        }
      }
    }
  }
}

}  // namespace
}  // namespace polykv
