// The generation loop (engine/generate.h) on the embedded model: why it stopped (each StopReason) and
// the prefill progress callback.
#include <gtest/gtest.h>

#include <utility>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "engine/generate.h"
#include "scoped_env.h"
#include "test_util.h"

namespace polykv {
namespace {

struct Outcome {
  GenerateStats stats;
  std::vector<int32_t> tokens;
  std::vector<std::pair<int, int>> progress;
  int kv_tokens = 0;  // what the KV holds afterwards
};

Model& model() {
  static CpuBackend backend(2);
  static std::unique_ptr<Model> m = Model::load(test::embedded_model(), backend);
  return *m;
}

// Greedy generation from a fixed 5-token prompt in a cache of max_tokens.
Outcome run(int max_tokens, int n_predict, GenerateCallbacks cb, int prefill_chunk = 512, float temperature = 0) {
  const std::vector<int32_t> prompt = {1, 400, 401, 402, 403};
  KvCache kv = make_kv_cache(model().kv_shape(), "f16", "f16", max_tokens);
  GenerateOptions opts;
  opts.n_predict = n_predict;
  opts.prefill_chunk = prefill_chunk;
  opts.sampling.temperature = temperature;
  opts.sampling.seed = 7;
  Outcome r;
  auto on_token = cb.on_token;
  cb.on_token = [&](int32_t id) {
    r.tokens.push_back(id);
    return on_token ? on_token(id) : true;
  };
  cb.on_prefill = [&](int done, int total) { r.progress.emplace_back(done, total); };
  r.stats = generate(model(), kv, prompt, opts, cb);
  r.kv_tokens = kv.n_tokens();
  return r;
}

TEST(Generate, StopsAtTheTokenLimit) {
  const Outcome r = run(64, 3, {});
  EXPECT_EQ(r.stats.stop_reason, StopReason::TokenLimit);
  EXPECT_EQ(r.stats.n_generated, 3);
  EXPECT_EQ(r.tokens.size(), 3u);
  EXPECT_EQ(run(64, 0, {}).stats.stop_reason, StopReason::TokenLimit);
}

TEST(Generate, StopsWhenTheContextIsFull) {
  const Outcome r = run(8, -1, {});  // 5 prompt tokens: 3 more fit, the 4th is emitted but not fed back
  EXPECT_EQ(r.stats.stop_reason, StopReason::ContextFull);
  EXPECT_EQ(r.stats.n_generated, 4);
}

TEST(Generate, StopsAtEndOfText) {
  GenerateCallbacks cb;
  int seen = 0;
  cb.is_eog = [&](int32_t) { return ++seen == 3; };  // the third sampled token ends the text
  const Outcome r = run(64, 10, cb);
  EXPECT_EQ(r.stats.stop_reason, StopReason::EndOfText);
  EXPECT_EQ(r.stats.n_generated, 2);
}

TEST(Generate, StopsWhenTheCallbackSaysSo) {
  GenerateCallbacks cb;
  cb.on_token = [n = 0](int32_t) mutable { return ++n < 2; };
  const Outcome r = run(64, 10, cb);
  EXPECT_EQ(r.stats.stop_reason, StopReason::Callback);
  EXPECT_EQ(r.stats.n_generated, 2);
}

TEST(Generate, ReportsPrefillProgressPerChunk) {
  const Outcome r = run(64, 1, {}, 2);
  EXPECT_EQ(r.progress, (std::vector<std::pair<int, int>>{{0, 5}, {2, 5}, {4, 5}, {5, 5}}));
}

// Greedy steps with the backend's argmax (Model::BatchSeq::argmax: what GPU backends do by default;
// POLYKV_ENGINE_ARGMAX=device makes the CPU backend do it too) give the tokens of the host's sampler;
// sampled steps (temperature > 0) keep the sampler and its random stream.
TEST(Generate, BackendArgmaxGivesTheSamplersTokens) {
  const Outcome host = run(64, 12, {}), host_sampled = run(64, 12, {}, 512, 0.8f);
  const test::ScopedEnv env{{"POLYKV_ENGINE_ARGMAX", "device"}};
  const Outcome device = run(64, 12, {}), device_sampled = run(64, 12, {}, 512, 0.8f);
  EXPECT_EQ(device.tokens, host.tokens);
  EXPECT_EQ(device.stats.stop_reason, StopReason::TokenLimit);
  EXPECT_EQ(device_sampled.tokens, host_sampled.tokens);
  EXPECT_NE(host_sampled.tokens, host.tokens);  // the sampled run is not the greedy one
}

// Pipelined greedy steps (engine/generate.cpp decode_greedy_pipelined: each step fed the previous step's
// argmax on the backend, one step issued ahead of the host) against one step at a time on the host's
// logits, for every stop: the same tokens, the same reason, and the KV holding the same positions (the
// step issued past a stop is taken back).
TEST(Generate, PipelinedGreedyStopsAsThePlainLoop) {
  auto env = [](const char* argmax, const char* pipeline) {
    return test::ScopedEnv{{"POLYKV_ENGINE_ARGMAX", argmax}, {"POLYKV_GREEDY_PIPELINE", pipeline}};
  };
  auto eog_third = [] {
    GenerateCallbacks cb;
    cb.is_eog = [seen = 0](int32_t) mutable { return ++seen == 3; };
    return cb;
  };
  auto stop_second = [] {
    GenerateCallbacks cb;
    cb.on_token = [n = 0](int32_t) mutable { return ++n < 2; };
    return cb;
  };
  struct Case {
    const char* what;
    int max_tokens, n_predict;
    GenerateCallbacks cb;
  };
  const Case cases[] = {{"token limit", 64, 12, {}},      {"token limit 1", 64, 1, {}},
                        {"context full", 8, -1, {}},      {"end of text", 64, 10, eog_third()},
                        {"callback", 64, 10, stop_second()}};
  for (const Case& c : cases) {
    Outcome want, got, one_by_one;
    {
      const auto e = env("host", "0");
      want = run(c.max_tokens, c.n_predict, c.cb);
    }
    {
      const auto e = env("device", "1");
      got = run(c.max_tokens, c.n_predict, c.cb);
    }
    {
      const auto e = env("device", "0");
      one_by_one = run(c.max_tokens, c.n_predict, c.cb);
    }
    for (const Outcome* o : {&got, &one_by_one}) {
      const char* which = o == &got ? " (pipelined)" : " (one step at a time)";
      EXPECT_EQ(o->tokens, want.tokens) << c.what << which;
      EXPECT_EQ(o->stats.stop_reason, want.stats.stop_reason) << c.what << which;
      EXPECT_EQ(o->stats.n_generated, want.stats.n_generated) << c.what << which;
      EXPECT_EQ(o->kv_tokens, want.kv_tokens) << c.what << which;
    }
    EXPECT_GT(want.tokens.size(), 0u) << c.what;
  }
}

// A chained step needs the one-row argmax step of the same sequence right before it.
TEST(Generate, ChainedStepWithoutAnArgmaxStepIsAnError) {
  KvCache kv = make_kv_cache(model().kv_shape(), "f16", "f16", 16), other = make_kv_cache(model().kv_shape(), "f16", "f16", 16);
  const int32_t tok = 400;
  std::vector<float> logits(size_t(model().config().n_vocab));
  model().forward(std::span(&tok, 1), kv, logits.data(), false);  // logits, no argmax
  Model::BatchSeq one{std::span(&tok, 1), &kv, nullptr, false};
  int32_t out = -1;
  one.argmax = &out;
  one.argmax_async = true;
  one.token_from_last_argmax = true;
  EXPECT_THROW(model().forward_batch(std::span<const Model::BatchSeq>(&one, 1)), Error);
  one.token_from_last_argmax = false;
  model().forward_batch(std::span<const Model::BatchSeq>(&one, 1));  // an argmax step of kv
  Model::BatchSeq chained_other = one;
  chained_other.kv = &other;
  chained_other.token_from_last_argmax = true;
  EXPECT_THROW(model().forward_batch(std::span<const Model::BatchSeq>(&chained_other, 1)), Error);  // another sequence
  EXPECT_TRUE(model().finish_argmax());
  EXPECT_GE(out, 0);
  EXPECT_FALSE(model().finish_argmax());
  EXPECT_EQ(kv.n_tokens(), 2);
  EXPECT_EQ(other.n_tokens(), 0);
}

// Misused async steps are refused before any work: the KV does not move.
TEST(Generate, AsyncArgmaxMisuseIsAnErrorBeforeTheStep) {
  KvCache kv = make_kv_cache(model().kv_shape(), "f16", "f16", 16);
  const int32_t tok = 400;
  std::vector<float> logits(size_t(model().config().n_vocab));
  int32_t out[4] = {-1, -1, -1, -1};
  Model::BatchSeq one{std::span(&tok, 1), &kv, logits.data(), false};  // logits too: not allowed
  one.argmax = &out[0];
  one.argmax_async = true;
  EXPECT_THROW(model().forward_batch(std::span<const Model::BatchSeq>(&one, 1)), Error);
  EXPECT_EQ(kv.n_tokens(), 0);
  one.logits = nullptr;
  for (int i = 0; i < 3; ++i) {  // three pending results: the most a model keeps
    one.argmax = &out[i];
    model().forward_batch(std::span<const Model::BatchSeq>(&one, 1));
  }
  one.argmax = &out[3];
  EXPECT_THROW(model().forward_batch(std::span<const Model::BatchSeq>(&one, 1)), Error);  // a fourth
  EXPECT_EQ(kv.n_tokens(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(model().finish_argmax());
  EXPECT_FALSE(model().finish_argmax());
  for (int i = 0; i < 3; ++i) EXPECT_GE(out[i], 0);
  EXPECT_EQ(out[3], -1);
}

TEST(Generate, StopReasonTexts) {
  EXPECT_STREQ(stop_reason_text(StopReason::EndOfText), "end of text");
  EXPECT_STREQ(stop_reason_text(StopReason::TokenLimit), "token limit");
  EXPECT_STREQ(stop_reason_text(StopReason::ContextFull), "context full");
}

}  // namespace
}  // namespace polykv
