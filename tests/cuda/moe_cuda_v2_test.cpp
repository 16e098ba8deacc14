// GPU tests of the v2 expert kernels (backend/cuda/moe_cuda_v2.cu; skip without a GPU): experts
// uploaded in the split layout (set_moe_kernel(2)) for q4_0, q8_0, q4_K, q6_K (and q4_K gate/up with
// q6_K down), mxfp4 (stays on the v1 kernels under v2: checked to still work), n = 1, 3, 17, 64 tokens
// (and 300), many experts with zero tokens:
//  - the split mat-vec path (tensor cores off) gives the SAME BITS as the v1 kernels on ggml rows
//    (moe_cuda_v2.cuh: same units, same order), and is within its 8-bit activations of the exact
//    layer (dequantized weights, double sums; NMSE <= 5e-4, no element off by 25 % of the RMS; the CPU
//    backend is no reference for k-quants: its Q8_K activations have one scale per 256 values);
//  - the tensor-core path (forced for every n) is within f16 rounding of the exact layer (NMSE <= 1e-5,
//    no element off by 3 % of the RMS) and is batch invariant within itself
//    (rows 0..2 alone in a 1-row step on that path = in every step).
// Every failure prints the case, path, first bad index (row), got / want and the NMSE.
// MoeCudaBench.DISABLED_Qwen3Layer times one MoE layer of qwen3-30b-a3b's shape, v1 against v2.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/matmul_cuda_split.h"
#include "backend/cuda/moe_cuda.h"
#include "core/dtype.h"
#include "cuda_test_util.h"
#include "matmul_cuda_test_util.h"
#include "quant/quant.h"

namespace polykv {
namespace {

std::vector<float> normal(size_t n, uint32_t seed, float sd) { return cuda_test::normal_floats(n, seed, sd); }

using Dev = cuda_test::BackendBuf;

std::vector<float> down_f(Backend& be, const void* p, size_t n) { return cuda_test::backend_download<float>(be, p, n); }

using cuda_test::Err;
inline Err compare(const std::vector<float>& got, const std::vector<float>& want, double tol_rel) {
  return cuda_test::compare_rms(got, want, tol_rel);
}

// Restores the switches at scope end.
struct SwitchScope {
  ~SwitchScope() {
    cuda::set_moe_kernel(0);
    cuda::set_moe_mma_min(0);
    cuda::set_moe_decode_fused(-1);
    cuda::set_moe_route_in_launch(-1);
    cuda::set_moe_x_acts(-1);
    cuda::set_moe_down_cap(-1);
    cuda::set_moe_rank_route(-1);
  }
};

struct Case {
  DType gate_type, down_type;
  int n_embd, n_ff, n_expert, k;
  bool biases;
  MoeActivation act;
};

std::string name(const Case& c) {
  return std::string(dtype_name(c.gate_type)) + "/" + dtype_name(c.down_type) + " E" + std::to_string(c.n_embd) +
         " F" + std::to_string(c.n_ff) + " x" + std::to_string(c.n_expert) + " k" + std::to_string(c.k) +
         (c.biases ? " biases" : "") + (c.act == MoeActivation::SwiGLUClamped ? " clamped" : "");
}

// A stack of ne experts [n_out][n_in], quantized from normal floats (or random bytes with small
// scales when `random_bytes`: fast, for the benchmark).
struct Stack {
  std::vector<uint8_t> bytes;
  std::vector<WeightMatrix> slices;
};

Stack make_stack(DType t, int64_t n_in, int64_t n_out, int ne, uint32_t seed, bool random_bytes) {
  Stack s;
  const size_t rb = row_bytes(t, n_in);
  if (random_bytes) {
    auto w = cuda_test::make_weights(t, n_in, n_out * ne, seed, false);
    s.bytes = std::move(w.bytes);
  } else {
    s.bytes.assign(rb * size_t(n_out) * size_t(ne) + 16, 0);
    for (int64_t r = 0; r < n_out * ne; ++r) {
      const auto f = normal(size_t(n_in), seed * 7919u + uint32_t(r), 0.1f);
      quantize_row_ref(t, f.data(), s.bytes.data() + size_t(r) * rb, n_in);
    }
  }
  for (int e = 0; e < ne; ++e) {
    WeightMatrix w;
    w.type = t;
    w.data = s.bytes.data() + size_t(e) * rb * size_t(n_out);
    w.n_in = n_in;
    w.n_out = n_out;
    w.row_stride = rb;
    s.slices.push_back(w);
  }
  return s;
}

struct HostLayer {
  Stack gate, up, down;
  std::vector<float> bg, bu, bd;
  MoeExperts host;
};

void make_layer(const Case& c, HostLayer& h, bool random_bytes) {
  h.gate = make_stack(c.gate_type, c.n_embd, c.n_ff, c.n_expert, 11, random_bytes);
  h.up = make_stack(c.gate_type, c.n_embd, c.n_ff, c.n_expert, 12, random_bytes);
  h.down = make_stack(c.down_type, c.n_ff, c.n_embd, c.n_expert, 13, random_bytes);
  h.host.n_embd = c.n_embd;
  h.host.n_ff = c.n_ff;
  h.host.gate = h.gate.slices;
  h.host.up = h.up.slices;
  h.host.down = h.down.slices;
  h.host.act = c.act;
  if (c.biases) {
    h.bg = normal(size_t(c.n_expert) * c.n_ff, 21, 0.5f);
    h.bu = normal(size_t(c.n_expert) * c.n_ff, 22, 0.5f);
    h.bd = normal(size_t(c.n_expert) * c.n_embd, 23, 0.5f);
    h.host.gate_bias = h.bg.data();
    h.host.up_bias = h.bu.data();
    h.host.down_bias = h.bd.data();
  }
}

// The layer on a backend (the current switch decides the layout of the CUDA upload).
MoeExperts upload_layer(Backend& be, const HostLayer& h) {
  MoeExperts d = h.host;
  d.gate = be.upload_experts(h.host.gate);
  d.up = be.upload_experts(h.host.up);
  d.down = be.upload_experts(h.host.down);
  if (h.host.gate_bias) {
    d.gate_bias = be.upload_floats(h.bg);
    d.up_bias = be.upload_floats(h.bu);
    d.down_bias = be.upload_floats(h.bd);
  }
  return d;
}

// Row t's routing: k distinct experts among the first `used` (so that the others get zero tokens);
// every third row takes experts 0..k-1 (many tokens for them).
void route_row(int t, int k, int used, std::vector<int32_t>& ids, std::vector<float>& w) {
  std::mt19937 rng(77u + uint32_t(t) * 13u);
  std::vector<int32_t> all(size_t(used), 0);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  if (t % 3 == 0) std::iota(all.begin(), all.begin() + k, 0);
  float s = 0;
  std::vector<float> wr(static_cast<size_t>(k));
  for (int j = 0; j < k; ++j) s += (wr[size_t(j)] = 0.1f + float(rng() % 1000) / 1000.0f);
  for (int j = 0; j < k; ++j) {
    ids.push_back(all[size_t(j)]);
    w.push_back(wr[size_t(j)] / s);
  }
}

std::vector<float> run(Backend& be, const MoeExperts& w, const std::vector<float>& x, const std::vector<int32_t>& ids,
                       const std::vector<float>& wts, int n, int k) {
  Dev dx(be, x.data(), x.size() * 4), di(be, ids.data(), ids.size() * 4), dw(be, wts.data(), wts.size() * 4),
      dout(be, x.size() * 4);
  be.moe_experts(w, dx.as<float>(), di.as<int32_t>(), dw.as<float>(), n, k, dout.as<float>());
  return down_f(be, dout.p, x.size());
}

// The exact layer: weights dequantized (dequantize_row_ref), x as given, double sums and activation,
// biases, the slot sum in double. The GPU's deviations are its activations' rounding only: 8-bit
// per 32 values (mat-vec) or f16 (tensor cores; weights to f16 too).
struct ExactLayer {
  std::vector<float> g, u, d;  // [ne][n_out][n_in] dequantized
  const Case* c = nullptr;
  const HostLayer* h = nullptr;
};

std::vector<float> dequant_stack(const Stack& st) {
  const WeightMatrix& w0 = st.slices[0];
  std::vector<float> out(st.slices.size() * size_t(w0.n_out) * size_t(w0.n_in));
  for (size_t e = 0; e < st.slices.size(); ++e)
    for (int64_t o = 0; o < w0.n_out; ++o)
      dequantize_row_ref(w0.type, static_cast<const uint8_t*>(st.slices[e].data) + size_t(o) * w0.row_stride,
                         out.data() + (e * size_t(w0.n_out) + size_t(o)) * size_t(w0.n_in), w0.n_in);
  return out;
}

std::vector<float> exact_layer(const ExactLayer& L, const std::vector<float>& x, const std::vector<int32_t>& ids,
                               const std::vector<float>& wts, int n) {
  const Case& c = *L.c;
  const int E = c.n_embd, F = c.n_ff, k = c.k;
  std::vector<float> out(size_t(n) * size_t(E));
  std::vector<double> hbuf(static_cast<size_t>(F)), acc(static_cast<size_t>(E));
  for (int t = 0; t < n; ++t) {
    const float* xt = x.data() + size_t(t) * E;
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int j = 0; j < k; ++j) {
      const int e = ids[size_t(t * k + j)];
      for (int f = 0; f < F; ++f) {
        const float* gr = L.g.data() + (size_t(e) * F + f) * size_t(E);
        const float* ur = L.u.data() + (size_t(e) * F + f) * size_t(E);
        double g = 0, u = 0;
        for (int i = 0; i < E; ++i) {
          g += double(gr[i]) * xt[i];
          u += double(ur[i]) * xt[i];
        }
        if (c.biases) {
          g += L.h->bg[size_t(e) * F + f];
          u += L.h->bu[size_t(e) * F + f];
        }
        if (c.act == MoeActivation::SwiGLUClamped) {
          const double lim = L.h->host.limit, alpha = L.h->host.alpha;
          const double gc = std::min(g, lim), uc = std::min(std::max(u, -lim), lim);
          hbuf[size_t(f)] = (uc + 1.0) * gc / (1.0 + std::exp(-alpha * gc));
        } else {
          hbuf[size_t(f)] = g / (1.0 + std::exp(-g)) * u;
        }
      }
      for (int o = 0; o < E; ++o) {
        const float* dr = L.d.data() + (size_t(e) * E + o) * size_t(F);
        double y = 0;
        for (int f = 0; f < F; ++f) y += double(dr[f]) * hbuf[size_t(f)];
        if (c.biases) y += L.h->bd[size_t(e) * E + o];
        acc[size_t(o)] += double(wts[size_t(t * k + j)]) * y;
      }
    }
    for (int o = 0; o < E; ++o) out[size_t(t) * E + o] = float(acc[size_t(o)]);
  }
  return out;
}

// q4_0, q8_0, q4_K, q5_K (not with POLYKV_CUDA_SPLIT_Q5K=0) and q6_K.
bool is_split_type(DType t) { return cuda::split_type_enabled(t); }

class MoeV2Cuda : public ::testing::TestWithParam<Case> {};

TEST_P(MoeV2Cuda, MatchesV1BitsAndTheExactLayer) {
  POLYKV_REQUIRE_GPU();
  SwitchScope scope;
  const Case c = GetParam();
  auto gpu = make_backend({"cuda", 0});
  HostLayer h;
  make_layer(c, h, false);
  cuda::set_moe_kernel(1);
  const MoeExperts w1 = upload_layer(*gpu, h);
  cuda::set_moe_kernel(2);
  const MoeExperts w2 = upload_layer(*gpu, h);
  const bool split = is_split_type(c.gate_type) && is_split_type(c.down_type);
  ASSERT_EQ(w2.gate[0].layout == WeightLayout::CudaSplit, is_split_type(c.gate_type)) << name(c);
  ASSERT_EQ(w2.down[0].layout == WeightLayout::CudaSplit, is_split_type(c.down_type)) << name(c);
  ASSERT_EQ(w1.gate[0].layout, WeightLayout::Rows) << name(c);
  ExactLayer L;
  L.g = dequant_stack(h.gate);
  L.u = dequant_stack(h.up);
  L.d = dequant_stack(h.down);
  L.c = &c;
  L.h = &h;
  const int used = std::max(c.k, c.n_expert / 2);  // experts used..n_expert-1 get zero tokens
  const bool small = int64_t(c.n_embd) * c.n_ff <= (int64_t(1) << 18);  // the exact layer's cost
  for (int n : {1, 3, 17, 64, 300}) {
    if (n == 300 && !small) continue;
    std::vector<float> x, wts;
    std::vector<int32_t> ids;
    for (int t = 0; t < n; ++t) {
      const auto xr = normal(size_t(c.n_embd), 1000u + uint32_t(t), 1.0f);
      x.insert(x.end(), xr.begin(), xr.end());
      route_row(t, c.k, used, ids, wts);
    }
    const std::vector<float> want = exact_layer(L, x, ids, wts, n);
    // v1 (ggml rows) and v2 with the mat-vec path: the same bits.
    cuda::set_moe_mma_min(cuda::kMoeMmaNever);
    const auto got1 = run(*gpu, w1, x, ids, wts, n, c.k);
    const auto got2 = run(*gpu, w2, x, ids, wts, n, c.k);
    // v2 with the tensor-core path forced (split stacks only; others stay on the mat-vec).
    cuda::set_moe_mma_min(cuda::kMoeMmaAlways);
    const auto got3 = run(*gpu, w2, x, ids, wts, n, c.k);
    cuda::set_moe_mma_min(0);
    const std::string tag = name(c) + " n " + std::to_string(n);
    for (size_t i = 0; i < got1.size(); ++i) {
      ASSERT_EQ(std::memcmp(&got1[i], &got2[i], 4), 0)
          << tag << ": v2 mat-vec differs from v1 at index " << i << " (row " << i / size_t(c.n_embd) << "): v2 "
          << got2[i] << " v1 " << got1[i];
    }
    // One token on split stacks: the two fused launches (moe_cuda_decode.cu) give the five kernels' bits, and an
    // expert id out of range makes the row NaN on both paths.
    if (n == 1 && split) {
      cuda::set_moe_decode_fused(0);
      const auto plain = run(*gpu, w2, x, ids, wts, n, c.k);
      std::vector<int32_t> bad = ids;
      bad[size_t(c.k - 1)] = c.n_expert;
      const auto plain_bad = run(*gpu, w2, x, bad, wts, n, c.k);
      cuda::set_moe_decode_fused(1);
      // Variant v: down's register cap off / on (it changes how many blocks share a multiprocessor, never an
      // operation).
      for (int v = 0; v < 2; ++v) {
        cuda::set_moe_down_cap(v);
        const auto fused = run(*gpu, w2, x, ids, wts, n, c.k);
        const auto fused_bad = run(*gpu, w2, x, bad, wts, n, c.k);
        for (size_t i = 0; i < plain.size(); ++i) {
          ASSERT_EQ(std::memcmp(&plain[i], &fused[i], 4), 0) << tag << " variant " << v
              << ": the fused one-token path differs at " << i << ": fused " << fused[i] << " plain " << plain[i];
          ASSERT_TRUE(std::isnan(plain_bad[i]) && std::isnan(fused_bad[i])) << tag << " variant " << v
              << ": an out-of-range expert, value " << i << ": plain " << plain_bad[i] << " fused " << fused_bad[i];
        }
      }
      cuda::set_moe_down_cap(-1);
      cuda::set_moe_decode_fused(-1);
      // Routing inside the gate+up launch (moe_route_experts): the ids, weights and out bits of the routing
      // kernel followed by the five kernels, for both gatings; out aliasing x as the model runs it.
      // Logit sets: normal; ties (and signed zeros); one NaN. Arm 0 routes by route_row_warp's rounds
      // (set_moe_rank_route(0)), arms 1 and 2 by ranks where n_expert allows.
      auto logits = normal(size_t(c.n_expert), 77u + uint32_t(c.k), 1.0f);
      auto ties = logits;
      for (int e = 0; e < c.n_expert; ++e) ties[size_t(e)] = e % 4 == 3 ? -0.0f : float(e % 3);
      auto with_nan = logits;
      with_nan[size_t(c.n_expert / 3)] = std::nanf("");
      for (int combo = 0; combo < 6; ++combo) {  // logit set combo / 2, both gatings
        const int lset = combo / 2;
        const MoeGating gating = combo % 2 ? MoeGating::SoftmaxTopK : MoeGating::SoftmaxTopKRenorm;
        const auto& lg = lset == 0 ? logits : lset == 1 ? ties : with_nan;
        const MoeRouting rr{c.n_expert, c.k, gating};
        // arm 0: the routing kernel and the five kernels; 1: fused, routing in the gate+up launch; 2: fused, the
        // routing kernel first (what a gate+up launch of more than one wave gets).
        std::vector<float> got[3], got_w[3];
        std::vector<int32_t> got_i[3];
        for (int arm = 0; arm < 3; ++arm) {
          const int fused_on = arm > 0 ? 1 : 0;
          cuda::set_moe_decode_fused(fused_on);
          cuda::set_moe_route_in_launch(arm == 1 ? 1 : 0);
          cuda::set_moe_rank_route(arm > 0 ? 1 : 0);
          Dev dl(*gpu, lg.data(), lg.size() * 4), dx(*gpu, x.data(), x.size() * 4),
              di(*gpu, size_t(c.k) * 4), dw(*gpu, size_t(c.k) * 4);
          gpu->moe_route_experts(w2, dx.as<float>(), dl.as<float>(), rr, 1, di.as<int32_t>(), dw.as<float>(),
                                 dx.as<float>());
          got[arm] = down_f(*gpu, dx.p, x.size());
          got_w[arm] = down_f(*gpu, dw.p, size_t(c.k));
          got_i[arm] = cuda_test::backend_download<int32_t>(*gpu, di.p, size_t(c.k));
        }
        cuda::set_moe_decode_fused(-1);
        cuda::set_moe_route_in_launch(-1);
        cuda::set_moe_rank_route(-1);
        for (int arm = 1; arm < 3; ++arm) {
          ASSERT_EQ(got_i[0], got_i[arm]) << tag << " logit set " << lset << " arm " << arm << ": routed ids";
          ASSERT_EQ(std::memcmp(got_w[0].data(), got_w[arm].data(), size_t(c.k) * 4), 0)
              << tag << " arm " << arm << ": routed weights";
          for (size_t i = 0; i < got[0].size(); ++i)
            ASSERT_EQ(std::memcmp(&got[0][i], &got[arm][i], 4), 0) << tag << " arm " << arm
                << ": fused (1: routing in the gate+up launch, 2: the routing kernel first), value " << i << ": "
                << got[arm][i] << " vs " << got[0][i];
        }
      }
    }
    // x's 8-bit blocks written by the norm before, kept by the backend across the f32 router's mat-vec and copied
    // by the gate+up launch (MoeXActs): the bits of the launch that quantizes x itself, the same ids and weights,
    // and the path really taken (every split case here has n_embd % 32 == 0 and a router the small kernel takes).
    if (n == 1 && split) {
      const auto xr = normal(size_t(c.n_embd), 4242u, 1.0f), nw = normal(size_t(c.n_embd), 4343u, 1.0f);
      const cuda_test::Weights hr = cuda_test::make_weights(DType::F32, c.n_embd, c.n_expert, 4444u);
      const WeightMatrix wr = gpu->upload_matrix(hr.m);
      const MoeRouting rr{c.n_expert, c.k, MoeGating::SoftmaxTopKRenorm};
      std::vector<float> got[2], got_w[2];
      std::vector<int32_t> got_i[2];
      int64_t taken[2] = {};
      for (int on = 0; on < 2; ++on) {
        cuda::set_moe_decode_fused(1);
        cuda::set_moe_x_acts(on);
        Dev dxr(*gpu, xr.data(), xr.size() * 4), dnw(*gpu, nw.data(), nw.size() * 4), dh(*gpu, xr.size() * 4),
            dl(*gpu, size_t(c.n_expert) * 4), di(*gpu, size_t(c.k) * 4), dw(*gpu, size_t(c.k) * 4);
        const int64_t before = cuda::moe_x_acts_taken();
        gpu->rmsnorm(dxr.as<float>(), dnw.as<float>(), dh.as<float>(), 1, c.n_embd, 1e-6f);
        gpu->matmul(wr, dh.as<float>(), dl.as<float>(), 1);
        gpu->moe_route_experts(w2, dh.as<float>(), dl.as<float>(), rr, 1, di.as<int32_t>(), dw.as<float>(),
                               dh.as<float>());
        taken[on] = cuda::moe_x_acts_taken() - before;
        got[on] = down_f(*gpu, dh.p, xr.size());
        got_w[on] = down_f(*gpu, dw.p, size_t(c.k));
        got_i[on] = cuda_test::backend_download<int32_t>(*gpu, di.p, size_t(c.k));
      }
      cuda::set_moe_x_acts(-1);
      cuda::set_moe_decode_fused(-1);
      EXPECT_EQ(taken[0], 0) << tag << ": x's activations taken with the switch off";
      EXPECT_EQ(taken[1], 1) << tag << ": the gate+up launch did not take the norm's activations of x";
      ASSERT_EQ(got_i[0], got_i[1]) << tag << ": routed ids with x's activations from the norm";
      ASSERT_EQ(std::memcmp(got_w[0].data(), got_w[1].data(), size_t(c.k) * 4), 0) << tag << ": routed weights";
      for (size_t i = 0; i < got[0].size(); ++i)
        ASSERT_EQ(std::memcmp(&got[0][i], &got[1][i], 4), 0)
            << tag << ": x's activations from the norm, value " << i << ": " << got[1][i] << " vs " << got[0][i];
    }
    // Against the exact layer. Mat-vec: 8-bit activations of x and h (H200: NMSE ~1e-4 against the
    // CPU's identical arithmetic for q4_0); tensor cores: f16 weights and activations (~1e-7).
    // First bad: an element off by more than tol x the output RMS (many sigma of the noise).
    const double nmse_mv = 5e-4, tol_mv = 0.25;
    const double nmse_tc = split ? 1e-5 : nmse_mv, tol_tc = split ? 0.03 : tol_mv;
    const Err e2 = compare(got2, want, tol_mv), e3 = compare(got3, want, tol_tc);
    std::printf("%s: vs exact: v2 mat-vec NMSE %.3g, v2 %s NMSE %.3g\n", tag.c_str(), e2.nmse,
                split ? "tensor cores" : "(mat-vec)", e3.nmse);
    EXPECT_LT(e2.nmse, nmse_mv) << tag << " mat-vec: first bad " << e2.first_bad << " (row "
                                << e2.first_bad / c.n_embd << ") got " << e2.got << " want " << e2.want;
    EXPECT_LT(e2.first_bad, 0) << tag << " mat-vec: first bad " << e2.first_bad << " (row "
                               << e2.first_bad / c.n_embd << ") got " << e2.got << " want " << e2.want << " NMSE "
                               << e2.nmse;
    EXPECT_LT(e3.nmse, nmse_tc) << tag << " tensor cores: first bad " << e3.first_bad << " (row "
                                << e3.first_bad / c.n_embd << ") got " << e3.got << " want " << e3.want;
    EXPECT_LT(e3.first_bad, 0) << tag << " tensor cores: first bad " << e3.first_bad << " (row "
                               << e3.first_bad / c.n_embd << ") got " << e3.got << " want " << e3.want << " NMSE "
                               << e3.nmse;
    // The tensor-core path is batch invariant within itself: rows 0..2 alone (a 1-row step forced
    // onto it) give the bits they have in this step.
    if (split) {
      cuda::set_moe_mma_min(cuda::kMoeMmaAlways);
      for (int t = 0; t < std::min(n, 3); ++t) {
        const std::vector<float> xt(x.begin() + size_t(t) * c.n_embd, x.begin() + size_t(t + 1) * c.n_embd);
        const std::vector<int32_t> it(ids.begin() + size_t(t) * c.k, ids.begin() + size_t(t + 1) * c.k);
        const std::vector<float> wt(wts.begin() + size_t(t) * c.k, wts.begin() + size_t(t + 1) * c.k);
        const auto alone = run(*gpu, w2, xt, it, wt, 1, c.k);
        for (int i = 0; i < c.n_embd; ++i) {
          const float a = got3[size_t(t) * c.n_embd + i], b = alone[size_t(i)];
          ASSERT_EQ(std::memcmp(&a, &b, 4), 0)
              << tag << " tensor cores: row " << t << " value " << i << " in the step: " << a << ", alone: " << b;
        }
      }
      cuda::set_moe_mma_min(0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, MoeV2Cuda,
    ::testing::Values(Case{DType::Q4_0, DType::Q4_0, 256, 96, 32, 8, false, MoeActivation::SwiGLU},
                      Case{DType::Q4_0, DType::Q4_0, 2048, 768, 16, 8, false, MoeActivation::SwiGLU},
                      Case{DType::Q8_0, DType::Q8_0, 160, 224, 12, 4, true, MoeActivation::SwiGLUClamped},
                      Case{DType::Q4_K, DType::Q4_K, 512, 768, 16, 2, false, MoeActivation::SwiGLU},
                      Case{DType::Q4_K, DType::Q6_K, 256, 512, 20, 8, true, MoeActivation::SwiGLU},
                      Case{DType::Q5_K, DType::Q6_K, 256, 512, 12, 4, false, MoeActivation::SwiGLU},
                      Case{DType::Q6_K, DType::Q6_K, 768, 256, 9, 1, false, MoeActivation::SwiGLUClamped},
                      Case{DType::MXFP4, DType::MXFP4, 352, 288, 8, 4, true, MoeActivation::SwiGLUClamped}),
    [](const auto& info) {
      std::string s = name(info.param);
      for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

// ---- benchmark ---------------------------------------------------------------------------------

// One MoE layer of qwen3-30b-a3b (2048 hidden, 768 expert ffn, 128 experts, top 8) in q4_0 and q4_K:
// cuda::moe_experts (grouping, activations, gate+up, act, down, slot sum) captured 20 times in a CUDA
// graph (no launch overhead, as decode runs), us per layer; v1 (ggml rows), v2 mat-vec (tensor cores
// off) and v2 tensor cores, at 1, 8, 64 and 512 tokens with random distinct routing. floor_us = the
// distinct experts' bytes / 4.2 TB/s.
TEST(MoeCudaBench, DISABLED_Qwen3Layer) {
  POLYKV_REQUIRE_GPU();
  SwitchScope scope;
  auto gpu = make_backend({"cuda", 0});
  cuda::CudaContext ctx(0);
  const cudaStream_t s = ctx.stream();
  std::printf("%-5s %5s %-11s %10s %10s %8s %7s\n", "type", "n", "kernel", "us/layer", "floor_us", "GB/s", "%floor");
  for (DType t : {DType::Q4_0, DType::Q4_K}) {
    const Case c{t, t, 2048, 768, 128, 8, false, MoeActivation::SwiGLU};
    HostLayer h;
    make_layer(c, h, true);
    cuda::set_moe_kernel(1);
    const MoeExperts w1 = upload_layer(*gpu, h);
    cuda::set_moe_kernel(2);
    const MoeExperts w2 = upload_layer(*gpu, h);
    const double expert_bytes = 3.0 * double(row_bytes(t, 2048)) * 768.0;
    for (int n : {1, 8, 64, 512}) {
      std::vector<float> x = normal(size_t(n) * 2048, 5, 1.0f), wts;
      std::vector<int32_t> ids;
      std::mt19937 rng{uint32_t(n)};
      for (int tk = 0; tk < n; ++tk) {
        std::vector<int32_t> all(128);
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng);
        for (int j = 0; j < 8; ++j) {
          ids.push_back(all[size_t(j)]);
          wts.push_back(0.125f);
        }
      }
      const std::set<int32_t> distinct(ids.begin(), ids.end());
      const double bytes = expert_bytes * double(distinct.size());
      const double floor_us = bytes / 4.2e12 * 1e6;
      Dev dx(*gpu, x.data(), x.size() * 4), di(*gpu, ids.data(), ids.size() * 4),
          dw(*gpu, wts.data(), wts.size() * 4), dout(*gpu, x.size() * 4);
      struct Variant {
        const char* name;
        const MoeExperts* w;
        int mma_min;
      };
      const Variant vs[] = {{"v1", &w1, cuda::kMoeMmaNever}, {"v2-matvec", &w2, cuda::kMoeMmaNever}, {"v2-mma", &w2, cuda::kMoeMmaAlways}, {"v2-auto", &w2, 0}};
      for (const Variant& v : vs) {
        cuda::set_moe_mma_min(v.mma_min);
        auto once = [&] {
          cuda::moe_experts(*v.w, dx.as<float>(), di.as<int32_t>(), dw.as<float>(), n, 8, dout.as<float>(), ctx);
        };
        once();  // scratch allocated outside the capture
        POLYKV_CUDA_CHECK(cudaStreamSynchronize(s));
        constexpr int kIters = 20;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        POLYKV_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < kIters; ++i) once();
        POLYKV_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
        POLYKV_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        POLYKV_CUDA_CHECK(cudaGraphLaunch(exec, s));  // warm
        POLYKV_CUDA_CHECK(cudaStreamSynchronize(s));
        double best = 1e30;
        for (int rep = 0; rep < 5; ++rep) {
          const auto t0 = std::chrono::steady_clock::now();
          POLYKV_CUDA_CHECK(cudaGraphLaunch(exec, s));
          POLYKV_CUDA_CHECK(cudaStreamSynchronize(s));
          const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
          best = std::min(best, us / kIters);
        }
        POLYKV_CUDA_CHECK(cudaGraphExecDestroy(exec));
        POLYKV_CUDA_CHECK(cudaGraphDestroy(graph));
        std::printf("%-5s %5d %-11s %10.1f %10.1f %8.0f %6.1f%%\n", dtype_name(t), n, v.name, best, floor_us,
                    bytes / best * 1e-3, 100.0 * floor_us / best);
        std::fflush(stdout);
      }
      cuda::set_moe_mma_min(0);
    }
  }
}

}  // namespace
}  // namespace polykv
