// The CPU backend's per-row ops spread over its pool (backend/cpu/cpu_backend_rowops.cpp, issue #10):
// rmsnorm, add_rmsnorm, gated_activation and rope_qk over k rows on 2 and 3 threads must give the bits
// of the one-thread ops of ops.cpp applied row by row (what a one-token decode step computes), and
// rope() with its angle table shared by the heads the bits of the former per-head formula.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/ops.h"

namespace polykv {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// First differing index, or -1.
long first_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0) return long(i);
  return -1;
}

// The rope of ops.cpp before the angle table (the angles of every pair computed for every head).
void rope_per_head(float* x, int n_heads, int head_dim, int n_rot, int pos, const float* inv_freq, float scale,
                   RopeStyle style) {
  const float p = float(pos) / scale;
  const int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float angle = p * inv_freq[i];
      const float c = std::cos(angle), s = std::sin(angle);
      const int a = style == RopeStyle::Norm ? 2 * i : i;
      const int b = style == RopeStyle::Norm ? 2 * i + 1 : i + half;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

std::vector<float> inv_freqs(int n_rot, float base) {
  std::vector<float> f(size_t(n_rot / 2));
  for (int i = 0; i < n_rot / 2; ++i) f[size_t(i)] = 1.0f / std::pow(base, float(2 * i) / float(n_rot));
  return f;
}

TEST(VerifyRowOps, RopeAngleTableEqualsPerHeadAngles) {
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox})
    for (auto [heads, hd, n_rot] : {std::tuple{5, 64, 64}, std::tuple{3, 128, 64}, std::tuple{7, 80, 40}}) {
      const auto f = inv_freqs(n_rot, 500000.0f);
      for (int pos : {0, 1, 17, 4095, 131071}) {
        for (float scale : {1.0f, 8.0f}) {
          auto got = randn(size_t(heads) * hd, uint32_t(pos + heads)), want = got;
          rope(got.data(), heads, hd, n_rot, pos, f.data(), scale, style);
          rope_per_head(want.data(), heads, hd, n_rot, pos, f.data(), scale, style);
          EXPECT_EQ(first_diff(got, want), -1) << "heads " << heads << " hd " << hd << " n_rot " << n_rot << " pos "
                                               << pos << " scale " << scale;
        }
      }
    }
}

class VerifyRowOpsThreads : public ::testing::TestWithParam<int> {};

TEST_P(VerifyRowOpsThreads, RowOpsEqualTheOneThreadOpsRowByRow) {
  CpuBackend be(GetParam());
  const int cols = 2051;  // odd, not a multiple of any vector width
  const auto w = randn(cols, 7);
  for (int rows : {1, 2, 3, 5, 8, 9}) {
    SCOPED_TRACE(::testing::Message() << "threads " << GetParam() << " rows " << rows);
    const auto x0 = randn(size_t(rows) * cols, 11 + uint32_t(rows), 3.0f);
    const auto r0 = randn(size_t(rows) * cols, 13 + uint32_t(rows));
    // rmsnorm
    std::vector<float> got(x0.size()), want(x0.size());
    be.rmsnorm(x0.data(), w.data(), got.data(), rows, cols, 1e-5f);
    for (int r = 0; r < rows; ++r)
      rmsnorm(x0.data() + size_t(r) * cols, w.data(), want.data() + size_t(r) * cols, 1, cols, 1e-5f);
    EXPECT_EQ(first_diff(got, want), -1) << "rmsnorm";
    // add_rmsnorm with out aliasing the residual, as the decoder calls it
    auto xg = x0, rg = r0, xw = x0, rw = r0;
    be.add_rmsnorm(xg.data(), rg.data(), w.data(), rg.data(), rows, cols, 1e-5f);
    for (int r = 0; r < rows; ++r) {
      add_inplace(xw.data() + size_t(r) * cols, rw.data() + size_t(r) * cols, cols);
      rmsnorm(xw.data() + size_t(r) * cols, w.data(), rw.data() + size_t(r) * cols, 1, cols, 1e-5f);
    }
    EXPECT_EQ(first_diff(xg, xw), -1) << "add_rmsnorm x";
    EXPECT_EQ(first_diff(rg, rw), -1) << "add_rmsnorm out";
    // gated activation over rows x n_ff values (n_ff 8191: the pool's slices do not align with rows)
    for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
      const int n_ff = 8191;
      auto g = randn(size_t(rows) * n_ff, 17 + uint32_t(rows), 4.0f), gw = g;
      const auto up = randn(g.size(), 19);
      be.gated_activation(g.data(), up.data(), int64_t(g.size()), act);
      for (int r = 0; r < rows; ++r)
        gated_activation(gw.data() + size_t(r) * n_ff, up.data() + size_t(r) * n_ff, n_ff, act);
      EXPECT_EQ(first_diff(g, gw), -1) << "gated activation " << int(act);
    }
    // rope of q and k at consecutive positions (a verify step's rows)
    for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox}) {
      const int n_head = 6, n_head_kv = 2, hd = 64, n_rot = 64;
      const auto f = inv_freqs(n_rot, 10000.0f);
      std::vector<int32_t> pos(static_cast<size_t>(rows));
      for (int r = 0; r < rows; ++r) pos[size_t(r)] = 1000 + r;
      auto q = randn(size_t(rows) * n_head * hd, 23), k = randn(size_t(rows) * n_head_kv * hd, 29);
      auto qw = q, kw = k;
      be.rope_qk(q.data(), n_head, k.data(), n_head_kv, rows, hd, n_rot, pos.data(), f.data(), 1.0f, style);
      for (int r = 0; r < rows; ++r) {
        rope_per_head(qw.data() + size_t(r) * n_head * hd, n_head, hd, n_rot, pos[size_t(r)], f.data(), 1.0f, style);
        rope_per_head(kw.data() + size_t(r) * n_head_kv * hd, n_head_kv, hd, n_rot, pos[size_t(r)], f.data(), 1.0f,
                      style);
      }
      EXPECT_EQ(first_diff(q, qw), -1) << "rope q";
      EXPECT_EQ(first_diff(k, kw), -1) << "rope k";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, VerifyRowOpsThreads, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace polykv
