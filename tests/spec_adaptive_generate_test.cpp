// Adaptive speculation in the single-sequence loop (GenerateOptions::spec_adaptive, run and bench):
// greedy output equals plain greedy decoding for the n-gram drafter and a draft model at n-max 1..4,
// also with a repetition penalty, whatever the plans (they depend on measured step times).
#include <gtest/gtest.h>

#include "engine/generate.h"
#include "engine/sequence_kv.h"
#include "engine/spec/draft_model_drafter.h"
#include "engine/spec/ngram_drafter.h"
#include "embedded_model_fixture.h"

namespace polykv {
namespace {

test::EmbeddedModelFixture& fx() {
  static test::EmbeddedModelFixture f;
  return f;
}

std::vector<int32_t> generate_with(const std::vector<int32_t>& prompt, Drafter* drafter, int k, float penalty,
                                   GenerateStats* st, int n = 40) {
  SequenceKvOptions kvo;
  kvo.k_type = "q8_0";
  kvo.v_type = "turbo3t";
  kvo.max_tokens = 1024;
  kvo.rollback_tokens = 17;
  auto kv = make_sequence_kv(*fx().model, kvo);
  GenerateOptions o;
  o.n_predict = n;
  o.sampling.temperature = 0;
  o.sampling.repeat_penalty = penalty;
  o.drafter = drafter;
  o.spec_n_max = k;
  o.spec_adaptive = true;
  std::vector<int32_t> out;
  GenerateCallbacks cb;
  cb.on_token = [&](int32_t id) {
    out.push_back(id);
    return true;
  };
  *st = generate(*fx().model, *kv, prompt, o, cb);
  return out;
}

std::vector<int32_t> plain(const std::vector<int32_t>& prompt, float penalty, int n = 40) {
  GenerateStats st;
  return generate_with(prompt, nullptr, 1, penalty, &st, n);
}

TEST(SpecAdaptiveGenerate, GreedyEqualsPlainGreedy) {
  std::unique_ptr<Model> draft = Model::load(test::embedded_model(), fx().backend);
  const char* texts[] = {
      "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n\ndef",
      "for i in range(10):\n    print(i)\nfor i in range(10):\n    print(",
  };
  int64_t accepted = 0, steps = 0, emitted = 0;
  for (const char* t : texts) {
    const auto ids = fx().encode(t, true);
    for (float pen : {1.0f, 1.3f}) {
      const auto base = plain(ids, pen);
      for (int k = 1; k <= 4; ++k) {
        NgramDrafter ng;
        DraftModelOptions dmo;
        dmo.max_tokens = 1024 + 17;
        DraftModelDrafter dm(*draft, dmo);
        for (Drafter* d : {static_cast<Drafter*>(&ng), static_cast<Drafter*>(&dm)}) {
          GenerateStats st;
          EXPECT_EQ(generate_with(ids, d, k, pen, &st), base) << d->name() << " k " << k << " penalty " << pen;
          EXPECT_EQ(st.spec.emitted + 1, int64_t(base.size()));  // the first token: the prefill's
          EXPECT_LE(st.spec.drafted, int64_t(k) * st.spec.steps);
          accepted += st.spec.accepted;
          steps += st.spec.steps;
          emitted += st.spec.emitted;
        }
      }
    }
  }
  EXPECT_GT(accepted, 0) << "no draft was ever accepted: the test exercises nothing";
  EXPECT_LT(steps, emitted);
}

}  // namespace
}  // namespace polykv
