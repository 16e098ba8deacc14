// The CUDA backend's mixture-of-experts ops against the CPU backend (the reference), on the GPU:
// moe_route per gating (ids exact, weights to float rounding), add_sigmoid_gated, and moe_experts for
// q4_0, q8_0, q4_K, mxfp4 and f16 experts (with and without biases, both activations), n = 1, 3, 8,
// 37 and 300 rows, k = 1, 2, 4 and 8, awkward n_ff; a row alone and in a batch give the same bits;
// out aliasing x. And the MXFP4 mat-vec / prefill matmul against matmul_ref. Every failure prints the
// case, the first bad index, got / expected and the NMSE.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/moe_cuda.h"
#include "core/dtype.h"
#include "backend/cuda/matmul_cuda.h"
#include "cuda_test_util.h"
#include "matmul_cuda_test_util.h"
#include "quant/mxfp4.h"
#include "quant/quant.h"

namespace polykv {
namespace {

std::vector<float> normal(size_t n, uint32_t seed, float sd) { return cuda_test::normal_floats(n, seed, sd); }

using Dev = cuda_test::BackendBuf;

template <class T>
std::vector<T> down(Backend& be, const void* p, size_t n) {
  return cuda_test::backend_download<T>(be, p, n);
}

using cuda_test::Err;
inline Err compare(const std::vector<float>& got, const std::vector<float>& want, double tol_rel) {
  return cuda_test::compare_rms(got, want, tol_rel);
}

TEST(MoeCuda, RouteMatchesTheCpu) {
  POLYKV_REQUIRE_GPU();
  auto gpu = make_backend({"cuda", 0});
  CpuBackend cpu(1);
  for (int ne : {8, 32, 100, 128}) {
    for (int k : {1, 2, 4, 8}) {
      for (MoeGating g : {MoeGating::SoftmaxTopK, MoeGating::SoftmaxTopKRenorm, MoeGating::TopKSoftmax}) {
        const int n = 37;
        auto logits = normal(size_t(n) * ne, uint32_t(ne * 100 + k * 10 + int(g)), 2.0f);
        for (int e = 0; e < ne; ++e) logits[size_t(ne + e)] = float(e % 3);  // ties in row 1
        const MoeRouting r{ne, k, g};
        std::vector<int32_t> ids(size_t(n) * k);
        std::vector<float> w(ids.size());
        cpu.moe_route(logits.data(), n, r, ids.data(), w.data());
        Dev dl(*gpu, logits.data(), logits.size() * 4), di(*gpu, ids.size() * 4), dw(*gpu, w.size() * 4);
        gpu->moe_route(dl.as<float>(), n, r, di.as<int32_t>(), dw.as<float>());
        const auto gi = down<int32_t>(*gpu, di.p, ids.size());
        const auto gw = down<float>(*gpu, dw.p, w.size());
        for (size_t i = 0; i < ids.size(); ++i) {
          ASSERT_EQ(gi[i], ids[i]) << "ne " << ne << " k " << k << " gating " << int(g) << " row " << i / k
                                   << " slot " << i % k;
          ASSERT_NEAR(gw[i], w[i], 4e-7f * std::fabs(w[i]) + 1e-30f)
              << "ne " << ne << " k " << k << " gating " << int(g) << " row " << i / k << " slot " << i % k;
        }
      }
    }
  }
}

// The picks by ranks across a block (moe_route_rank_kernel, n_expert <= 256) against route_row_warp's rounds
// (set_moe_rank_route(0)): the same ids and the same weight bits, on rows with ties, all-equal logits, signed
// zeros, infinities and a NaN (that row takes the rounds); n_expert 300 keeps the rounds either way.
TEST(MoeCuda, RouteByRanksGivesTheRoundsBits) {
  POLYKV_REQUIRE_GPU();
  auto gpu = make_backend({"cuda", 0});
  struct Restore {
    ~Restore() { cuda::set_moe_rank_route(-1); }
  } restore;
  for (int ne : {4, 8, 32, 100, 128, 129, 256, 300}) {
    for (int k : {1, 2, 4, 8}) {
      if (k > ne) continue;
      for (MoeGating g : {MoeGating::SoftmaxTopK, MoeGating::SoftmaxTopKRenorm}) {
        const int n = 7;
        auto logits = normal(size_t(n) * ne, uint32_t(ne * 31 + k * 7 + int(g)), 2.0f);
        float* row = logits.data();
        for (int e = 0; e < ne; ++e) row[ne + e] = float(e % 3);                      // row 1: ties
        for (int e = 0; e < ne; ++e) row[2 * ne + e] = 0.5f;                          // row 2: all equal
        for (int e = 0; e < ne; ++e) row[3 * ne + e] = e % 2 ? -0.0f : 0.0f;          // row 3: signed zeros
        row[4 * ne + ne / 2] = std::nanf("");                                         // row 4: a NaN
        row[5 * ne] = INFINITY;                                                       // row 5: infinities
        row[5 * ne + ne - 1] = -INFINITY;
        for (int e = 0; e < ne; ++e) row[6 * ne + e] = float((e * 7) % 5) * 0.25f - 0.5f;  // row 6: ties, spread
        const MoeRouting r{ne, k, g};
        std::vector<int32_t> ids[2];
        std::vector<float> w[2];
        for (int on = 0; on < 2; ++on) {
          cuda::set_moe_rank_route(on);
          Dev dl(*gpu, logits.data(), logits.size() * 4), di(*gpu, size_t(n) * k * 4), dw(*gpu, size_t(n) * k * 4);
          gpu->moe_route(dl.as<float>(), n, r, di.as<int32_t>(), dw.as<float>());
          ids[on] = down<int32_t>(*gpu, di.p, size_t(n) * k);
          w[on] = down<float>(*gpu, dw.p, size_t(n) * k);
        }
        for (size_t i = 0; i < ids[0].size(); ++i) {
          ASSERT_EQ(ids[1][i], ids[0][i]) << "ne " << ne << " k " << k << " gating " << int(g) << " row " << i / k
                                          << " slot " << i % k;
          ASSERT_EQ(std::memcmp(&w[1][i], &w[0][i], 4), 0) << "ne " << ne << " k " << k << " gating " << int(g)
              << " row " << i / k << " slot " << i % k << ": " << w[1][i] << " vs " << w[0][i];
        }
      }
    }
  }
}

TEST(MoeCuda, AddSigmoidGatedMatchesTheCpu) {
  POLYKV_REQUIRE_GPU();
  auto gpu = make_backend({"cuda", 0});
  CpuBackend cpu(1);
  const int rows = 13, cols = 131;
  auto x = normal(size_t(rows) * cols, 1, 1.0f), y = normal(x.size(), 2, 1.0f), g = normal(size_t(rows), 3, 3.0f);
  Dev dx(*gpu, x.data(), x.size() * 4), dy(*gpu, y.data(), y.size() * 4), dg(*gpu, g.data(), g.size() * 4);
  cpu.add_sigmoid_gated(x.data(), y.data(), g.data(), rows, cols);
  gpu->add_sigmoid_gated(dx.as<float>(), dy.as<float>(), dg.as<float>(), rows, cols);
  const auto got = down<float>(*gpu, dx.p, x.size());
  const Err e = compare(got, x, 1e-6);
  EXPECT_LT(e.first_bad, 0) << "first bad " << e.first_bad << ": " << e.got << " vs " << e.want;
}

// One expert configuration: the weight type, shapes, biases and activation.
struct ExpertCase {
  DType type;
  int n_embd, n_ff, n_expert;
  bool biases;
  MoeActivation act;
};

std::string name(const ExpertCase& c) {
  return std::string(dtype_name(c.type)) + " E" + std::to_string(c.n_embd) + " F" + std::to_string(c.n_ff) + " x" +
         std::to_string(c.n_expert) + (c.biases ? " biases" : "") +
         (c.act == MoeActivation::SwiGLUClamped ? " clamped" : "");
}

// Host weights of one case: three stacks of n_expert slices, quantized from normal floats.
struct HostExperts {
  std::vector<uint8_t> gate, up, down;
  std::vector<float> bg, bu, bd;
  MoeExperts slices;  // host matrices
};

std::vector<uint8_t> stack(DType t, int64_t n_in, int64_t n_out, int ne, uint32_t seed, float sd) {
  const size_t rb = row_bytes(t, n_in);
  std::vector<uint8_t> out(rb * size_t(n_out) * size_t(ne) + 16);
  for (int64_t r = 0; r < n_out * ne; ++r) {
    const auto f = normal(size_t(n_in), seed * 7919u + uint32_t(r), sd);
    quantize_row_ref(t, f.data(), out.data() + size_t(r) * rb, n_in);
  }
  return out;
}

void make_host(const ExpertCase& c, HostExperts& h) {
  h.gate = stack(c.type, c.n_embd, c.n_ff, c.n_expert, 11, 0.1f);
  h.up = stack(c.type, c.n_embd, c.n_ff, c.n_expert, 12, 0.1f);
  h.down = stack(c.type, c.n_ff, c.n_embd, c.n_expert, 13, 0.1f);
  auto slices = [&](const std::vector<uint8_t>& s, int64_t n_in, int64_t n_out) {
    std::vector<WeightMatrix> v;
    const size_t rb = row_bytes(c.type, n_in);
    for (int e = 0; e < c.n_expert; ++e) {
      WeightMatrix w;
      w.type = c.type;
      w.data = s.data() + size_t(e) * rb * size_t(n_out);
      w.n_in = n_in;
      w.n_out = n_out;
      w.row_stride = rb;
      v.push_back(w);
    }
    return v;
  };
  h.slices.n_embd = c.n_embd;
  h.slices.n_ff = c.n_ff;
  h.slices.gate = slices(h.gate, c.n_embd, c.n_ff);
  h.slices.up = slices(h.up, c.n_embd, c.n_ff);
  h.slices.down = slices(h.down, c.n_ff, c.n_embd);
  h.slices.act = c.act;
  if (c.biases) {
    h.bg = normal(size_t(c.n_expert) * c.n_ff, 21, 0.5f);
    h.bu = normal(size_t(c.n_expert) * c.n_ff, 22, 0.5f);
    h.bd = normal(size_t(c.n_expert) * c.n_embd, 23, 0.5f);
    h.slices.gate_bias = h.bg.data();
    h.slices.up_bias = h.bu.data();
    h.slices.down_bias = h.bd.data();
  }
}

// Random routing: k distinct experts per row; weights positive, summing to 1.
void make_routing(int n, int k, int ne, uint32_t seed, std::vector<int32_t>& ids, std::vector<float>& w) {
  std::mt19937 rng(seed);
  ids.assign(size_t(n) * k, 0);
  w.assign(ids.size(), 0.0f);
  for (int t = 0; t < n; ++t) {
    std::vector<int32_t> all(static_cast<size_t>(ne));
    for (int e = 0; e < ne; ++e) all[size_t(e)] = e;
    std::shuffle(all.begin(), all.end(), rng);
    float s = 0;
    for (int j = 0; j < k; ++j) {
      ids[size_t(t * k + j)] = all[size_t(j)];
      s += (w[size_t(t * k + j)] = 0.1f + float(rng() % 1000) / 1000.0f);
    }
    for (int j = 0; j < k; ++j) w[size_t(t * k + j)] /= s;
  }
}

class MoeExpertsCuda : public ::testing::TestWithParam<ExpertCase> {};

TEST_P(MoeExpertsCuda, MatchesTheCpuAndIsBatchInvariant) {
  POLYKV_REQUIRE_GPU();
  const ExpertCase c = GetParam();
  auto gpu = make_backend({"cuda", 0});
  CpuBackend cpu(2);
  HostExperts h;
  make_host(c, h);
  MoeExperts dw;  // device copies
  dw.n_embd = c.n_embd;
  dw.n_ff = c.n_ff;
  dw.gate = gpu->upload_experts(h.slices.gate);
  dw.up = gpu->upload_experts(h.slices.up);
  dw.down = gpu->upload_experts(h.slices.down);
  dw.act = c.act;
  if (c.biases) {
    dw.gate_bias = gpu->upload_floats(h.bg);
    dw.up_bias = gpu->upload_floats(h.bu);
    dw.down_bias = gpu->upload_floats(h.bd);
  }
  // The CPU's own copies (it may pack them).
  MoeExperts cw = h.slices;
  cw.gate = cpu.upload_experts(h.slices.gate);
  cw.up = cpu.upload_experts(h.slices.up);
  cw.down = cpu.upload_experts(h.slices.down);
  // 8-bit activations on both sides (different rounding details) for quantized weights; f16 is
  // f32 math on the GPU.
  // k-quants: the CPU quantizes activations to Q8_K (one scale per 256 values), the GPU per 32 values:
  // on the H200 (2026-12-01e) every GPU path (v1, v2, f16 tensor cores) measured NMSE 3-4e-4 against
  // the CPU for q4_K / q6_K while q4_0 / q8_0 / mxfp4 (Q8_32 on both sides) agree to 1e-13; the
  // exact-layer comparison is tests/cuda/moe_cuda_v2_test.cpp's. Hence the looser k-quant bounds.
  const bool kquant = c.type == DType::Q4_K || c.type == DType::Q6_K;
  const double nmse_bound = c.type == DType::F16 ? 1e-6 : kquant ? 1e-3 : 2e-4;
  const double first_bad_tol = kquant ? 0.25 : 0.05;
  // Row t's input and routing depend on t only; every third row takes experts 0..k-1 (so that they
  // get many rows), the others random distinct experts.
  auto row_data = [&](int t, int k, std::vector<float>& x, std::vector<int32_t>& ids, std::vector<float>& wts) {
    const auto xr = normal(size_t(c.n_embd), 1000u + uint32_t(t), 1.0f);
    x.insert(x.end(), xr.begin(), xr.end());
    std::vector<int32_t> i1;
    std::vector<float> w1;
    make_routing(1, k, c.n_expert, 77u + uint32_t(t) * 13u, i1, w1);
    if (t % 3 == 0) std::iota(i1.begin(), i1.end(), 0);
    ids.insert(ids.end(), i1.begin(), i1.end());
    wts.insert(wts.end(), w1.begin(), w1.end());
  };
  auto run_gpu = [&](const std::vector<float>& x, const std::vector<int32_t>& ids, const std::vector<float>& wts, int n,
                     int k) {
    Dev dx(*gpu, x.data(), x.size() * 4), di(*gpu, ids.data(), ids.size() * 4), dwt(*gpu, wts.data(), wts.size() * 4),
        dout(*gpu, x.size() * 4);
    gpu->moe_experts(dw, dx.as<float>(), di.as<int32_t>(), dwt.as<float>(), n, k, dout.as<float>());
    auto got = down<float>(*gpu, dout.p, x.size());
    if (n == 8 || n == 37) {  // out aliasing x: the same bits
      gpu->moe_experts(dw, dx.as<float>(), di.as<int32_t>(), dwt.as<float>(), n, k, dx.as<float>());
      const auto aliased = down<float>(*gpu, dx.p, x.size());
      EXPECT_EQ(std::memcmp(aliased.data(), got.data(), got.size() * 4), 0) << "out aliasing x differs, n " << n;
    }
    return got;
  };
  for (int k : {1, 2, 4, 8}) {
    if (k > c.n_expert) continue;
    std::vector<std::vector<float>> alone;  // rows 0..2, each run alone (n = 1)
    for (int t = 0; t < 3; ++t) {
      std::vector<float> x, w1;
      std::vector<int32_t> i1;
      row_data(t, k, x, i1, w1);
      alone.push_back(run_gpu(x, i1, w1, 1, k));
    }
    for (int n : {1, 3, 8, 37, 300}) {
      SCOPED_TRACE(name(c) + " n " + std::to_string(n) + " k " + std::to_string(k));
      std::vector<float> x, wts;
      std::vector<int32_t> ids;
      for (int t = 0; t < n; ++t) row_data(t, k, x, ids, wts);
      std::vector<float> want(x.size());
      cpu.moe_experts(cw, x.data(), ids.data(), wts.data(), n, k, want.data());
      const auto got = run_gpu(x, ids, wts, n, k);
      // The v2 tensor-core path (split experts, many tokens per expert) has f16 activations, the
      // CPU 8-bit ones: their difference is the CPU's own error (NMSE 1.3e-4 against the exact layer
      // for q4_0), measured 1.1-1.7e-4 on the H200; hence a wider bound on that path.
      const bool tc = dw.gate[0].layout == WeightLayout::CudaSplit && cuda::moe_uses_mma(n, k, c.n_expert);
      const double bound = tc ? std::max(nmse_bound, 5e-4) : nmse_bound;
      const Err e = compare(got, want, tc ? std::max(first_bad_tol, 0.15) : first_bad_tol);
      std::printf("%s n %d k %d%s: NMSE %.3g\n", name(c).c_str(), n, k, tc ? " (tensor cores)" : "", e.nmse);
      EXPECT_LT(e.nmse, bound) << "first bad index " << e.first_bad << " (row " << e.first_bad / c.n_embd
                                    << "): got " << e.got << " want " << e.want;
      EXPECT_LT(e.first_bad, 0) << "first bad index " << e.first_bad << " (row " << e.first_bad / c.n_embd
                                << "): got " << e.got << " want " << e.want << ", NMSE " << e.nmse;
      // Rows 0..2 are the same bits alone and in every batch of the same path (with
      // POLYKV_CUDA_MOE_KERNEL=v2, split-layout experts take the tensor-core path from ~2 tokens per
      // expert on: other bits, like the dense mmq boundary).
      const bool same_path = dw.gate[0].layout != WeightLayout::CudaSplit ||
                             cuda::moe_uses_mma(n, k, c.n_expert) == cuda::moe_uses_mma(1, k, c.n_expert);
      for (int t = 0; t < (same_path ? std::min(n, 3) : 0); ++t)
        for (int i = 0; i < c.n_embd; ++i) {
          const float a = got[size_t(t) * c.n_embd + i], b = alone[size_t(t)][size_t(i)];
          ASSERT_EQ(std::memcmp(&a, &b, 4), 0)
              << "row " << t << " value " << i << " in a batch of " << n << ": " << a << ", alone: " << b;
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, MoeExpertsCuda,
    ::testing::Values(ExpertCase{DType::Q4_0, 256, 96, 16, false, MoeActivation::SwiGLU},
                      ExpertCase{DType::Q8_0, 160, 224, 12, true, MoeActivation::SwiGLUClamped},
                      ExpertCase{DType::Q4_K, 512, 768, 16, false, MoeActivation::SwiGLU},
                      ExpertCase{DType::Q4_K, 256, 512, 8, true, MoeActivation::SwiGLUClamped},
                      ExpertCase{DType::MXFP4, 352, 288, 8, true, MoeActivation::SwiGLUClamped},
                      ExpertCase{DType::MXFP4, 96, 32, 16, false, MoeActivation::SwiGLU},
                      ExpertCase{DType::F16, 136, 24, 8, false, MoeActivation::SwiGLU},
                      ExpertCase{DType::F16, 128, 44, 9, true, MoeActivation::SwiGLUClamped}),
    [](const auto& info) {
      std::string s = name(info.param);
      for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

// The MXFP4 mat-vec (1..8 columns, direct and stream kernels) and prefill matmul (37 columns: tiles
// dequantized to f16 + cuBLAS) against the scalar reference matmul_ref (double accumulation).
// The MXFP4 matmul against matmul_ref (exact activations, double sums), element by element within the
// rigorous bound of what the path rounds: the mat-vec (n <= 8) multiplies 8-bit activations, so
// |y - matmul_ref| <= sum_i |w_i| amax_32(i) / 254 (1 % slack) + f32 rounding, and y equals the exact dot
// with those activations (cuda_test::reference, the host twin of the device's quantizer) within f32
// rounding (2e-5 sum_i |w_i x_i|), which pins the E8M0 scales and the e2m1 table; the prefill (n = 37:
// x and the weights in f16 tiles, cuBLAS) within 1.2e-3 sum_i |w_i x_i| (x's f16 rounding, 2^-11).
// NMSE <= 1e-4 only over >= 256 outputs: the 1e-4 bound held over 1 or 5 outputs failed on the H200
// (2026-12-01d: NMSE 1.3e-4..4.1e-4 at n_out 1) because a single dot's relative error has no averaging
// (a dot that cancels has a large one); the 8-bit activations' NMSE is ~3e-5 on average.
TEST(MxfpCuda, MatmulMatchesTheScalarReference) {
  POLYKV_REQUIRE_GPU();
  auto gpu = make_backend({"cuda", 0});
  for (int64_t n_in : {32, 96, 2048, 2880}) {
    for (int64_t n_out : {1, 7, 64, 130}) {
      std::vector<uint8_t> rows(row_bytes(DType::MXFP4, n_in) * size_t(n_out) + 16);
      for (int64_t r = 0; r < n_out; ++r) {
        const auto f = normal(size_t(n_in), uint32_t(r + 5 * n_in), 0.3f);
        quantize_mxfp4_row(f.data(), rows.data() + size_t(r) * row_bytes(DType::MXFP4, n_in), n_in);
      }
      WeightMatrix hw;
      hw.type = DType::MXFP4;
      hw.data = rows.data();
      hw.n_in = n_in;
      hw.n_out = n_out;
      hw.row_stride = row_bytes(DType::MXFP4, n_in);
      const WeightMatrix dwm = gpu->upload_matrix(hw);
      for (int n : {1, 2, 3, 5, 8, 37}) {
        const std::string what = "n_in " + std::to_string(n_in) + " n_out " + std::to_string(n_out) + " n " +
                                 std::to_string(n);
        const auto x = normal(size_t(n) * n_in, uint32_t(n * 31 + n_in), 1.0f);
        std::vector<float> want(size_t(n) * n_out);
        matmul_ref(hw, x.data(), want.data(), n);
        const cuda_test::Reference ref = cuda_test::reference(hw, x, n);
        Dev dx(*gpu, x.data(), x.size() * 4), dy(*gpu, want.size() * 4);
        gpu->matmul(dwm, dx.as<float>(), dy.as<float>(), n);
        const auto got = down<float>(*gpu, dy.p, want.size());
        const bool matvec = n <= cuda::kMatvecMaxCols;
        int bad = 0;
        for (size_t i = 0; i < got.size() && bad < 3; ++i) {
          const double tol_f32 = 2e-5 * ref.abs_dot[i] + 1e-30;
          const double err = std::fabs(double(got[i]) - want[i]);
          const double bound = matvec ? 1.01 * ref.act_err[i] + tol_f32 : 1.2e-3 * ref.abs_dot[i] + 1e-30;
          if (!(err <= bound)) {
            ++bad;
            ADD_FAILURE() << what << ": y[" << i / size_t(n_out) << "][" << i % size_t(n_out) << "] = " << got[i]
                          << ", matmul_ref " << want[i] << ", |diff| " << err << " > bound " << bound
                          << (matvec ? " (8-bit activations)" : " (f16 prefill)");
          }
          if (matvec && !(std::fabs(double(got[i]) - ref.exact_q[i]) <= tol_f32)) {
            ++bad;
            ADD_FAILURE() << what << ": y[" << i / size_t(n_out) << "][" << i % size_t(n_out) << "] = " << got[i]
                          << ", the exact dot with the 8-bit activations " << ref.exact_q[i] << " (tol " << tol_f32
                          << "): the decode of the weights or the activations differ";
          }
        }
        const Err e = compare(got, want, 0.05);
        if (got.size() >= 256)
          EXPECT_LT(e.nmse, 1e-4) << what << ": first element off by 5 % of the RMS: " << e.first_bad << " got "
                                  << e.got << " want " << e.want;
      }
    }
  }
}

}  // namespace
}  // namespace polykv
