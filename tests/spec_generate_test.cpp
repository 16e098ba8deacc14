// Greedy identity of speculative decoding (engine/generate.h with a drafter) on the embedded model:
// for the n-gram drafter and a draft model (the model itself: every draft accepted; a q4_0 copy:
// rejections happen), K = 1..4, several prompts, also with a repetition penalty, the tokens equal
// those of plain greedy decoding. And `polykv run --spec ...` prints what `polykv run` prints.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "engine/generate.h"
#include "engine/sequence_kv.h"
#include "engine/spec/draft_model_drafter.h"
#include "engine/spec/make_drafter.h"
#include "engine/spec/ngram_drafter.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace polykv {
namespace {

CpuBackend& backend() {
  static CpuBackend b(2);
  return b;
}

Model& model() {
  static std::unique_ptr<Model> m = Model::load(test::embedded_model(), backend());
  return *m;
}

// A q4_0 copy of the embedded model (made once with `polykv quantize`).
Model& q4_model() {
  static std::unique_ptr<Model> m = [] {
    const std::string path =
        std::filesystem::temp_directory_path() / ("polykv_spec_q4_0_" + std::to_string(::getpid()) + ".gguf");
    const auto r = test::polykv("quantize " + test::embedded_model() + " " + path + " q4_0");
    EXPECT_EQ(r.code, 0) << r.out;
    auto mm = Model::load(path, backend());
    std::filesystem::remove(path);  // mapped: the data stays readable
    return mm;
  }();
  return *m;
}

const std::vector<std::string>& prompts() {
  static const std::vector<std::string> p = {
      "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n\ndef",
      "import os\nimport sys\n\n\nclass Config:\n    def __init__(self, path):\n        self.path = path\n",
      "for i in range(10):\n    print(i)\nfor i in range(10):\n    print(",
  };
  return p;
}

std::vector<int32_t> encode(const std::string& text) {
  static const Tokenizer tok = Tokenizer::from_gguf(model().gguf());
  return tok.encode(text, true, false);
}

struct Out {
  std::vector<int32_t> tokens;
  GenerateStats st;
};

Out run(const std::vector<int32_t>& prompt, Drafter* drafter, int k, float repeat_penalty, int n = 40) {
  SequenceKvOptions kvo;
  kvo.k_type = "q8_0";
  kvo.v_type = "f16";
  kvo.max_tokens = 512;
  kvo.rollback_tokens = 17;
  auto kv = make_sequence_kv(model(), kvo);
  GenerateOptions o;
  o.n_predict = n;
  o.sampling.temperature = 0;
  o.sampling.repeat_penalty = repeat_penalty;
  o.drafter = drafter;
  o.spec_n_max = k;
  Out r;
  GenerateCallbacks cb;
  cb.on_token = [&](int32_t id) {
    r.tokens.push_back(id);
    return true;
  };
  r.st = generate(model(), *kv, prompt, o, cb);
  return r;
}

TEST(SpecGenerate, NgramGreedyEqualsPlainGreedy) {
  int64_t accepted = 0;
  for (float pen : {1.0f, 1.3f}) {
    for (const auto& p : prompts()) {
      const auto ids = encode(p);
      const Out base = run(ids, nullptr, 1, pen);
      for (int k = 1; k <= 4; ++k) {
        NgramDrafter d;
        const Out s = run(ids, &d, k, pen);
        EXPECT_EQ(s.tokens, base.tokens) << "k " << k << " penalty " << pen << " prompt " << p;
        accepted += s.st.spec.accepted;
        EXPECT_EQ(s.st.spec.emitted + 1, int64_t(s.tokens.size()));  // the first token: the prefill's
      }
    }
  }
  EXPECT_GT(accepted, 0) << "no draft was ever accepted: the test exercises nothing";
}

TEST(SpecGenerate, DraftModelGreedyEqualsPlainGreedy) {
  for (Model* dm : {&model(), &q4_model()}) {
    check_draft_vocab(model(), *dm);
    int64_t drafted = 0, accepted = 0;
    for (const auto& p : prompts()) {
      const auto ids = encode(p);
      const Out base = run(ids, nullptr, 1, 1.0f);
      for (int k = 1; k <= 4; ++k) {
        DraftModelOptions o;
        o.max_tokens = 512 + 17;
        DraftModelDrafter d(*dm, o);
        const Out s = run(ids, &d, k, 1.0f);
        EXPECT_EQ(s.tokens, base.tokens) << "k " << k << " prompt " << p;
        drafted += s.st.spec.drafted;
        accepted += s.st.spec.accepted;
      }
    }
    if (dm == &model()) EXPECT_EQ(accepted, drafted) << "the model drafting for itself must always be right";
    else EXPECT_LT(accepted, drafted) << "the q4_0 copy never disagreed: rollbacks were not exercised";
    EXPECT_GT(accepted, 0);
  }
}

TEST(SpecGenerate, StopsAtTheTokenLimitAndContextLikePlainDecoding) {
  const auto ids = encode(prompts()[2]);
  for (int n : {1, 2, 5}) {
    NgramDrafter d;
    const Out s = run(ids, &d, 4, 1.0f, n);
    EXPECT_EQ(int(s.tokens.size()), n);
    EXPECT_EQ(s.st.stop_reason, StopReason::TokenLimit);
  }
  // A context that fills up: the same tokens and reason as without speculation.
  for (int max_tokens : {int(ids.size()), int(ids.size()) + 3}) {
    std::vector<Out> outs;
    for (bool spec : {false, true}) {
      auto kv = make_sequence_kv(model(), {"q8_0", "f16", max_tokens, 256, 17, 0});
      NgramDrafter d;
      GenerateOptions o;
      o.n_predict = -1;
      o.sampling.temperature = 0;
      o.drafter = spec ? &d : nullptr;
      Out r;
      GenerateCallbacks cb;
      cb.on_token = [&](int32_t id) {
        r.tokens.push_back(id);
        return true;
      };
      r.st = generate(model(), *kv, ids, o, cb);
      outs.push_back(r);
    }
    EXPECT_EQ(outs[0].tokens, outs[1].tokens);
    EXPECT_EQ(outs[1].st.stop_reason, StopReason::ContextFull);
  }
}

TEST(SpecGenerate, RefusesADraftModelWithAnotherVocabulary) {
  // A synthetic model of another vocabulary size.
  const std::string path = std::filesystem::temp_directory_path() / ("polykv_spec_synth_" + std::to_string(::getpid()) + ".gguf");
  const auto r = test::polykv("synth --shape tiny --type q8_0 -o " + path);
  if (r.code != 0) GTEST_SKIP() << "synth failed: " << r.out;
  auto other = Model::load(path, backend());
  std::filesystem::remove(path);
  try {
    check_draft_vocab(model(), *other);
    FAIL() << "accepted a different vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocabular"), std::string::npos) << e.what();
  }
}

// The CLI: `run --spec X --spec-n-max K` prints exactly what `run` prints.
TEST(SpecCli, RunWithSpeculationPrintsThePlainGreedyText) {
  const std::string q4 = std::filesystem::temp_directory_path() / ("polykv_spec_cli_q4_" + std::to_string(::getpid()) + ".gguf");
  ASSERT_EQ(test::polykv("quantize " + test::embedded_model() + " " + q4 + " q4_0").code, 0);
  const std::string base_args = "run -m " + test::embedded_model() + " -n 32 --temp 0 -t 2 -p ";
  for (const std::string prompt : {"'def add(a, b):\n    return a + b\n\n\ndef'", "'import numpy as np\nimport'"}) {
    const auto base = test::polykv_streams(base_args + prompt);
    ASSERT_EQ(base.code, 0) << base.err;
    for (int k = 1; k <= 4; ++k) {
      for (const std::string& spec : {std::string("--spec ngram"), "--spec draft --model-draft " + q4}) {
        const auto s = test::polykv_streams(base_args + prompt + " " + spec + " --spec-n-max " + std::to_string(k));
        ASSERT_EQ(s.code, 0) << s.err;
        EXPECT_EQ(s.out, base.out) << spec << " k " << k;
        EXPECT_NE(s.err.find("accepted"), std::string::npos) << s.err;
      }
    }
  }
  std::filesystem::remove(q4);
}

// Without --spec-n-max each drafter takes its own default (engine/spec/make_drafter.h): 8 for n-gram (its drafts
// cost nothing), 3 for the draft model; the greedy text is the plain one either way.
TEST(SpecCli, DefaultNMaxPerDrafter) {
  SpecOptions o;
  o.kind = "ngram";
  EXPECT_EQ(o.resolved_n_max(), kDefaultNgramNMax);
  o.kind = "draft";
  EXPECT_EQ(o.resolved_n_max(), kDefaultSpecNMax);
  o.kind = "mtp";
  EXPECT_EQ(o.resolved_n_max(), kDefaultSpecNMax);
  o.n_max = 5;
  EXPECT_EQ(o.resolved_n_max(), 5);
  const std::string run = "run -m " + test::embedded_model() + " -n 24 --temp 0 -t 2 -p 'import numpy as np\nimport'";
  const auto base = test::polykv_streams(run);
  ASSERT_EQ(base.code, 0) << base.err;
  const auto ngram = test::polykv_streams(run + " --spec ngram");
  ASSERT_EQ(ngram.code, 0) << ngram.err;
  EXPECT_EQ(ngram.out, base.out);
  EXPECT_NE(ngram.err.find("(ngram, n-max 8)"), std::string::npos) << ngram.err;
  const auto draft = test::polykv_streams(run + " --spec draft --model-draft " + test::embedded_model());
  ASSERT_EQ(draft.code, 0) << draft.err;
  EXPECT_NE(draft.err.find("n-max 3)"), std::string::npos) << draft.err;
}

TEST(SpecCli, BadSpeculativeFlagsAreUsageErrors) {
  const std::string m = "run -m " + test::embedded_model() + " -n 4 -p hi ";
  for (const std::string bad : {"--spec bogus", "--spec ngram --spec-n-max 0", "--spec ngram --spec-n-max 17",
                                "--spec draft", "--model-draft x.gguf", "--spec ngram --model-draft x.gguf",
                                "--spec ngram+draft", "--spec ngram+", "--spec mtp+ngram",
                                "--spec ngram+mtp --model-draft x.gguf", "--spec ngram+draft --model-mtp x.gguf"}) {
    const auto r = test::polykv(m + bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
  }
  const auto mtp = test::polykv(m + "--spec mtp");
  EXPECT_EQ(mtp.code, 1) << mtp.out;  // the model has no MTP head (or this build has no MTP)
}

}  // namespace
}  // namespace polykv
