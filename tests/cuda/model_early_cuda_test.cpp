// The decode kernel's early start (attn::attention_early(): the attention overlaps the step's kv_store,
// docs/CUDA_ATTENTION.md "Early start and pair tables") and the pair-table decoder (Decode8Kernels::Pairs)
// in the whole model on the GPU: teacher-forced decode steps (eager, then recorded into CUDA graphs and
// replayed) past 300 keys (key splits), KV q8_0/q8_0, q8_0/turbo3t, turbo3t/turbo3t. Each variant's
// logits must equal the default's (packed, no early start) within 1e-5 relative L2 per step; they are
// expected bit for bit (same plan at these depths, the same table entries), which the test prints.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/attention_cuda_plan.h"
#include "cuda_test_util.h"
#include "engine/sequence_kv.h"
#include "model/model.h"
#include "../test_util.h"

namespace polykv {
namespace {

namespace attn = cuda::attn;

std::vector<std::vector<float>> run_steps(const char* ctk, const char* ctv) {
  auto backend = make_backend({"cuda", 0});
  auto model = Model::load(test::embedded_model(), *backend);
  const int n_vocab = model->config().n_vocab;
  SequenceKvOptions o;
  o.k_type = ctk;
  o.v_type = ctv;
  o.max_tokens = 512;
  auto kv = make_sequence_kv(*model, o);
  std::vector<int32_t> prompt(300);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 131 + 7) % size_t(n_vocab));
  std::vector<float> logits(prompt.size() * size_t(n_vocab));
  model->forward(prompt, *kv, logits.data(), true);
  std::vector<std::vector<float>> out;
  for (int step = 0; step < 10; ++step) {
    const int32_t t = int32_t((step * 37 + 11) % n_vocab);
    std::vector<float> l(static_cast<size_t>(n_vocab));
    model->forward(std::span(&t, 1), *kv, l.data(), false);
    out.push_back(std::move(l));
  }
  return out;
}

TEST(ModelCudaEarly, EarlyStartAndPairsGiveTheDefaultsLogits) {
  POLYKV_REQUIRE_GPU();
  const bool saved_e = attn::attention_early();
  const attn::Decode8Kernels saved_k = attn::decode8_kernels();
  const std::pair<const char*, const char*> kv_pairs[] = {{"q8_0", "q8_0"}, {"q8_0", "turbo3t"}, {"turbo3t", "turbo3t"}};
  for (const auto& [ctk, ctv] : kv_pairs) {
    attn::attention_early() = false;
    attn::decode8_kernels() = attn::Decode8Kernels::Packed;
    const auto ref = run_steps(ctk, ctv);
    struct V {
      const char* name;
      bool early;
      attn::Decode8Kernels k;
    };
    for (const V& v : {V{"early", true, attn::Decode8Kernels::Packed}, V{"pairs", false, attn::Decode8Kernels::Pairs},
                       V{"early+pairs", true, attn::Decode8Kernels::Pairs}}) {
      attn::attention_early() = v.early;
      attn::decode8_kernels() = v.k;
      const auto got = run_steps(ctk, ctv);
      ASSERT_EQ(got.size(), ref.size());
      int identical = 0;
      for (size_t s = 0; s < ref.size(); ++s) {
        double e2 = 0, r2 = 0;
        for (size_t i = 0; i < ref[s].size(); ++i) {
          e2 += (double(got[s][i]) - ref[s][i]) * (double(got[s][i]) - ref[s][i]);
          r2 += double(ref[s][i]) * ref[s][i];
        }
        const double rel = std::sqrt(e2 / std::max(r2, 1e-30));
        EXPECT_LE(rel, 1e-5) << ctk << "/" << ctv << " " << v.name << " step " << s;
        identical += std::memcmp(got[s].data(), ref[s].data(), ref[s].size() * sizeof(float)) == 0;
      }
      std::printf("%s/%s %s: %d of %zu steps bit-identical to the default\n", ctk, ctv, v.name, identical, ref.size());
    }
  }
  attn::attention_early() = saved_e;
  attn::decode8_kernels() = saved_k;
}

}  // namespace
}  // namespace polykv
