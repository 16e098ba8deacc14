// The engine's host time per agent and decode step (docs/ENGINE_STEP.md), on the CPU.
//
// DISABLED_EngineStepBench.HostTimePerAgentStep (bench/engine_step.sh runs it, old and new paths by
// POLYKV_ENGINE_STEP, engine/step_switch.h): N agents on one shared pool decode greedily on a
// synthetic model with llama-3.1-8b's vocabulary (128256) and layer count (32) but a width of 64, so
// the forward pass is cheap and the per-agent work outside it (sampling over 128k logits, block
// tables of 32 layers) shows. Block size 4 over a 2048-token context gives 513 blocks per agent,
// the table length of a 32k context in blocks of 64 (the GPU bench). One JSON line per run:
// (decode step seconds - forward seconds) / (sequences x steps) over decode-only steps, and the part
// after the forward (sampling, emitting). Environment: POLYKV_BENCH_AGENTS (1,16,64),
// POLYKV_BENCH_CONTEXT (2048), POLYKV_BENCH_BLOCK (4), POLYKV_BENCH_GEN (32), POLYKV_BENCH_LAYERS (32), POLYKV_BENCH_THREADS (1).
// host_cpu_ms_per_agent_step: the step thread's CPU time (robust to a loaded machine).
//
// EngineStep.AgentsMatchAloneOverManyBlocks: the same setup, small, checked: every agent's greedy
// tokens equal its prompt run alone (block tables that grow during decode are picked up).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/isa.h"
#include "engine/engine.h"
#include "engine/step_switch.h"
#include "engine_test_util.h"
#include "model/model.h"
#include "model/shapes.h"
#include "model/synth.h"

namespace polykv {
namespace {

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

std::vector<int> env_list(const char* name, const std::string& dflt) {
  const char* v = std::getenv(name);
  std::string s = v && *v ? v : dflt;
  std::vector<int> out;
  size_t at = 0;
  while (at < s.size()) {
    const size_t comma = s.find(',', at);
    out.push_back(std::atoi(s.substr(at, comma - at).c_str()));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// llama-3.1-8b's vocabulary and depth, 64 wide (one head of 64): written once per process.
// weight_std: large enough that attention over the context moves the argmax (a test of the KV).
std::string bench_model(int n_layer, int n_vocab, float weight_std = 0.02f) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("polykv_engine_step_L" + std::to_string(n_layer) + "_V" + std::to_string(n_vocab) + "_S" + std::to_string(int(weight_std * 1000)) + "_" +
                             std::to_string(getpid()) + ".gguf"))
                               .string();
  if (std::filesystem::exists(path)) return path;
  ModelShape s;
  s.name = "engine-step-bench";
  s.arch = "llama";
  s.n_layer = n_layer, s.n_embd = 64, s.n_ff = 64, s.n_head = 1, s.n_head_kv = 1, s.head_dim = 64;
  s.n_vocab = n_vocab, s.n_ctx = 131072;
  s.rope_theta = 500000.0f;
  s.tied_embeddings = true;
  SynthOptions o;
  o.type = DType::Q8_0;
  o.seed = 5;
  o.n_threads = 2;
  o.weight_std = weight_std;
  write_synth_model(path, s, o);
  return path;
}

struct RunOut {
  std::vector<std::vector<int32_t>> tokens;  // per agent
  ServiceMetrics m0, m1;                     // around the agents' phase
};

// N agents on one pool of `context` random tokens, each with its own random suffix, `gen` greedy tokens.
// temperature > 0: sampled with the agent's own seed (top-k 40, top-p 0.95, min-p 0.05: the defaults).
RunOut run_agents(Model& model, int n_agents, int context, int block, int suffix, int gen, uint32_t seed,
                  float temperature = 0) {
  std::mt19937 rng(seed);
  const int32_t n_vocab = model.config().n_vocab;
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = int32_t(rng() % uint32_t(n_vocab));
    return t;
  };
  EngineOptions o;
  o.parallel = n_agents;
  o.block_tokens = block;
  o.k_type = "f16";
  o.v_type = "f16";
  o.step_tokens = std::max(512, n_agents * suffix);  // every suffix in one step: all agents decode together
  o.n_ctx = context + suffix + gen + 1;
  o.kv_tokens = context + n_agents * (suffix + gen + 2 * block) + 4 * block;
  Engine engine(model, nullptr, o);
  engine.create_pool("ctx", random_tokens(context), "", "");
  std::vector<test::Collector> c(static_cast<size_t>(n_agents));
  RunOut out;
  out.m0 = engine.metrics();
  for (int a = 0; a < n_agents; ++a) {
    GenerationRequest r = c[size_t(a)].request(random_tokens(suffix), gen, "ctx", /*ignore_eos=*/true);
    r.sampling.temperature = temperature;
    r.sampling.seed = 1000 + uint64_t(a);
    engine.submit(std::move(r));
  }
  for (auto& x : c) x.wait();
  out.m1 = engine.metrics();
  for (auto& x : c) {
    EXPECT_EQ(x.info.reason, FinishReason::Length) << x.info.error;
    out.tokens.push_back(x.ids);
  }
  return out;
}

double load1() {
  double l[3] = {0, 0, 0};
  return getloadavg(l, 3) >= 1 ? l[0] : -1;
}

TEST(EngineStep, AgentsMatchAloneOverManyBlocks) {
  // 4 layers, a 1024 vocabulary; 6 agents decode 10 tokens on a 70-token pool whose partial last block
  // each agent copies on write. Blocks of 4 and a suffix of 5: tables grow every 4 decode steps, the
  // copy comes with new blocks. Blocks of 8 and a suffix of 2: the suffix fits the copied block, so
  // the table changes at the same length (a rebuild keyed on the length alone would write the pool's
  // shared block).
  const std::string path = bench_model(4, 1024, 0.5f);
  const std::unique_ptr<Backend> be = make_backend({"cpu", 2});
  auto model = Model::load(path, *be);
  for (const auto [block, suffix] : {std::pair{4, 5}, std::pair{8, 2}}) {
    SCOPED_TRACE("block " + std::to_string(block) + " suffix " + std::to_string(suffix));
    const RunOut many = run_agents(*model, 6, 70, block, suffix, 10, 21);
    ASSERT_EQ(many.tokens.size(), 6u);
    // Each agent alone (same rng stream: the same pool and suffixes) gives the same tokens: its own
    // engine, one agent at a time.
    std::mt19937 rng(21);
    auto random_tokens = [&](int n) {
      std::vector<int32_t> t(static_cast<size_t>(n));
      for (auto& x : t) x = int32_t(rng() % 1024u);
      return t;
    };
    const std::vector<int32_t> pool = random_tokens(70);
    for (int a = 0; a < 6; ++a) {
      const std::vector<int32_t> sfx = random_tokens(suffix);
      EngineOptions o;
      o.parallel = 1;
      o.block_tokens = block;
      o.k_type = o.v_type = "f16";
      o.n_ctx = 128;
      o.kv_tokens = 256;
      Engine e(*model, nullptr, o);
      test::Collector c;
      std::vector<int32_t> prompt = pool;
      prompt.insert(prompt.end(), sfx.begin(), sfx.end());
      e.submit(c.request(prompt, 10, "", true));
      c.wait();
      EXPECT_EQ(c.ids, many.tokens[size_t(a)]) << "agent " << a;
    }
    EXPECT_GT(many.m1.decode_steps_total - many.m0.decode_steps_total, 0);
    // Decode-only steps carry every decoding agent (how many were admitted by then depends on timing).
    EXPECT_GE(many.m1.decode_step_seqs_total - many.m0.decode_step_seqs_total,
              many.m1.decode_steps_total - many.m0.decode_steps_total);
    EXPECT_LE(many.m1.decode_step_seqs_total - many.m0.decode_step_seqs_total,
              6 * (many.m1.decode_steps_total - many.m0.decode_steps_total));
    EXPECT_GE(many.m1.decode_host_cpu_seconds_total - many.m0.decode_host_cpu_seconds_total, 0.0);
  }
  std::filesystem::remove(path);
}

// Sampling on the engine's sample threads (POLYKV_ENGINE_SAMPLE_THREADS, read by each Engine) gives
// every agent the tokens of sampling on the step thread, greedy and seeded at temperature 0.8.
TEST(EngineStep, ParallelSamplingGivesTheSerialTokens) {
  const std::string path = bench_model(2, 1024);
  const std::unique_ptr<Backend> be = make_backend({"cpu", 2});
  auto model = Model::load(path, *be);
  auto run = [&](const char* threads, float temperature) {
    setenv("POLYKV_ENGINE_SAMPLE_THREADS", threads, 1);
    RunOut r = run_agents(*model, 12, 40, 4, 3, 9, 33, temperature);
    unsetenv("POLYKV_ENGINE_SAMPLE_THREADS");
    return r.tokens;
  };
  for (float t : {0.0f, 0.8f}) {
    const auto serial = run("0", t), parallel = run("3", t);
    ASSERT_EQ(serial.size(), 12u);
    EXPECT_EQ(parallel, serial) << "temperature " << t;
    // Not vacuous: the agents do not all say the same thing.
    EXPECT_NE(serial.front(), serial.back()) << "temperature " << t;
  }
  std::filesystem::remove(path);
}

TEST(EngineStep, DISABLED_HostTimePerAgentStep) {
  const int layers = env_int("POLYKV_BENCH_LAYERS", 32);
  const int context = env_int("POLYKV_BENCH_CONTEXT", 2048);
  const int block = env_int("POLYKV_BENCH_BLOCK", 4);
  const int gen = env_int("POLYKV_BENCH_GEN", 32);
  const std::string path = bench_model(layers, 128256);
  // One thread by default: no pool workers spinning beside the step thread on a small machine.
  const std::unique_ptr<Backend> be = make_backend({"cpu", env_int("POLYKV_BENCH_THREADS", 1)});
  auto model = Model::load(path, *be);
  for (int n : env_list("POLYKV_BENCH_AGENTS", "1,16,64")) {
    const RunOut r = run_agents(*model, n, context, block, 32, gen, 1234);
    const double steps = double(r.m1.decode_steps_total - r.m0.decode_steps_total);
    const double seqs = double(r.m1.decode_step_seqs_total - r.m0.decode_step_seqs_total);
    const double step_s = r.m1.decode_step_seconds_total - r.m0.decode_step_seconds_total;
    const double fwd_s = r.m1.decode_forward_seconds_total - r.m0.decode_forward_seconds_total;
    const double post_s = r.m1.decode_post_seconds_total - r.m0.decode_post_seconds_total;
    const double cpu_s = r.m1.decode_host_cpu_seconds_total - r.m0.decode_host_cpu_seconds_total;
    std::printf(
        "{\"engine_step\": \"%s\", \"isa\": \"%s\", \"agents\": %d, \"layers\": %d, \"vocab\": 128256, \"context\": %d, "
        "\"block_tokens\": %d, \"blocks_per_agent\": %d, \"decode_steps\": %.0f, \"decode_seqs\": %.0f, "
        "\"step_s\": %.6f, \"forward_s\": %.6f, \"post_s\": %.6f, \"host_ms_per_agent_step\": %.5f, "
        "\"post_ms_per_agent_step\": %.5f, \"host_cpu_ms_per_agent_step\": %.5f, \"host_ms_per_step\": %.4f, "
        "\"load1\": %.2f}\n",
        engine_step_old() ? "old" : "new", isa_name(active_isa()), n, layers, context, block,
        (context + 32 + gen + block - 1) / block, steps, seqs, step_s, fwd_s, post_s,
        seqs > 0 ? 1e3 * (step_s - fwd_s) / seqs : 0.0, seqs > 0 ? 1e3 * post_s / seqs : 0.0,
        seqs > 0 ? 1e3 * cpu_s / seqs : 0.0,
        steps > 0 ? 1e3 * (step_s - fwd_s) / steps : 0.0, load1());
    std::fflush(stdout);
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace polykv
