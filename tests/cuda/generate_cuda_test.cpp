// Pipelined greedy decoding on the GPU (engine/generate.cpp decode_greedy_pipelined: each step fed the
// previous step's argmax in device memory, the next step issued before the host reads the token; the
// backend's upload_async / download_async, cuda_async_copies.h) against one step at a time and against
// the host's argmax of downloaded logits: the same tokens, stop reasons and KV lengths, for every stop.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "../scoped_env.h"
#include "../test_util.h"
#include "backend/backend.h"
#include "cuda_test_util.h"
#include "engine/generate.h"
#include "engine/sequence_kv.h"
#include "model/model.h"

namespace polykv {
namespace {

struct GenRun {
  std::vector<int32_t> tokens;
  GenerateStats st;
  int kv_tokens = 0;
};

test::ScopedEnv env(const char* argmax, const char* pipeline) {
  return test::ScopedEnv{{"POLYKV_ENGINE_ARGMAX", argmax}, {"POLYKV_GREEDY_PIPELINE", pipeline}};
}

// stop: 0 token limit, 1 context full, 2 end of text (the 5th token), 3 the callback (after the 4th).
GenRun run(Model& m, const std::string& kt, const std::string& vt, int stop) {
  const std::vector<int32_t> prompt = {1, 400, 401, 402, 403, 404, 405};
  SequenceKvOptions kvo;
  kvo.k_type = kt;
  kvo.v_type = vt;
  kvo.max_tokens = stop == 1 ? int(prompt.size()) + 9 : 256;
  auto kv = make_sequence_kv(m, kvo);
  GenerateOptions o;
  o.n_predict = stop == 1 ? -1 : 40;
  o.sampling.temperature = 0;
  GenRun r;
  GenerateCallbacks cb;
  int seen = 0;
  if (stop == 2) cb.is_eog = [&](int32_t) { return ++seen == 5; };
  cb.on_token = [&](int32_t id) {
    r.tokens.push_back(id);
    return stop != 3 || r.tokens.size() < 4;
  };
  r.st = generate(m, *kv, prompt, o, cb);
  r.kv_tokens = kv->n_tokens();
  return r;
}

TEST(GenerateCuda, PipelinedGreedyEqualsOneStepAtATimeAndTheHostArgmax) {
  POLYKV_REQUIRE_GPU();
  auto be = make_backend({"cuda", 0, false});
  auto m = Model::load(test::embedded_model(), *be);
  for (const auto& [kt, vt] : {std::pair<std::string, std::string>{"q8_0", "turbo3t"}, {"f16", "f16"}}) {
    for (int stop = 0; stop < 4; ++stop) {
      GenRun host, one, piped;
      {
        const auto e = env("host", "0");
        host = run(*m, kt, vt, stop);
      }
      {
        const auto e = env("device", "0");
        one = run(*m, kt, vt, stop);
      }
      {
        const auto e = env("device", "1");
        piped = run(*m, kt, vt, stop);
      }
      const std::string what = kt + "/" + vt + " stop " + std::to_string(stop);
      EXPECT_FALSE(host.tokens.empty()) << what;
      for (const GenRun* r : {&one, &piped}) {
        const std::string which = what + (r == &piped ? " pipelined" : " one step at a time");
        EXPECT_EQ(r->tokens, host.tokens) << which;
        EXPECT_EQ(r->st.stop_reason, host.st.stop_reason) << which;
        EXPECT_EQ(r->kv_tokens, host.kv_tokens) << which;
      }
    }
  }
}

}  // namespace
}  // namespace polykv
