// The MoE FFN (model/moe_ffn.h on the CPU backend, backend/cpu/moe_cpu.h) against a plain reference:
// per token, route by the router logits, run each chosen expert with dequantized rows in double,
// sum weighted, add the shared expert behind its sigmoid gate. Expert weights in several types,
// both gatings and activations, rows of a step grouped by expert; and a token's result is
// bit-identical whatever other rows share its step (the engine's batching rule).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/moe_cpu.h"
#include "model/moe_ffn.h"
#include "quant/quant.h"
#include "test_util.h"

namespace polykv {
namespace {

// A matrix of random values in `type` (the storage outlives the returned views).
struct Mat {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
  std::vector<float> f;  // the dequantized values [n_out][n_in]
};

Mat make_mat(DType type, int n_in, int n_out, uint32_t seed, float scale) {
  Mat m;
  const auto x = test::random_floats(size_t(n_in) * n_out, seed, scale);
  const size_t rb = row_bytes(type, n_in);
  m.bytes.resize(rb * size_t(n_out));
  m.f.resize(x.size());
  for (int o = 0; o < n_out; ++o) {
    quantize_row_ref(type, x.data() + size_t(o) * n_in, m.bytes.data() + size_t(o) * rb, n_in);
    dequantize_row_ref(type, m.bytes.data() + size_t(o) * rb, m.f.data() + size_t(o) * n_in, n_in);
  }
  m.w.type = type;
  m.w.data = m.bytes.data();
  m.w.n_in = n_in;
  m.w.n_out = n_out;
  m.w.row_stride = rb;
  return m;
}

std::vector<double> matvec(const Mat& m, const std::vector<double>& x) {
  std::vector<double> y(size_t(m.w.n_out), 0.0);
  for (int64_t o = 0; o < m.w.n_out; ++o)
    for (int64_t i = 0; i < m.w.n_in; ++i) y[size_t(o)] += double(m.f[size_t(o * m.w.n_in + i)]) * x[size_t(i)];
  return y;
}

struct MoeSetup {
  ModelConfig c;
  Mat router, sh_gate, sh_up, sh_down, sh_inp;
  std::vector<Mat> gate, up, down;
  std::vector<float> router_bias, gate_bias, up_bias, down_bias;
  DeviceMoeWeights dev;
};

// E = 64 (q4_0 / q8_0 need multiples of 32), F = 32 (expert), FS = 64 (shared).
void build(MoeSetup& s, DType type, bool gptoss, bool shared) {
  const int E = 64, F = 32, NE = 6, K = 2, FS = 64;
  ModelConfig& c = s.c;
  c.n_embd = E;
  c.moe.n_expert = NE;
  c.moe.n_used = K;
  c.moe.n_ff_exp = F;
  c.moe.n_ff_shexp = shared ? FS : 0;
  c.moe.gating = gptoss ? MoeGating::TopKSoftmax : MoeGating::SoftmaxTopK;
  c.moe.act = gptoss ? MoeActivation::SwiGLUClamped : MoeActivation::SwiGLU;
  c.moe.router_bias = c.moe.expert_bias = gptoss;
  uint32_t seed = 7;
  s.router = make_mat(DType::F32, E, NE, seed++, 1.0f);
  for (int e = 0; e < NE; ++e) {
    s.gate.push_back(make_mat(type, E, F, seed++, 0.8f));  // large enough that the clamp (7) is hit
    s.up.push_back(make_mat(type, E, F, seed++, 0.8f));
    s.down.push_back(make_mat(type, F, E, seed++, 0.3f));
  }
  if (gptoss) {
    s.router_bias = test::random_floats(NE, seed++);
    s.gate_bias = test::random_floats(size_t(NE) * F, seed++);
    s.up_bias = test::random_floats(size_t(NE) * F, seed++);
    s.down_bias = test::random_floats(size_t(NE) * E, seed++);
  }
  if (shared) {
    s.sh_gate = make_mat(type, E, FS, seed++, 0.3f);
    s.sh_up = make_mat(type, E, FS, seed++, 0.3f);
    s.sh_down = make_mat(type, FS, E, seed++, 0.3f);
    s.sh_inp = make_mat(DType::F32, E, 1, seed++, 0.5f);
  }
  DeviceMoeWeights& d = s.dev;
  d.router = s.router.w;
  d.router_bias = gptoss ? s.router_bias.data() : nullptr;
  d.experts.n_embd = E;
  d.experts.n_ff = F;
  for (int e = 0; e < NE; ++e) {
    d.experts.gate.push_back(s.gate[size_t(e)].w);
    d.experts.up.push_back(s.up[size_t(e)].w);
    d.experts.down.push_back(s.down[size_t(e)].w);
  }
  if (gptoss) {
    d.experts.gate_bias = s.gate_bias.data();
    d.experts.up_bias = s.up_bias.data();
    d.experts.down_bias = s.down_bias.data();
  }
  d.experts.act = c.moe.act;
  if (shared) {
    d.sh_gate = s.sh_gate.w;
    d.sh_up = s.sh_up.w;
    d.sh_down = s.sh_down.w;
    d.sh_gate_inp = s.sh_inp.w;
  }
}

// The plain reference for one row, in double.
std::vector<double> reference(const MoeSetup& s, const float* x) {
  const ModelConfig& c = s.c;
  const int E = c.n_embd, NE = c.moe.n_expert, K = c.moe.n_used, F = c.moe.n_ff_exp;
  const bool g = c.moe.act == MoeActivation::SwiGLUClamped;
  std::vector<double> xd(x, x + E), out(size_t(E), 0.0);
  std::vector<double> r = matvec(s.router, xd);
  if (!s.router_bias.empty())
    for (int e = 0; e < NE; ++e) r[size_t(e)] += s.router_bias[size_t(e)];
  std::vector<int> order(static_cast<size_t>(NE));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return r[size_t(a)] > r[size_t(b)]; });
  const double mx = r[size_t(order[0])];
  double den = 0;
  if (c.moe.gating == MoeGating::SoftmaxTopK)
    for (int e = 0; e < NE; ++e) den += std::exp(r[size_t(e)] - mx);
  else
    for (int j = 0; j < K; ++j) den += std::exp(r[size_t(order[size_t(j)])] - mx);
  for (int j = 0; j < K; ++j) {
    const int e = order[size_t(j)];
    const double w = std::exp(r[size_t(e)] - mx) / den;
    auto gt = matvec(s.gate[size_t(e)], xd), up = matvec(s.up[size_t(e)], xd);
    std::vector<double> a(static_cast<size_t>(F));
    for (int i = 0; i < F; ++i) {
      double gi = gt[size_t(i)], ui = up[size_t(i)];
      if (g) {
        gi = std::min(gi + s.gate_bias[size_t(e * F + i)], 7.0);
        ui = std::clamp(ui + s.up_bias[size_t(e * F + i)], -7.0, 7.0);
        a[size_t(i)] = (ui + 1) * gi / (1 + std::exp(-1.702 * gi));
      } else {
        a[size_t(i)] = gi / (1 + std::exp(-gi)) * ui;
      }
    }
    auto d = matvec(s.down[size_t(e)], a);
    for (int i = 0; i < E; ++i) out[size_t(i)] += w * (d[size_t(i)] + (g ? s.down_bias[size_t(e * E + i)] : 0.0));
  }
  if (c.moe.n_ff_shexp > 0) {
    auto gt = matvec(s.sh_gate, xd), up = matvec(s.sh_up, xd);
    for (size_t i = 0; i < gt.size(); ++i) gt[i] = gt[i] / (1 + std::exp(-gt[i])) * up[i];
    auto d = matvec(s.sh_down, gt);
    const double sg = 1 / (1 + std::exp(-matvec(s.sh_inp, xd)[0]));
    for (int i = 0; i < E; ++i) out[size_t(i)] += sg * d[size_t(i)];
  }
  return out;
}

struct Param {
  DType type;
  bool gptoss, shared;
};

class MoeFfn : public ::testing::TestWithParam<Param> {};

TEST_P(MoeFfn, MatchesPlainReferenceAndIsBatchInvariant) {
  const Param prm = GetParam();
  MoeSetup s;
  build(s, prm.type, prm.gptoss, prm.shared);
  CpuBackend be(2);
  MoeWorkspace ws(be);
  const int n = 13, E = s.c.n_embd;
  auto x = test::random_floats(size_t(n) * E, 99, 2.0f);
  std::vector<float> out(size_t(n) * E);
  ws.reserve(s.c, n);
  moe_ffn(be, s.c, s.dev, x.data(), n, ws, out.data());
  double worst = 0, scale = 0;
  for (int t = 0; t < n; ++t) {
    const auto ref = reference(s, x.data() + size_t(t) * E);
    for (int i = 0; i < E; ++i) {
      worst = std::max(worst, std::abs(ref[size_t(i)] - out[size_t(t) * E + i]));
      scale = std::max(scale, std::abs(ref[size_t(i)]));
    }
  }
  // The fast matmul rounds activations (q8 dot products for quantized weights): a relative bound.
  const double tol = prm.type == DType::F32 ? 1e-4 : 3e-2;
  EXPECT_LE(worst, tol * scale) << dtype_name(prm.type) << " worst " << worst << " scale " << scale;

  // Each row alone, in place (out aliasing x), gives the same bits as within the batch of 13.
  for (int t = 0; t < n; ++t) {
    std::vector<float> one(x.begin() + t * E, x.begin() + (t + 1) * E);
    moe_ffn(be, s.c, s.dev, one.data(), 1, ws, one.data());
    EXPECT_EQ(0, std::memcmp(one.data(), out.data() + size_t(t) * E, size_t(E) * sizeof(float))) << "row " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MoeFfn,
                         ::testing::Values(Param{DType::F32, false, false}, Param{DType::F32, false, true},
                                           Param{DType::F32, true, false}, Param{DType::F16, true, true},
                                           Param{DType::Q8_0, false, true}, Param{DType::Q4_0, true, false}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.type)) + (info.param.gptoss ? "_gptoss" : "_qwen") +
                                  (info.param.shared ? "_shared" : "");
                         });

// Decode-sized steps (at most kMoeExpertParallelRows rows per expert) run each expert on one thread
// (matmul_serial); larger ones and one-thread pools split every product over the threads. Both must give the
// same bits: a one-thread pool (always the split path) against a three-thread pool, for steps on both sides of
// the threshold, with biases and the clamped activation.
TEST(MoeExpertsCpu, ExpertParallelPathGivesTheSplitPathsBits) {
  for (const Param prm : {Param{DType::Q4_0, true, false}, Param{DType::F32, false, false}, Param{DType::Q8_0, false, false}}) {
    MoeSetup s;
    build(s, prm.type, prm.gptoss, prm.shared);
    const int E = s.c.n_embd, NE = s.c.moe.n_expert, K = s.c.moe.n_used;
    ThreadPool one(1), three(3);
    MoeScratch s1, s3;
    for (int n : {1, 2, 5, 13, 40}) {
      const auto x = test::random_floats(size_t(n) * E, uint32_t(50 + n), 2.0f);
      std::vector<int32_t> ids(size_t(n) * K);
      std::vector<float> wts(size_t(n) * K);
      for (int t = 0; t < n; ++t)
        for (int j = 0; j < K; ++j) {
          ids[size_t(t * K + j)] = (t * 5 + j * 3 + n) % NE;  // distinct within a token (K = 2, 3 coprime to 6)
          wts[size_t(t * K + j)] = 0.25f + 0.5f * float(j);
        }
      std::vector<float> a(size_t(n) * E), b(size_t(n) * E, -1.0f);
      moe_experts_cpu(s.dev.experts, x.data(), ids.data(), wts.data(), n, K, a.data(), one, s1);
      moe_experts_cpu(s.dev.experts, x.data(), ids.data(), wts.data(), n, K, b.data(), three, s3);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << dtype_name(prm.type) << " n " << n;
    }
  }
}

TEST(MoeRoute, TopKOrderAndWeights) {
  // 2 rows, 5 experts, k = 3; ties go to the lower index.
  const float logits[] = {0.5f, 2.0f, 1.0f, 2.0f, -1.0f, 3.0f, 0.0f, 0.0f, 1.0f, -2.0f};
  int32_t ids[6];
  float w[6];
  moe_route_cpu(logits, 2, MoeRouting{5, 3, MoeGating::TopKSoftmax}, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  EXPECT_EQ(ids[2], 2);
  EXPECT_EQ(ids[3], 0);
  EXPECT_EQ(ids[4], 3);
  EXPECT_EQ(ids[5], 1);
  const double den = 2 * std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(w[0], std::exp(2.0) / den, 1e-6);
  EXPECT_NEAR(w[2], std::exp(1.0) / den, 1e-6);
  float w2[6];
  moe_route_cpu(logits, 2, MoeRouting{5, 3, MoeGating::SoftmaxTopK}, ids, w2);  // not renormalised
  const double all = std::exp(0.5) + 2 * std::exp(2.0) + std::exp(1.0) + std::exp(-1.0);
  EXPECT_NEAR(w2[0], std::exp(2.0) / all, 1e-6);
}

}  // namespace
}  // namespace polykv
