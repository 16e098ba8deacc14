// The per-element math of the CUDA Gated DeltaNet kernels (backend/cuda/gdn_cuda_math.cuh), compiled
// for the host, against the CPU reference (kv/gated_delta_math.h, backend/cpu/gated_delta_net.cpp):
// the column-wise delta rule of the GPU kernel (thread j owns column j) equals the CPU's token_step to
// float rounding, whole or split in pieces as the kernels split it; the replay (no query) leaves the
// same state bits as the forward step (the device's rollback invariant); the convolution, decay, beta
// and l2 factors match.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "backend/cpu/gated_delta_net.h"
#include "backend/cuda/gdn_cuda_math.cuh"
#include "kv/gated_delta_math.h"

namespace polykv {
namespace {

std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

std::vector<float> normalised(std::vector<float> v, float scale) {
  gdn::l2_normalize(v.data(), v.data(), int(v.size()), 1e-6f, scale);
  return v;
}

// Runs `steps` tokens on a d x d state, column by column as the GPU kernel does (D: its template
// argument, 0 = run-time d) and whole as the CPU does; compares states and outputs.
template <int D>
void column_rule_matches_cpu(int d, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << "d " << d << " D " << D);
  std::mt19937 rng(seed);
  std::vector<float> S = randn(size_t(d) * d, rng, 0.3f), G = S;  // CPU state, GPU-style state
  std::vector<float> tmp(static_cast<size_t>(d)), o_cpu(static_cast<size_t>(d)), o_gpu(static_cast<size_t>(d));
  for (int step = 0; step < 12; ++step) {
    const auto k = normalised(randn(size_t(d), rng), 1.0f), q = normalised(randn(size_t(d), rng), 1.0f / std::sqrt(float(d)));
    const auto v = randn(size_t(d), rng);
    const float decay = std::exp(gdn::log_decay(randn(1, rng)[0], 0.5f, -0.7f));
    const float beta = gdn::sigmoid(randn(1, rng)[0]);
    gdn::token_step(S.data(), k.data(), v.data(), q.data(), decay, beta, d, tmp.data(), o_cpu.data());
    for (int j = 0; j < d; ++j) {
      cuda::gdn::StridedColumn col{G.data() + j, d};
      o_gpu[size_t(j)] = cuda::gdn::column_step<D>(col, k.data(), q.data(), v[size_t(j)], decay, beta, d);
    }
    double worst = 0;
    int bad = -1;
    for (int j = 0; j < d; ++j) {
      const double e = std::abs(double(o_gpu[size_t(j)]) - o_cpu[size_t(j)]) / (1.0 + std::abs(o_cpu[size_t(j)]));
      if (e > worst) worst = e, bad = j;
    }
    ASSERT_LT(worst, 2e-5) << "step " << step << " output " << bad << ": got " << o_gpu[size_t(bad)] << " expected "
                           << o_cpu[size_t(bad)];
  }
  double worst = 0;
  for (size_t i = 0; i < S.size(); ++i) worst = std::max(worst, std::abs(double(G[i]) - S[i]) / (1.0 + std::abs(S[i])));
  EXPECT_LT(worst, 2e-5);
}

TEST(GdnCudaMath, ColumnRuleMatchesCpuTokenStep) {
  column_rule_matches_cpu<0>(32, 1);
  column_rule_matches_cpu<0>(48, 2);
  column_rule_matches_cpu<0>(128, 3);
  column_rule_matches_cpu<32>(32, 4);
  column_rule_matches_cpu<128>(128, 5);
}

// A column split in `split` pieces as the GPU kernel does (piece sums added by a butterfly): the
// rows of each piece advance with decay_dot / update_dot. Returns o_j; with q == nullptr, the replay.
float split_column_step(float* col, int d, int split, const float* k, const float* q, float v, float decay, float beta) {
  const int r = d / split;
  std::vector<float> part(static_cast<size_t>(split));
  auto butterfly = [&](std::vector<float> x) {  // lane h: sum over the group, as __shfl_xor rounds
    for (int o = 1; o < split; o <<= 1) {
      std::vector<float> y(x.size());
      for (int h = 0; h < split; ++h) y[size_t(h)] = x[size_t(h)] + x[size_t(h ^ o)];
      x = y;
    }
    for (int h = 1; h < split; ++h) EXPECT_EQ(x[0], x[size_t(h)]) << "lanes of a column disagree";
    return x[0];
  };
  for (int h = 0; h < split; ++h) {
    float* piece = col + h * r;
    part[size_t(h)] = cuda::gdn::decay_dot<0>(piece, k + h * r, decay, r);
  }
  const float u = cuda::gdn::delta_u(beta, v, butterfly(part));
  for (int h = 0; h < split; ++h) {
    float* piece = col + h * r;
    part[size_t(h)] = cuda::gdn::update_dot<0>(piece, k + h * r, q ? q + h * r : nullptr, u, r);
  }
  return butterfly(part);
}

TEST(GdnCudaMath, SplitColumnsMatchCpuAndReplayToTheSameBits) {
  for (auto [d, split] : {std::pair{64, 2}, std::pair{128, 4}, std::pair{32, 1}}) {
    SCOPED_TRACE(testing::Message() << "d " << d << " split " << split);
    std::mt19937 rng(uint32_t(7 + d));
    std::vector<float> S = randn(size_t(d) * d, rng, 0.3f);
    std::vector<float> A(S.size()), B(S.size());  // column-major copies: forward (with q) and replay
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) A[size_t(j) * d + size_t(i)] = B[size_t(j) * d + size_t(i)] = S[size_t(i) * d + size_t(j)];
    std::vector<float> tmp(static_cast<size_t>(d)), o(static_cast<size_t>(d));
    for (int step = 0; step < 9; ++step) {
      const auto k = normalised(randn(size_t(d), rng), 1.0f), q = normalised(randn(size_t(d), rng), 0.125f);
      const auto v = randn(size_t(d), rng);
      const float decay = 0.9f - 0.01f * float(step), beta = 0.3f + 0.05f * float(step);
      gdn::token_step(S.data(), k.data(), v.data(), q.data(), decay, beta, d, tmp.data(), o.data());
      for (int j = 0; j < d; ++j) {
        const float oj = split_column_step(A.data() + size_t(j) * d, d, split, k.data(), q.data(), v[size_t(j)], decay, beta);
        split_column_step(B.data() + size_t(j) * d, d, split, k.data(), nullptr, v[size_t(j)], decay, beta);
        ASSERT_NEAR(oj, o[size_t(j)], 2e-5 * (1 + std::abs(o[size_t(j)]))) << "step " << step << " column " << j;
        ASSERT_EQ(0, std::memcmp(A.data() + size_t(j) * d, B.data() + size_t(j) * d, size_t(d) * sizeof(float)))
            << "replay differs: step " << step << " column " << j;
      }
    }
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j)
        ASSERT_NEAR(A[size_t(j) * d + size_t(i)], S[size_t(i) * d + size_t(j)], 2e-5) << "state " << i << "," << j;
  }
}

TEST(GdnCudaMath, ConvolutionMatchesCpuRows) {
  std::mt19937 rng(11);
  for (int K : {1, 2, 4, 8}) {
    SCOPED_TRACE(K);
    const int C = 37, n = 9;
    const auto w = randn(size_t(C) * K, rng), x = randn(size_t(n) * C, rng);
    const auto state = randn(size_t(K - 1) * C, rng);
    std::vector<float> out(size_t(n) * C), next(size_t(std::max(K - 1, 1)) * C);
    ssm_conv_rows(w.data(), K, C, state.data(), x.data(), n, out.data(), next.data());
    for (int c = 0; c < C; ++c) {  // the GPU thread of channel c: a window in registers
      float win[cuda::gdn::kMaxConvKernel], wc[cuda::gdn::kMaxConvKernel];
      for (int j = 0; j < K; ++j) wc[j] = w[size_t(c) * K + size_t(j)];
      for (int j = 0; j < K - 1; ++j) win[j] = state[size_t(j) * C + size_t(c)];
      for (int t = 0; t < n; ++t) {
        win[K - 1] = x[size_t(t) * C + size_t(c)];
        const float got = cuda::gdn::conv_silu(wc, win, K), want = out[size_t(t) * C + size_t(c)];
        ASSERT_NEAR(got, want, 1e-5 * (1 + std::abs(want))) << "row " << t << " channel " << c;
        for (int j = 0; j + 1 < K; ++j) win[j] = win[j + 1];
      }
      for (int j = 0; j < K - 1; ++j) ASSERT_EQ(win[j], next[size_t(j) * C + size_t(c)]) << "state " << j << " channel " << c;
    }
  }
}

TEST(GdnCudaMath, ScalarsMatchCpu) {
  for (float x : {-30.0f, -5.0f, -0.3f, 0.0f, 0.7f, 4.0f, 19.9f, 20.1f, 50.0f}) {
    SCOPED_TRACE(x);
    EXPECT_NEAR(cuda::gdn::log_decay(x, 0.25f, -1.3f), gdn::log_decay(x, 0.25f, -1.3f),
                1e-6 * (1 + std::abs(gdn::log_decay(x, 0.25f, -1.3f))));
    EXPECT_NEAR(cuda::gdn::sigmoid(x), gdn::sigmoid(x), 1e-7);
  }
  std::mt19937 rng(3);
  const auto v = randn(100, rng);
  std::vector<float> ref(v.size());
  gdn::l2_normalize(v.data(), ref.data(), 100, 1e-6f, 0.5f);
  float ss = 0;
  for (float x : v) ss += x * x;
  const float f = cuda::gdn::l2_factor(ss, 1e-6f, 0.5f);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i] * f, ref[i], 1e-6) << i;
}

}  // namespace
}  // namespace polykv
