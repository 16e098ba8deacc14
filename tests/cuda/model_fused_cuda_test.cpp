// The whole model on the GPU with the fused ops (matmul_multi over q,k,v and gate,up; add_rmsnorm;
// rope_qk; activations written by the norms; programmatic dependent launch everywhere) against the
// same model with them off (POLYKV_CUDA_FUSED=0 and POLYKV_CUDA_PDL=0: the plain ops one by one, in
// plain stream order): the logits of a prefill (cuBLAS path), of decode steps (mat-vec path) and of a
// 3-token step (speculative verification's shape) must be the same bits. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/matmul_cuda.h"
#include "cuda_test_util.h"
#include "engine/sequence_kv.h"
#include "model/model.h"
#include "../test_util.h"

namespace polykv {
namespace {

// defer: norms deferred into the mat-vecs (Backend::rmsnorm_into_matmul; other bits by design, so the
// bit-for-bit comparison runs the fused ops without them).
std::vector<std::vector<float>> run_steps(bool fused, const char* ctv, bool defer = false, bool graphs = true) {
  setenv("POLYKV_CUDA_FUSED", fused ? "1" : "0", 1);
  setenv("POLYKV_CUDA_DEFER_NORM", defer ? "1" : "0", 1);
  setenv("POLYKV_CUDA_GRAPHS", graphs ? "1" : "0", 1);
  if (!fused) setenv("POLYKV_CUDA_PDL", "0", 1);  // process-wide until restored below
  auto backend = make_backend({"cuda", 0});
  unsetenv("POLYKV_CUDA_FUSED");
  unsetenv("POLYKV_CUDA_DEFER_NORM");
  unsetenv("POLYKV_CUDA_GRAPHS");
  unsetenv("POLYKV_CUDA_PDL");
  struct RestorePdl {
    ~RestorePdl() { cuda::set_pdl_enabled(true); }
  } restore;
  auto model = Model::load(test::embedded_model(), *backend);
  const int n_vocab = model->config().n_vocab;
  SequenceKvOptions o;
  o.k_type = "q8_0";
  o.v_type = ctv;
  o.max_tokens = 256;
  auto kv = make_sequence_kv(*model, o);
  std::vector<std::vector<float>> out;
  const std::vector<int32_t> prompt = {1, 42, 7, 300, 5, 99, 12, 8, 77, 3, 150, 2, 9, 31, 4, 60, 18};
  std::vector<float> logits(prompt.size() * size_t(n_vocab));
  model->forward(prompt, *kv, logits.data(), true);
  out.push_back(logits);
  for (int step = 0; step < 6; ++step) {
    const int32_t t = int32_t((step * 37 + 11) % n_vocab);
    std::vector<float> l(static_cast<size_t>(n_vocab));
    model->forward(std::span(&t, 1), *kv, l.data(), false);
    out.push_back(std::move(l));
  }
  const std::vector<int32_t> three = {5, 6, 7};
  std::vector<float> l3(3 * size_t(n_vocab));
  model->forward(three, *kv, l3.data(), true);
  out.push_back(std::move(l3));
  return out;
}

TEST(ModelFusedCuda, FusedOpsGiveTheSameLogits) {
  POLYKV_REQUIRE_GPU();
  for (const char* ctv : {"q8_0", "turbo3t"}) {
    const auto plain = run_steps(false, ctv), fused = run_steps(true, ctv);
    ASSERT_EQ(plain.size(), fused.size());
    for (size_t s = 0; s < plain.size(); ++s) {
      ASSERT_EQ(plain[s].size(), fused[s].size());
      size_t first = plain[s].size(), n_bad = 0;
      for (size_t i = 0; i < plain[s].size(); ++i) {
        if (std::memcmp(&plain[s][i], &fused[s][i], 4) != 0 && n_bad++ == 0) first = i;
      }
      EXPECT_EQ(n_bad, 0u) << "v " << ctv << ", step " << s << " (0: prefill, last: 3 rows): " << n_bad
                           << " logits differ; first at " << first << ": fused "
                           << (first < plain[s].size() ? fused[s][first] : 0.0f) << ", plain "
                           << (first < plain[s].size() ? plain[s][first] : 0.0f);
    }
  }
}

// Deferred norms with the decode steps replayed from CUDA graphs and run eagerly: the same bits.
TEST(ModelFusedCuda, DeferredNormsSameBitsEagerAndFromGraphs) {
  POLYKV_REQUIRE_GPU();
  for (const char* ctv : {"q8_0", "turbo3t"}) {
    const auto eager = run_steps(true, ctv, true, false), graphs = run_steps(true, ctv, true, true);
    ASSERT_EQ(eager.size(), graphs.size());
    for (size_t s = 0; s < eager.size(); ++s)
      EXPECT_TRUE(cuda_test::same_bits(graphs[s], eager[s], std::string("v ") + ctv + " step " + std::to_string(s)));
  }
}

// Deferred norms (the default) against the fused norms: the activations are quantized before the scale
// instead of after, a rounding of the same size as the fused path's own (relative L2 of the logits printed;
// bound 3e-2: the base of the GPU-vs-CPU model bounds, model_cuda_test.cpp), and the greedy token agrees at every decode step.
TEST(ModelFusedCuda, DeferredNormsStayCloseToTheFusedNorms) {
  POLYKV_REQUIRE_GPU();
  for (const char* ctv : {"q8_0", "turbo3t"}) {
    const auto plain = run_steps(true, ctv, false), defer = run_steps(true, ctv, true);
    ASSERT_EQ(plain.size(), defer.size());
    for (size_t s = 0; s < plain.size(); ++s) {
      const double e = cuda_test::rel_l2(defer[s], plain[s]);
      std::printf("  v %s step %zu: rel L2 %.3e\n", ctv, s, e);
      EXPECT_LE(e, 3e-2) << "v " << ctv << ", step " << s;
      if (s > 0 && s + 1 < plain.size()) {  // the single-token decode steps
        const auto am = [](const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
        EXPECT_EQ(am(defer[s]), am(plain[s])) << "v " << ctv << ", step " << s;
      }
    }
  }
}

}  // namespace
}  // namespace polykv
