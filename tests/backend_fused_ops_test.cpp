// The Backend seam's fused ops (matmul_multi, add_rmsnorm, rope_qk) on the CPU backend: each must
// give the bits of the plain ops it stands for (the model now calls them; a GPU backend fuses them
// with the same bits, tests/cuda/model_fused_cuda_test.cpp), with out aliasing the residual as the
// decoder calls add_rmsnorm.
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

// A q8_0 matrix of n_out rows (host bytes kept alive by the caller).
WeightMatrix q8_matrix(std::vector<uint8_t>& bytes, int64_t n_out, int64_t n_in, uint32_t seed) {
  const size_t rb = row_bytes(DType::Q8_0, n_in);
  bytes.assign(rb * size_t(n_out), 0);
  for (int64_t o = 0; o < n_out; ++o) {
    const auto row = randn(size_t(n_in), seed + uint32_t(o), 0.1f);
    quantize_row_ref(DType::Q8_0, row.data(), bytes.data() + size_t(o) * rb, n_in);
  }
  WeightMatrix w;
  w.type = DType::Q8_0;
  w.data = bytes.data();
  w.n_in = n_in;
  w.n_out = n_out;
  w.row_stride = rb;
  return w;
}

TEST(BackendFusedOps, CpuMatmulMultiEqualsSeparateMatmuls) {
  auto be = make_backend({"cpu", 2});
  std::vector<uint8_t> b0, b1, b2;
  const int64_t n_in = 256;
  const WeightMatrix w0 = be->upload_matrix(q8_matrix(b0, 48, n_in, 1));
  const WeightMatrix w1 = be->upload_matrix(q8_matrix(b1, 16, n_in, 2));
  const WeightMatrix w2 = be->upload_matrix(q8_matrix(b2, 16, n_in, 3));
  for (int n : {1, 3, 40}) {
    const auto x = randn(size_t(n) * n_in, 10 + uint32_t(n));
    std::vector<float> y0(size_t(n) * 48), y1(size_t(n) * 16), y2(size_t(n) * 16);
    std::vector<float> r0 = y0, r1 = y1, r2 = y2;
    const Backend::MatmulOut parts[] = {{&w0, y0.data()}, {&w1, y1.data()}, {&w2, y2.data()}};
    be->matmul_multi(parts, x.data(), n);
    be->matmul(w0, x.data(), r0.data(), n);
    be->matmul(w1, x.data(), r1.data(), n);
    be->matmul(w2, x.data(), r2.data(), n);
    be->synchronize();
    EXPECT_TRUE(same_bits(y0, r0) && same_bits(y1, r1) && same_bits(y2, r2)) << "n " << n;
  }
}

TEST(BackendFusedOps, CpuAddRmsnormEqualsAddThenRmsnorm) {
  auto be = make_backend({"cpu", 2});
  const int rows = 3, cols = 320;
  const auto x0 = randn(size_t(rows) * cols, 20, 3.0f), r0 = randn(size_t(rows) * cols, 21), w = randn(size_t(cols), 22);
  std::vector<float> xf = x0, rf = r0, xp = x0, rp = r0, outp(rf.size());
  be->add_rmsnorm(xf.data(), rf.data(), w.data(), rf.data(), rows, cols, 1e-5f);  // out = r, as the decoder calls it
  be->add(xp.data(), rp.data(), int64_t(rows) * cols);
  be->rmsnorm(xp.data(), w.data(), outp.data(), rows, cols, 1e-5f);
  be->synchronize();
  EXPECT_TRUE(same_bits(xf, xp));
  EXPECT_TRUE(same_bits(rf, outp));
  EXPECT_FALSE(same_bits(rf, r0));  // it did write
}

TEST(BackendFusedOps, CpuRopeQkEqualsTwoRopes) {
  auto be = make_backend({"cpu", 2});
  const int rows = 2, n_head = 4, n_head_kv = 2, head_dim = 64, n_rot = 64;
  auto q = randn(size_t(rows) * n_head * head_dim, 30), k = randn(size_t(rows) * n_head_kv * head_dim, 31);
  auto q2 = q, k2 = k;
  const std::vector<int32_t> pos = {5, 900};
  std::vector<float> freq(size_t(n_rot / 2));
  for (size_t i = 0; i < freq.size(); ++i) freq[i] = 1.0f / std::pow(10000.0f, float(2 * i) / float(n_rot));
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox}) {
    be->rope_qk(q.data(), n_head, k.data(), n_head_kv, rows, head_dim, n_rot, pos.data(), freq.data(), 1.0f, style);
    be->rope(q2.data(), rows, n_head, head_dim, n_rot, pos.data(), freq.data(), 1.0f, style);
    be->rope(k2.data(), rows, n_head_kv, head_dim, n_rot, pos.data(), freq.data(), 1.0f, style);
    be->synchronize();
    EXPECT_TRUE(same_bits(q, q2));
    EXPECT_TRUE(same_bits(k, k2));
  }
}

}  // namespace
}  // namespace polykv
