// The Engine on the CUDA backend: a named pool in GPU memory, 16 agents attached to it (their shared
// prefix read through the cascade kernels), continuous batching of their suffixes and decode steps,
// greedy outputs compared with each full prompt run alone on the same GPU. The GPU's kernels are not
// batch-invariant (a step of 16 rows takes other matmul paths than a step of one), so near-ties may
// flip a greedy token: most agents, not all, must match, and every one must run to its length.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "../engine_test_util.h"
#include "../test_util.h"
#include "backend/backend.h"
#include "cuda_test_util.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/sequence_kv.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace polykv {
namespace {

using test::Collector;

TEST(EngineCuda, AgentsOnOnePoolInGpuMemory) {
  POLYKV_REQUIRE_GPU();
  auto backend = make_backend({"cuda", 0});
  auto model = Model::load(test::embedded_model(), *backend);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  const std::vector<int32_t> doc = tok.encode(
      "import os\nimport sys\n\nclass Config:\n    \"\"\"Settings read from the environment.\"\"\"\n\n"
      "    def __init__(self, prefix='APP_'):\n        self.prefix = prefix\n        self.values = {}\n"
      "        for key, value in os.environ.items():\n            if key.startswith(prefix):\n"
      "                self.values[key[len(prefix):].lower()] = value\n\n",
      true, false);
  EngineOptions o;
  o.parallel = 16;
  o.kv_tokens = 8192;
  o.block_tokens = 32;
  o.model_id = "embedded";
  const int n_agents = 16, n_gen = 12;
  std::vector<std::vector<int32_t>> suffixes;
  std::vector<std::unique_ptr<Collector>> cs;
  {
    Engine engine(*model, nullptr, o);
    const PoolInfo pi = engine.create_pool("doc", doc, "", "");
    EXPECT_EQ(pi.n_tokens, int(doc.size()));
    for (int a = 0; a < n_agents; ++a) {
      suffixes.push_back(tok.encode("\ndef agent_" + std::to_string(a) + "(config):\n", false, false));
      cs.push_back(std::make_unique<Collector>());
      engine.submit(cs.back()->request(suffixes.back(), n_gen, "doc", /*ignore_eos=*/true));
    }
    for (auto& c : cs) c->wait();
    EXPECT_EQ(engine.get_pool("doc")->hits, n_agents);
    EXPECT_TRUE(engine.delete_pool("doc"));
  }
  int same = 0;
  for (int a = 0; a < n_agents; ++a) {
    SCOPED_TRACE(a);
    EXPECT_EQ(cs[size_t(a)]->info.reason, FinishReason::Length) << cs[size_t(a)]->info.error;
    EXPECT_EQ(cs[size_t(a)]->info.cached_tokens, int(doc.size()));
    ASSERT_EQ(cs[size_t(a)]->ids.size(), size_t(n_gen));
    std::vector<int32_t> full = doc;
    full.insert(full.end(), suffixes[size_t(a)].begin(), suffixes[size_t(a)].end());
    SequenceKvOptions ko;
    ko.max_tokens = 1024;
    auto kv = make_sequence_kv(*model, ko);
    std::vector<int32_t> alone;
    GenerateOptions go;
    go.n_predict = n_gen;
    go.sampling.temperature = 0;
    GenerateCallbacks cb;
    cb.on_token = [&](int32_t id) {
      alone.push_back(id);
      return true;
    };
    generate(*model, *kv, full, go, cb);
    same += alone == cs[size_t(a)]->ids;
  }
  std::printf("agents whose 12 greedy tokens equal their prompt run alone on the GPU: %d of %d\n", same, n_agents);
  EXPECT_GE(same, n_agents * 3 / 4);
}

}  // namespace
}  // namespace polykv
