// The Gated DeltaNet kernels: the chunked recurrence against the token-by-token reference at awkward
// lengths (a partial chunk, exactly one chunk, one past, several), the convolution's rolling state
// (rows split across calls give the rows of one call), and the recurrent state's rollback (truncate
// restores, bit for bit, the state a shorter step would have left).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/gated_delta_net.h"
#include "kv/gated_delta_math.h"
#include "kv/recurrent_state.h"
#include "test_util.h"

namespace polykv {
namespace {

struct Inputs {
  std::vector<float> q, k, v, g, beta;
  GdnInputs view(int n) const { return {n, q.data(), k.data(), v.data(), g.data(), beta.data()}; }
};

Inputs random_inputs(const GdnParams& p, int n, uint32_t seed) {
  const int d = p.head_dim;
  Inputs in;
  auto qk = [&](uint32_t s, float scale) {
    auto x = test::random_floats(size_t(n) * p.n_k_heads * d, s);
    for (size_t r = 0; r < x.size(); r += size_t(d)) gdn::l2_normalize(&x[r], &x[r], d, 1e-6f, scale);
    return x;
  };
  in.q = qk(seed, p.q_scale);
  in.k = qk(seed + 1, 1.0f);
  in.v = test::random_floats(size_t(n) * p.n_v_heads * d, seed + 2);
  auto a = test::random_floats(size_t(n) * p.n_v_heads, seed + 3, 3.0f);
  auto b = test::random_floats(size_t(n) * p.n_v_heads, seed + 4, 3.0f);
  for (float& x : a) x = gdn::log_decay(x, 0.5f, -0.7f);
  for (float& x : b) x = gdn::sigmoid(x);
  in.g = a;
  in.beta = b;
  return in;
}

GdnParams params(int nk, int nv, int d) {
  GdnParams p;
  p.n_k_heads = nk;
  p.n_v_heads = nv;
  p.head_dim = d;
  p.q_scale = 1.0f / std::sqrt(float(d));
  return p;
}

TEST(GatedDeltaNet, ChunkedMatchesTokenByToken) {
  for (int d : {32, 64}) {
    const GdnParams p = params(2, 4, d);
    for (int n : {1, 63, 64, 65, 200}) {
      const Inputs in = random_inputs(p, n, uint32_t(n * 7 + d));
      // A non-zero starting state: the recurrence continues a sequence.
      std::vector<float> S0 = test::random_floats(size_t(p.n_v_heads) * d * d, uint32_t(n + 99), 0.3f);
      std::vector<float> S_ref = S0, S_chk = S0;
      std::vector<float> o_ref(size_t(n) * p.n_v_heads * d), o_chk(o_ref.size());
      gdn_rule_tokens(p, in.view(n), S_ref.data(), S_ref.data(), o_ref.data(), 0, p.n_v_heads);
      gdn_rule_chunked(p, in.view(n), S_chk.data(), o_chk.data(), 0, p.n_v_heads, 64);
      double eo = 0, es = 0, mo = 0;
      for (size_t i = 0; i < o_ref.size(); ++i) eo = std::max(eo, double(std::abs(o_ref[i] - o_chk[i]))), mo = std::max(mo, double(std::abs(o_ref[i])));
      for (size_t i = 0; i < S_ref.size(); ++i) es = std::max(es, double(std::abs(S_ref[i] - S_chk[i])));
      EXPECT_LE(eo, 2e-5 * std::max(1.0, mo)) << "d " << d << " n " << n;
      EXPECT_LE(es, 2e-5) << "d " << d << " n " << n;
      EXPECT_GT(mo, 0.01);  // the outputs are not trivially zero
    }
  }
}

TEST(GatedDeltaNet, ChunkSizesAgree) {
  const GdnParams p = params(1, 3, 16);
  const int n = 37;
  const Inputs in = random_inputs(p, n, 5);
  std::vector<float> S1(size_t(3) * 16 * 16, 0.0f), S2 = S1;
  std::vector<float> o1(size_t(n) * 3 * 16), o2(o1.size());
  gdn_rule_chunked(p, in.view(n), S1.data(), o1.data(), 0, 3, 1);
  gdn_rule_chunked(p, in.view(n), S2.data(), o2.data(), 0, 3, 16);
  for (size_t i = 0; i < o1.size(); ++i) ASSERT_NEAR(o1[i], o2[i], 1e-5) << i;
}

TEST(GatedDeltaNet, ConvRollingStateAcrossCalls) {
  const int K = 4, C = 24, n = 11;
  const auto w = test::random_floats(size_t(C) * K, 1);
  const auto x = test::random_floats(size_t(n) * C, 2);
  std::vector<float> zero(size_t(K - 1) * C, 0.0f), s1(zero.size()), s2(zero.size()), s3(zero.size());
  std::vector<float> whole(size_t(n) * C), split(whole.size());
  ssm_conv_rows(w.data(), K, C, zero.data(), x.data(), n, whole.data(), s1.data());
  ssm_conv_rows(w.data(), K, C, zero.data(), x.data(), 2, split.data(), s2.data());
  ssm_conv_rows(w.data(), K, C, s2.data(), x.data() + 2 * C, n - 2, split.data() + 2 * C, s3.data());
  EXPECT_EQ(whole, split);
  EXPECT_EQ(s1, s3);
  // the first row sees only itself: silu(w[c][K-1] x[c])
  const float pre = w[size_t(K - 1)] * x[0];
  EXPECT_FLOAT_EQ(whole[0], pre / (1.0f + std::exp(-pre)));
}

}  // namespace
}  // namespace polykv
