// The embedded model's greedy text on every ISA this CPU has: each ISA forced in turn (the model
// loaded under it, so that weight packing follows it too), against the scalar kernels. On ARM64 this
// is the end-to-end check of the NEON q8_0 kernels (scripts/arm64-test.sh runs it under qemu); on x86
// of AVX2 and AVX-512.
//
// The ISAs' logits are not bit-identical (measured on x86 with an f32 KV cache: max |Δlogit| 1.2e-2
// (AVX2) and 1.4e-2 (AVX-512) of the largest |logit| over the steps), so greedy decoding may take
// another token where the scalar run's top two logits are that close. So each ISA is teacher-forced
// on the scalar run's tokens (prompt, then one token per step): at every step its logits must be
// within kMaxDiff of the scalar ones (relative to the largest |logit|; a wrong kernel is off by
// O(1)), and its top-1 must be the scalar token unless the scalar top-2 margin is below twice that
// step's max |Δlogit|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/isa.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace polykv {
namespace {

constexpr int kSteps = 12;          // greedy tokens after the prompt
constexpr double kMaxDiff = 5e-2;   // max |Δlogit| / max |logit|, per step

struct GreedyRun {
  std::vector<int32_t> tokens;             // greedy tokens (ISA's own choice at every step)
  std::vector<std::vector<float>> logits;  // [kSteps][n_vocab] logits that chose each token
};

// kSteps steps after `prompt`: the logits of each step, and the argmax tokens. With `forced`, the
// tokens fed back are forced[i] (teacher forcing) instead of the argmax.
GreedyRun greedy(Isa isa, const std::vector<int32_t>& prompt, const std::vector<int32_t>* forced) {
  IsaScope scope(isa);
  CpuBackend backend(2);
  auto model = Model::load(test::embedded_model(), backend);
  const int n_vocab = model->config().n_vocab;
  KvCache kv(model->kv_shape(), KvType::F32, KvType::F32, 256, 16);
  GreedyRun r;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  model->forward(prompt, kv, logits.data(), false);
  for (int i = 0; i < kSteps; ++i) {
    r.logits.push_back(logits);
    r.tokens.push_back(int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    const int32_t next = forced ? (*forced)[size_t(i)] : r.tokens.back();
    model->forward(std::span(&next, 1), kv, logits.data(), false);
  }
  return r;
}

TEST(GreedyIsa, EmbeddedModelTextMatchesScalarOnEveryIsa) {
  CpuBackend tok_backend(1);
  const auto tok_model = Model::load(test::embedded_model(), tok_backend);
  const Tokenizer tok = Tokenizer::from_gguf(tok_model->gguf());
  const std::vector<int32_t> prompt = tok.encode("def fibonacci(n):", true, false);
  const GreedyRun ref = greedy(Isa::Scalar, prompt, nullptr);
  const std::string ref_text = tok.decode(ref.tokens);
  std::printf("  scalar: %s\n", ref_text.c_str());
  ASSERT_FALSE(ref_text.empty());
  for (Isa isa : supported_isas()) {
    if (isa == Isa::Scalar) continue;
    SCOPED_TRACE(isa_name(isa));
    const GreedyRun got = greedy(isa, prompt, &ref.tokens);
    double worst = 0;
    for (int i = 0; i < kSteps; ++i) {
      const std::vector<float>& a = ref.logits[size_t(i)];
      const std::vector<float>& b = got.logits[size_t(i)];
      double scale = 0, diff = 0;
      for (size_t j = 0; j < a.size(); ++j) {
        scale = std::max(scale, double(std::fabs(a[j])));
        diff = std::max(diff, double(std::fabs(a[j] - b[j])));
      }
      worst = std::max(worst, diff / scale);
      EXPECT_LE(diff, kMaxDiff * scale) << "step " << i;
      if (got.tokens[size_t(i)] != ref.tokens[size_t(i)]) {
        std::vector<float> sorted = a;
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
        EXPECT_LT(sorted[0] - sorted[1], 2 * diff) << "step " << i << ": top-1 " << got.tokens[size_t(i)]
                                               << " instead of " << ref.tokens[size_t(i)];
      }
    }
    std::printf("  %s: max |dlogit| / max |logit| = %.2e over %d steps, text %s\n", isa_name(isa), worst, kSteps,
                tok.decode(got.tokens) == ref_text ? "identical" : "differs (near tie)");
  }
}

}  // namespace
}  // namespace polykv
