// GPU tests of the norm deferred into the next mat-vec (Backend::rmsnorm_into_matmul on CUDA:
// ops_cuda_acts.h rmsnorm_defer, the split kernels' scaled epilogue; docs/CUDA_DECODE.md "Deferred norms").
// Skip without a GPU. What they check:
//  - the residual update x += r is the plain op's bits;
//  - the mat-vec after a deferred norm is as close to the exact product (the CPU backend's f32 rmsnorm and
//    float weights dequantized from the same blocks) as the mat-vec after the plain norm: the activations
//    are quantized before the scale instead of after, which moves each output by the same kind of
//    rounding; every split type, 1-8 rows, with and without r;
//  - out is written (materialize_norm, the same bits as the plain norm's up to the sum's order: within 2
//    ulps) when the next op is not a mat-vec that takes the norm, and when the mat-vec's weights are not
//    split (q5_0: the fallback);
//  - matmul_qkv_rope after a deferred norm = matmul_multi + rope_qk after one, bit for bit;
//  - POLYKV_CUDA_DEFER_NORM=0 gives the plain fused norm's bits;
//  - a post-norm and the deferred norm after it in one launch (post_norm_into_matmul) = the two, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/ops_cuda_acts.h"
#include "core/dtype.h"
#include "cuda_test_util.h"
#include "matmul_cuda_test_util.h"
#include "quant/quant.h"

namespace polykv {
namespace {

using Buf = cuda_test::BackendFloats;

std::vector<float> randn(size_t n, uint32_t seed, float scale) { return cuda_test::normal_floats(n, seed, scale); }

// The same weights as f32 rows (dequantize_row_ref of each row): the exact product's matrix.
struct FloatWeights {
  std::vector<float> v;
  WeightMatrix m;
};
FloatWeights dequantized_f32(const cuda_test::Weights& q) {
  FloatWeights f;
  f.v.resize(size_t(q.m.n_out) * size_t(q.m.n_in));
  for (int64_t o = 0; o < q.m.n_out; ++o) dequantize_row_ref(q.m.type, q.row(o), f.v.data() + o * q.m.n_in, q.m.n_in);
  f.m.type = DType::F32;
  f.m.data = f.v.data();
  f.m.n_in = q.m.n_in;
  f.m.n_out = q.m.n_out;
  f.m.row_stride = size_t(q.m.n_in) * sizeof(float);
  return f;
}
using cuda_test::rel_l2;

// y = W · norm(x (+ r)) on `be`: deferred (rmsnorm_into_matmul) or plain (add_rmsnorm / rmsnorm, whose
// activations the CUDA backend also writes for the mat-vec); x_after: x after the op (x + r).
struct NormRun {
  std::vector<float> y, x_after;
};
NormRun run(Backend& be, const WeightMatrix& w, bool deferred, const std::vector<float>& x0, const std::vector<float>* r0,
        const std::vector<float>& nw0, int rows) {
  const int cols = int(w.n_in);
  Buf x(be, x0), nw(be, nw0), h(be, std::vector<float>(x0.size(), std::nanf(""))),
      y(be, std::vector<float>(size_t(rows) * size_t(w.n_out), std::nanf("")));
  std::unique_ptr<Buf> r;
  if (r0 != nullptr) r = std::make_unique<Buf>(be, *r0);
  if (deferred) be.rmsnorm_into_matmul(x.p, r ? r->p : nullptr, nw.p, h.p, rows, cols, 1e-5f);
  else if (r) be.add_rmsnorm(x.p, r->p, nw.p, h.p, rows, cols, 1e-5f);
  else be.rmsnorm(x.p, nw.p, h.p, rows, cols, 1e-5f);
  be.matmul(w, h.p, y.p, rows);
  return {y.get(), x.get()};
}

TEST(DeferredNormCuda, MatvecAsCloseToTheExactProductAsThePlainNorm) {
  POLYKV_REQUIRE_GPU();
  auto gpu = make_backend({"cuda", 0});
  auto cpu = make_backend({"cpu", 2});
  uint32_t seed = 7100;
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    for (const auto& [n_in, n_out] : {std::pair<int64_t, int64_t>{4096, 1536}, {2048, 257}, {7936, 96}}) {
      if (t == DType::Q4_K || t == DType::Q6_K) {
        if (n_in % 256 != 0) continue;
      }
      const cuda_test::Weights hw = cuda_test::make_weights(t, n_in, n_out, ++seed, /*quantized=*/true);
      const WeightMatrix wg = gpu->upload_matrix(hw.m);
      // The exact product: the same blocks as f32 weights on the CPU, the CPU's f32 rmsnorm.
      const FloatWeights hf = dequantized_f32(hw);
      const WeightMatrix wc = cpu->upload_matrix(hf.m);
      for (int rows : {1, 3, 8}) {
        for (bool with_r : {false, true}) {
          // Residual-stream-like rows: a few large channels (as real hidden states have).
          std::vector<float> x0 = randn(size_t(rows) * size_t(n_in), ++seed, 1.0f);
          for (size_t i = 0; i < x0.size(); i += 97) x0[i] *= 20.0f;
          const std::vector<float> r0 = randn(x0.size(), ++seed, 0.5f), nw = randn(size_t(n_in), ++seed, 0.3f);
          std::vector<float> nw1(nw);
          for (float& v : nw1) v += 1.0f;
          const std::vector<float>* rp = with_r ? &r0 : nullptr;
          const std::string what = std::string(dtype_name(t)) + " " + std::to_string(n_out) + "x" +
                                   std::to_string(n_in) + " rows " + std::to_string(rows) + (with_r ? " +r" : "");
          const NormRun exact = run(*cpu, wc, false, x0, rp, nw1, rows);
          const NormRun plain = run(*gpu, wg, false, x0, rp, nw1, rows);
          const NormRun defer = run(*gpu, wg, true, x0, rp, nw1, rows);
          EXPECT_TRUE(cuda_test::same_bits(defer.x_after, plain.x_after, what + " x += r"));
          const double e_plain = rel_l2(plain.y, exact.y), e_defer = rel_l2(defer.y, exact.y);
          std::printf("  %-40s rel L2 to the exact product: plain %.3e deferred %.3e\n", what.c_str(), e_plain,
                      e_defer);
          // Both carry int8 activation rounding (~0.5 / 127 of a block's max per value; these rows have large
          // channels, so ~1e-2 of the product): the deferred one may not be worse by more than a fifth.
          EXPECT_LE(e_defer, 1.2 * e_plain + 1e-5) << what;
        }
      }
    }
  }
}

// out = rmsnorm(x + r) * w, written when something other than a mat-vec of split weights reads it.
TEST(DeferredNormCuda, OutIsWrittenForOtherReaders) {
  POLYKV_REQUIRE_GPU();
  auto gpu = make_backend({"cuda", 0});
  const int rows = 3, cols = 2048;
  const std::vector<float> x0 = randn(size_t(rows) * cols, 11, 1.0f), r0 = randn(x0.size(), 12, 1.0f),
                           nw = randn(size_t(cols), 13, 1.0f);
  // Plain: add_rmsnorm's out.
  Buf xa(*gpu, x0), ra(*gpu, r0), wa(*gpu, nw), ha(*gpu, x0);
  gpu->add_rmsnorm(xa.p, ra.p, wa.p, ha.p, rows, cols, 1e-6f);
  const std::vector<float> want = ha.get();
  // Deferred, then an op that reads out (add of zeros: out + 0 = out).
  Buf xb(*gpu, x0), rb(*gpu, r0), wb(*gpu, nw), hb(*gpu, x0), zero(*gpu, std::vector<float>(x0.size(), 0.0f));
  gpu->rmsnorm_into_matmul(xb.p, rb.p, wb.p, hb.p, rows, cols, 1e-6f);
  gpu->add(hb.p, zero.p, int64_t(x0.size()));
  const std::vector<float> got = hb.get();
  EXPECT_TRUE(cuda_test::same_bits(xb.get(), xa.get(), "x += r"));
  size_t worst = 0;
  double worst_rel = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double rel = std::abs(double(got[i]) - double(want[i])) / std::max(1e-30, std::abs(double(want[i])));
    if (rel > worst_rel) worst_rel = rel, worst = i;
  }
  // The inverse norm's sum runs in another order (blocks of 32, then lanes): a few ulps at most.
  EXPECT_LE(worst_rel, 4e-7) << "value " << worst << ": " << got[worst] << " vs " << want[worst];
  std::printf("  materialized out vs add_rmsnorm: worst relative difference %.2e\n", worst_rel);

  // A mat-vec of non-split weights (q5_0 keeps ggml rows): once the backend holds one, it keeps the fused
  // norm (CudaBackend::all_split_); either way the product is the plain path's.
  const cuda_test::Weights hw = cuda_test::make_weights(DType::Q5_0, cols, 64, 14, /*quantized=*/true);
  const WeightMatrix w5 = gpu->upload_matrix(hw.m);
  const NormRun plain = run(*gpu, w5, false, x0, &r0, nw, rows);
  const NormRun defer = run(*gpu, w5, true, x0, &r0, nw, rows);
  EXPECT_LE(rel_l2(defer.y, plain.y), 1e-3) << "q5_0 fallback";
}

// A small f32 matrix (a MoE router: 128 x 2048) leaves deferred norms on: after it is uploaded, a norm deferred into
// a q4_0 mat-vec is consumed there and its out stays unwritten (the NaN poison). The router reading a deferred
// norm's out gets it written first, as close to the plain path as OutIsWrittenForOtherReaders allows. One more row
// (1025) is no longer small: the backend then keeps the fused norm, which writes out.
TEST(DeferredNormCuda, SmallF32MatrixKeepsNormsDeferred) {
  POLYKV_REQUIRE_GPU();
  const int cols = 2048;
  const std::vector<float> x0 = randn(cols, 31, 1.0f), r0 = randn(cols, 32, 1.0f), nw = randn(cols, 33, 1.0f);
  const cuda_test::Weights hq = cuda_test::make_weights(DType::Q4_0, cols, 64, 34, /*quantized=*/true);
  const auto out_written = [&](int64_t f32_rows) {
    auto gpu = make_backend({"cuda", 0});
    const cuda_test::Weights hf = cuda_test::make_weights(DType::F32, cols, f32_rows, 35);
    const WeightMatrix wf = gpu->upload_matrix(hf.m), wq = gpu->upload_matrix(hq.m);
    Buf x(*gpu, x0), r(*gpu, r0), w(*gpu, nw), h(*gpu, std::vector<float>(cols, std::nanf(""))),
        y(*gpu, std::vector<float>(64, std::nanf("")));
    gpu->rmsnorm_into_matmul(x.p, r.p, w.p, h.p, 1, cols, 1e-6f);
    gpu->matmul(wq, h.p, y.p, 1);
    const std::vector<float> hv = h.get();
    for (float v : y.get()) EXPECT_FALSE(std::isnan(v)) << "q4_0 mat-vec after the norm, f32 rows " << f32_rows;
    if (f32_rows <= 1024) {  // the router after a deferred norm: out written first
      const NormRun plain = run(*gpu, wf, false, x0, &r0, nw, 1);
      const NormRun defer = run(*gpu, wf, true, x0, &r0, nw, 1);
      EXPECT_LE(rel_l2(defer.y, plain.y), 1e-5) << "router after a deferred norm";
    }
    return std::none_of(hv.begin(), hv.end(), [](float v) { return std::isnan(v); });
  };
  EXPECT_FALSE(out_written(128)) << "a 128-row f32 matrix turned deferred norms off";
  EXPECT_TRUE(out_written(1025)) << "a 1025-row f32 matrix left deferred norms on";
}

// The fused q,k,v + RoPE launch scales before it rotates, as matmul_multi + rope_qk do: same bits.
TEST(DeferredNormCuda, QkvRopeEqualsMatmulMultiThenRope) {
  POLYKV_REQUIRE_GPU();
  auto gpu = make_backend({"cuda", 0});
  const int n_head = 8, n_head_kv = 2, head_dim = 128, n_rot = 128;
  const int64_t n_in = 1024;
  uint32_t seed = 7300;
  // (q and k type, v type): one type, and q4_K_M's two-type launch (v in q6_K).
  for (const auto& [t, tv] : {std::pair{DType::Q4_0, DType::Q4_0}, std::pair{DType::Q8_0, DType::Q8_0},
                              std::pair{DType::Q4_K, DType::Q6_K}}) {
    std::vector<cuda_test::Weights> hw;
    hw.reserve(3);
    WeightMatrix wg[3];
    const int64_t rows[3] = {int64_t(n_head) * head_dim, int64_t(n_head_kv) * head_dim, int64_t(n_head_kv) * head_dim};
    for (int i = 0; i < 3; ++i) hw.push_back(cuda_test::make_weights(i == 2 ? tv : t, n_in, rows[i], ++seed, true));
    for (int i = 0; i < 3; ++i) wg[i] = gpu->upload_matrix(hw[size_t(i)].m);
    std::vector<float> inv_freq(size_t(n_rot / 2));
    for (int i = 0; i < n_rot / 2; ++i) inv_freq[size_t(i)] = 1.0f / std::pow(10000.0f, float(2 * i) / float(n_rot));
    const std::vector<float> x0 = randn(size_t(n_in), ++seed, 1.0f), r0 = randn(size_t(n_in), ++seed, 1.0f),
                             nw = randn(size_t(n_in), ++seed, 1.0f);
    std::vector<float> out[2][3];
    for (int fused = 0; fused < 2; ++fused) {
      Buf x(*gpu, x0), r(*gpu, r0), w(*gpu, nw), h(*gpu, x0), f(*gpu, inv_freq), q(*gpu, std::vector<float>(size_t(rows[0]))),
          k(*gpu, std::vector<float>(size_t(rows[1]))), v(*gpu, std::vector<float>(size_t(rows[2])));
      auto* p = static_cast<int32_t*>(gpu->allocate(sizeof(int32_t)));
      const int32_t pos = 777;
      gpu->upload(p, &pos, sizeof pos);
      gpu->rmsnorm_into_matmul(x.p, r.p, w.p, h.p, 1, int(n_in), 1e-5f);
      const Backend::MatmulOut parts[] = {{&wg[0], q.p}, {&wg[1], k.p}, {&wg[2], v.p}};
      if (fused)
        gpu->matmul_qkv_rope(parts, h.p, 1, n_head, n_head_kv, head_dim, n_rot, p, f.p, 1.0f, RopeStyle::Norm);
      else
        gpu->Backend::matmul_qkv_rope(parts, h.p, 1, n_head, n_head_kv, head_dim, n_rot, p, f.p, 1.0f, RopeStyle::Norm);
      out[fused][0] = q.get();
      out[fused][1] = k.get();
      out[fused][2] = v.get();
      gpu->release(p);
    }
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(cuda_test::same_bits(out[1][i], out[0][i], std::string(dtype_name(t)) + " part " + std::to_string(i)));
  }
}

// With POLYKV_CUDA_DEFER_NORM=0 rmsnorm_into_matmul is the plain fused norm: the same bits as add_rmsnorm + matmul.
TEST(DeferredNormCuda, SwitchOffGivesThePlainNormsBits) {
  POLYKV_REQUIRE_GPU();
  setenv("POLYKV_CUDA_DEFER_NORM", "0", 1);
  auto gpu = make_backend({"cuda", 0});
  unsetenv("POLYKV_CUDA_DEFER_NORM");
  const cuda_test::Weights hw = cuda_test::make_weights(DType::Q4_0, 2048, 300, 21, true);
  const WeightMatrix w = gpu->upload_matrix(hw.m);
  const std::vector<float> x0 = randn(2 * 2048, 22, 1.0f), r0 = randn(x0.size(), 23, 1.0f), nw = randn(2048, 24, 1.0f);
  const NormRun plain = run(*gpu, w, false, x0, &r0, nw, 2), off = run(*gpu, w, true, x0, &r0, nw, 2);
  EXPECT_TRUE(cuda_test::same_bits(off.y, plain.y, "y"));
}

// Gemma's post-norm and the deferred norm after it in one launch (post_norm_into_matmul): x += rmsnorm(r) * w_post,
// then the mat-vec after the deferred norm of x: the bits of the seam's default (rmsnorm, then rmsnorm_into_matmul's
// two launches) for x and for the mat-vec's outputs; rows of 256, 2560 and 8192 values (the three register counts of
// the row's norm), 1-3 rows, q8_0 and q4_K weights.
TEST(DeferredNormCuda, PostNormIntoMatmulEqualsRmsnormThenDeferredNorm) {
  POLYKV_REQUIRE_GPU();
  EXPECT_TRUE(cuda::post_norm_defer_ok(8192));
  EXPECT_FALSE(cuda::post_norm_defer_ok(8192 + 32));
  EXPECT_FALSE(cuda::post_norm_defer_ok(100));
  auto gpu = make_backend({"cuda", 0});
  uint32_t seed = 40;
  for (DType type : {DType::Q8_0, DType::Q4_K})
    for (int cols : {256, 2560, 8192})
      for (int rows : {1, 3}) {
        const std::string what = std::string(dtype_name(type)) + " cols " + std::to_string(cols) + " rows " +
                                 std::to_string(rows);
        const cuda_test::Weights hw = cuda_test::make_weights(type, cols, 96, ++seed, true);
        const WeightMatrix w = gpu->upload_matrix(hw.m);
        const std::vector<float> x0 = randn(size_t(rows) * cols, ++seed, 1.0f), r0 = randn(x0.size(), ++seed, 3.0f),
                                 wp0 = randn(size_t(cols), ++seed, 1.0f), nw0 = randn(size_t(cols), ++seed, 1.0f);
        NormRun got, want;
        for (bool fused : {true, false}) {
          Buf x(*gpu, x0), r(*gpu, r0), wp(*gpu, wp0), nw(*gpu, nw0),
              y(*gpu, std::vector<float>(size_t(rows) * size_t(w.n_out), std::nanf("")));
          if (fused) gpu->post_norm_into_matmul(x.p, r.p, wp.p, nw.p, r.p, rows, cols, 1e-6f);
          else gpu->Backend::post_norm_into_matmul(x.p, r.p, wp.p, nw.p, r.p, rows, cols, 1e-6f);
          gpu->matmul(w, r.p, y.p, rows);
          (fused ? got : want) = {y.get(), x.get()};
        }
        EXPECT_TRUE(cuda_test::same_bits(got.x_after, want.x_after, what + ": x += post-normed r"));
        EXPECT_TRUE(cuda_test::same_bits(got.y, want.y, what + ": the mat-vec after the deferred norm"));
        if (HasFailure()) return;
      }
}

}  // namespace
}  // namespace polykv
