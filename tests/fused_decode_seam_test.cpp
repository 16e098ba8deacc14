// The seam op behind the CUDA backend's fused q, k, v mat-vec with RoPE (docs/CUDA_DECODE.md "Fused
// output projections and RoPE") on the CPU backend, which keeps the default: matmul_qkv_rope = the three
// matmuls, the biases of q, k and v when given, then rope of q and of k; for 1 and several rows. And
// qk_norm_rope (CpuBackend's one per-row pass) = the head norms, then the rope.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"
#include "quant/quant.h"

namespace polykv {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(FusedDecodeSeam, CpuMatmulQkvRopeEqualsMatmulMultiThenRopeQk) {
  auto be = make_backend({"cpu", 2});
  const int n_head = 4, n_head_kv = 2, head_dim = 32, n_rot = 16;
  const int64_t n_in = 64, rows[3] = {n_head * head_dim, n_head_kv * head_dim, n_head_kv * head_dim};
  std::vector<uint8_t> bytes[3];
  WeightMatrix w[3];
  for (int i = 0; i < 3; ++i) {
    const size_t rb = row_bytes(DType::Q8_0, n_in);
    bytes[i].resize(rb * size_t(rows[i]));
    for (int64_t o = 0; o < rows[i]; ++o) {
      const auto row = randn(size_t(n_in), 900 + 100 * uint32_t(i) + uint32_t(o), 0.1f);
      quantize_row_ref(DType::Q8_0, row.data(), bytes[i].data() + size_t(o) * rb, n_in);
    }
    WeightMatrix host;
    host.type = DType::Q8_0;
    host.data = bytes[i].data();
    host.n_in = n_in;
    host.n_out = rows[i];
    host.row_stride = rb;
    w[i] = be->upload_matrix(host);
  }
  std::vector<float> inv_freq(n_rot / 2);
  for (int i = 0; i < n_rot / 2; ++i) inv_freq[size_t(i)] = std::pow(10000.0f, -float(2 * i) / float(n_rot));
  std::vector<float> bias[3];
  for (int i = 0; i < 3; ++i) bias[i] = randn(size_t(rows[i]), 70 + uint32_t(i));
  for (bool biased : {false, true})
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox}) {
    const int n = 3;
    const std::vector<int32_t> pos = {5, 6, 90};
    const auto x = randn(size_t(n * n_in), 31);
    std::vector<float> qf(size_t(n * rows[0])), kf(size_t(n * rows[1])), vf(size_t(n * rows[2]));
    std::vector<float> qp = qf, kp = kf, vp = vf;
    const Backend::MatmulOut fused[] = {{&w[0], qf.data()}, {&w[1], kf.data()}, {&w[2], vf.data()}};
    QkvBias b;
    if (biased) b = {bias[0].data(), bias[1].data(), bias[2].data()};
    be->matmul_qkv_rope(fused, x.data(), n, n_head, n_head_kv, head_dim, n_rot, pos.data(), inv_freq.data(), 1.0f,
                        style, b);
    be->matmul(w[0], x.data(), qp.data(), n);
    be->matmul(w[1], x.data(), kp.data(), n);
    be->matmul(w[2], x.data(), vp.data(), n);
    if (biased) {
      be->add_bias(qp.data(), bias[0].data(), n, int(rows[0]));
      be->add_bias(kp.data(), bias[1].data(), n, int(rows[1]));
      be->add_bias(vp.data(), bias[2].data(), n, int(rows[2]));
    }
    const std::vector<float> k_unroped = kp;
    be->rope(qp.data(), n, n_head, head_dim, n_rot, pos.data(), inv_freq.data(), 1.0f, style);
    be->rope(kp.data(), n, n_head_kv, head_dim, n_rot, pos.data(), inv_freq.data(), 1.0f, style);
    be->synchronize();
    EXPECT_TRUE(same_bits(qf, qp) && same_bits(kf, kp) && same_bits(vf, vp));
    EXPECT_FALSE(same_bits(kf, k_unroped)) << "k was rotated";
  }
}

// Qwen 3's and Gemma 3's head norms and rope in one op (CpuBackend's per-row pass) = rmsnorm of q's heads, of k's,
// then rope of q and of k; 1 and several rows, Norm and Neox, whole and partial rotation.
TEST(FusedDecodeSeam, CpuQkNormRopeEqualsHeadNormsThenRope) {
  auto be = make_backend({"cpu", 2});
  const int n_head = 6, n_head_kv = 2;
  for (int head_dim : {64, 128})
  for (int n_rot : {head_dim, head_dim / 2})
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox})
  for (int n : {1, 5}) {
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) pos[size_t(r)] = 7 + 300 * r;
    std::vector<float> inv_freq(size_t(n_rot / 2));
    for (int i = 0; i < n_rot / 2; ++i) inv_freq[size_t(i)] = std::pow(1e6f, -float(2 * i) / float(n_rot));
    const auto qn = randn(size_t(head_dim), 5), kn = randn(size_t(head_dim), 6);
    auto qf = randn(size_t(n * n_head * head_dim), 7, 3.0f), kf = randn(size_t(n * n_head_kv * head_dim), 8, 3.0f);
    auto qp = qf, kp = kf;
    be->qk_norm_rope(qf.data(), qn.data(), n_head, kf.data(), kn.data(), n_head_kv, n, head_dim, 1e-6f, n_rot,
                     pos.data(), inv_freq.data(), 1.0f, style);
    be->rmsnorm(qp.data(), qn.data(), qp.data(), n * n_head, head_dim, 1e-6f);
    be->rmsnorm(kp.data(), kn.data(), kp.data(), n * n_head_kv, head_dim, 1e-6f);
    const std::vector<float> k_unroped = kp;
    be->rope(qp.data(), n, n_head, head_dim, n_rot, pos.data(), inv_freq.data(), 1.0f, style);
    be->rope(kp.data(), n, n_head_kv, head_dim, n_rot, pos.data(), inv_freq.data(), 1.0f, style);
    be->synchronize();
    EXPECT_TRUE(same_bits(qf, qp) && same_bits(kf, kp)) << head_dim << " " << n_rot << " " << n;
    EXPECT_FALSE(same_bits(kf, k_unroped)) << "k was rotated";
  }
}

}  // namespace
}  // namespace polykv
