// `polykv bench-agents -m FILE [--agents 1,4,16,64] [--context 4096] [--suffix 32] [--gen 32]
//  [--share on|off|prefix|both|all] [--prefix-wait on|off] [-t T] [-ctk K -ctv V] [--json]`: many agents over one shared context, in
// the engine (no HTTP). Per agent count N and sharing mode:
//   share on:  the context is prefilled once as a named pool; N agents attach to it, each with its
//              own random suffix, and generate --gen tokens (greedy, end-of-text ignored);
//   share off: each agent sends context + suffix with its own cache_salt, so nothing is shared
//              and every agent prefills and holds its own copy (what N independent sessions cost);
//   share prefix: each agent sends context + suffix with no salt: automatic prefix caching shares
//              the context's full blocks (hybrid models: up to the last block whose end has a
//              recurrent-state checkpoint), with no named pool. JSON: "share_mode".
// Reported: KV bytes in use at the peak; time to first token of agent 1 (share on: the pool's
// prefill plus agent 1's own wait) and of agents 2..N; aggregate decode tokens/s over the window in
// which every agent is decoding (tokens stamped in that window / its length).
// --arrival together (default): all agents' first requests come at once (agents 2..N wait for one
// step that prefills all their suffixes); staggered: agent k + 1 arrives when agent k has its first
// token, so each agent's TTFT is its own suffix's prefill over the cached context.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "backend/backend.h"
#include "backend/cpu/kv_row_ops.h"
#include "backend/cpu/matmul.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/step_switch.h"
#include "model/model.h"

namespace polykv::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct AgentLog {
  std::vector<Clock::time_point> token_times;
  FinishInfo info;
  bool done = false;
};

struct RunResult {
  double ttft_first = 0, ttft_rest_mean = 0, ttft_rest_max = 0;
  double pool_prefill_s = 0;
  double decode_tok_s = 0, decode_window_s = 0;
  size_t kv_peak_bytes = 0;
  int64_t tokens = 0;
  // Phase 1 (arrival): prompt tokens and those served from cached or shared KV; hybrid models' state
  // checkpoints held at its end.
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0;
  int state_checkpoints = 0;
  // The engine's own account of phase 2 (decode): steps, rows, wall seconds of its steps and of the
  // model's forward passes inside them (the rest of a step is host work: scheduling, sampling).
  int64_t steps = 0, step_rows = 0;
  double step_s = 0, forward_s = 0;
  // The same over decode-only steps (no prompt chunk), and their seconds after the forward pass
  // (sampling, emitting): (step_s - forward_s) / seqs is the host time per agent and step.
  int64_t dec_steps = 0, dec_seqs = 0;
  double dec_step_s = 0, dec_forward_s = 0, dec_post_s = 0, dec_host_cpu_s = 0;
};

enum class Share { Pool, Off, Prefix };

const char* share_name(Share s) { return s == Share::Pool ? "on" : s == Share::Off ? "off" : "prefix"; }

RunResult run_once(Model& model, const EngineOptions& base, int n_agents, Share mode, int context, int suffix,
                   int gen, uint32_t seed, bool staggered) {
  const bool share = mode == Share::Pool;
  std::mt19937 rng(seed);
  const int32_t n_vocab = model.config().n_vocab;
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = int32_t(rng() % uint32_t(n_vocab));
    return t;
  };
  const std::vector<int32_t> doc = random_tokens(context);
  EngineOptions o = base;
  o.parallel = n_agents;
  const int per_agent = suffix + gen + o.block_tokens;
  // Prefix: as large as private copies (agents arriving together all compute the context; the peak in
  // use is what is measured, not the pool's size).
  o.kv_tokens = share ? context + n_agents * per_agent + 4 * o.block_tokens
                      : n_agents * (context + per_agent) + 4 * o.block_tokens;
  o.n_ctx = context + suffix + gen + 1;
  Engine engine(model, nullptr, o);  // no end-of-generation token: every agent generates `gen`

  RunResult r;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<AgentLog> logs(static_cast<size_t>(n_agents));
  auto request = [&](int a, std::vector<int32_t> prompt) {
    GenerationRequest q;
    q.prompt = std::move(prompt);
    q.max_tokens = gen;
    q.sampling.temperature = 0;
    q.on_token = [&, a](const TokenEvent&) {
      std::lock_guard<std::mutex> lk(mu);
      std::vector<Clock::time_point>& t = logs[size_t(a)].token_times;
      t.push_back(Clock::now());
      // A staggered arrival waits for the previous agent's first token; nothing waits for later ones
      // (a wake-up per token cost the step thread futex calls and mutex hand-offs: docs/ENGINE_STEP.md).
      if (t.size() == 1 || engine_step_old()) cv.notify_all();
      return true;
    };
    q.on_done = [&, a](const FinishInfo& fi) {
      std::lock_guard<std::mutex> lk(mu);
      logs[size_t(a)].info = fi;
      logs[size_t(a)].done = true;
      cv.notify_all();
    };
    return q;
  };
  std::atomic<bool> polling{true};
  std::atomic<size_t> peak{0};
  std::thread poller([&] {
    while (polling) {
      const ServiceMetrics m = engine.metrics();
      peak = std::max(peak.load(), size_t(m.kv_blocks_used) * m.kv_bytes_per_block);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  const auto t0 = Clock::now();
  if (share) {
    engine.create_pool("context", doc, "", "");
    r.pool_prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  // Phase 1, arrival: the agents' prompts come in (agent 1 first) and each waits for its first token.
  // Phase 2, decode: every agent asks for `gen` tokens after the same prompt. Its prompt's blocks are
  // in the prefix cache from phase 1 (its own copy, or the shared pool's), so all agents start
  // decoding within a step or two of each other and the window in which all decode is long.
  std::vector<std::vector<int32_t>> prompts;
  for (int a = 0; a < n_agents; ++a) {
    std::vector<int32_t> prompt = share ? std::vector<int32_t>() : doc;
    const std::vector<int32_t> sfx = random_tokens(suffix);
    prompt.insert(prompt.end(), sfx.begin(), sfx.end());
    prompts.push_back(std::move(prompt));
  }
  auto run_phase = [&](int max_tokens, std::vector<Clock::time_point>& submitted, bool one_by_one) {
    for (auto& l : logs) {
      l = AgentLog{};
      l.token_times.reserve(size_t(max_tokens));
    }
    for (int a = 0; a < n_agents; ++a) {
      GenerationRequest q = request(a, prompts[size_t(a)]);
      q.max_tokens = max_tokens;
      if (share) q.pool = "context";
      else if (mode == Share::Off) q.cache_salt = "agent-" + std::to_string(a);
      submitted[size_t(a)] = Clock::now();
      engine.submit(std::move(q));
      if (one_by_one) {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return logs[size_t(a)].done || !logs[size_t(a)].token_times.empty(); });
      }
    }
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return std::all_of(logs.begin(), logs.end(), [](const AgentLog& l) { return l.done; }); });
    for (int a = 0; a < n_agents; ++a)
      check(logs[size_t(a)].info.reason == FinishReason::Length && !logs[size_t(a)].token_times.empty(),
            "bench-agents: agent ", a, " ended early: ", logs[size_t(a)].info.error);
  };
  std::vector<Clock::time_point> submitted(static_cast<size_t>(n_agents));
  run_phase(1, submitted, staggered);
  for (int a = 0; a < n_agents; ++a) {
    const double ttft =
        std::chrono::duration<double>(logs[size_t(a)].token_times.front() - (a == 0 ? t0 : submitted[size_t(a)])).count();
    if (a == 0) {
      r.ttft_first = ttft;
    } else {
      r.ttft_rest_mean += ttft / (n_agents - 1);
      r.ttft_rest_max = std::max(r.ttft_rest_max, ttft);
    }
  }
  const ServiceMetrics m0 = engine.metrics();
  r.prompt_tokens = m0.prompt_tokens_total;
  r.cached_prompt_tokens = m0.cached_prompt_tokens_total;
  r.state_checkpoints = m0.state_checkpoints;
  run_phase(gen, submitted, false);
  const ServiceMetrics m1 = engine.metrics();
  r.steps = m1.steps_total - m0.steps_total;
  r.step_rows = m1.step_rows_total - m0.step_rows_total;
  r.step_s = m1.step_seconds_total - m0.step_seconds_total;
  r.forward_s = m1.forward_seconds_total - m0.forward_seconds_total;
  r.dec_steps = m1.decode_steps_total - m0.decode_steps_total;
  r.dec_seqs = m1.decode_step_seqs_total - m0.decode_step_seqs_total;
  r.dec_step_s = m1.decode_step_seconds_total - m0.decode_step_seconds_total;
  r.dec_forward_s = m1.decode_forward_seconds_total - m0.decode_forward_seconds_total;
  r.dec_post_s = m1.decode_post_seconds_total - m0.decode_post_seconds_total;
  r.dec_host_cpu_s = m1.decode_host_cpu_seconds_total - m0.decode_host_cpu_seconds_total;
  polling = false;
  poller.join();
  r.kv_peak_bytes = peak;
  for (const AgentLog& l : logs) r.tokens += int64_t(l.token_times.size());
  // The window in which every agent decodes: from the last first token to the first last token.
  Clock::time_point w0 = logs[0].token_times.front(), w1 = logs[0].token_times.back();
  for (const AgentLog& l : logs) {
    w0 = std::max(w0, l.token_times.front());
    w1 = std::min(w1, l.token_times.back());
  }
  int64_t in_window = 0;
  for (const AgentLog& l : logs)
    for (auto t : l.token_times) in_window += (t > w0 && t <= w1) ? 1 : 0;
  r.decode_window_s = std::chrono::duration<double>(w1 - w0).count();
  r.decode_tok_s = r.decode_window_s > 0 ? double(in_window) / r.decode_window_s : 0;
  return r;
}

}  // namespace

int cmd_bench_agents(int argc, char** argv) {
  CLI::App app{"Many agents over one shared context: KV memory, time to first token, aggregate decode",
               "polykv bench-agents"};
  std::string model_path, ctk = kDefaultCacheTypeK, ctv = kDefaultCacheTypeV, agents_list = "1,4,16,64", share = "both";
  std::string arrival = "together";
  int context = 4096, suffix = 32, gen = 32, threads = 0, reps = 1;
  bool json = false;
  app.add_option("-m,--model", model_path, "GGUF model")->required();
  RopeOverride rope;
  add_rope_options(app, rope);
  app.add_option("--agents", agents_list, "comma-separated agent counts, each 1..1024")
      ->check(token_ids_check())
      ->capture_default_str();
  app.add_option("--context", context, "shared context tokens")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--suffix", suffix, "private suffix tokens per agent")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  app.add_option("--gen", gen, "tokens each agent generates")->check(CLI::Range(2, 1 << 16))->capture_default_str();
  app.add_option("--share", share,
                 "on (a named pool), off (private copies), prefix (automatic prefix caching), both (on and off) or all")
      ->check(CLI::IsMember({"on", "off", "prefix", "both", "all"}))
      ->capture_default_str();
  app.add_option("--arrival", arrival, "together (all agents' first requests at once) or staggered (one after another's first token)")
      ->check(CLI::IsMember({"together", "staggered"}))
      ->capture_default_str();
  std::string prefix_wait = "on";
  app.add_option("--prefix-wait", prefix_wait,
                 "prefix-aware admission: a request waits for a running one that computes its prefix (on, off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  add_threads_option(app, threads);
  app.add_option("-r,--repetitions", reps, "repetitions of each configuration (all reported)")->check(CLI::Range(1, 100));
  app.add_option("--cache-type-k", ctk, kv_type_help("K"))->check(kv_k_type_check())->capture_default_str();
  app.add_option("--cache-type-v", ctv, kv_type_help("V"))->check(kv_v_type_check())->capture_default_str();
  app.add_flag("--json", json, "print one JSON object per run instead of a table");
  std::string device = "auto";
  add_device_option(app, device);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  std::vector<int> counts;
  for (int32_t n : parse_ids(agents_list)) {
    usage_check(n >= 1 && n <= 1024, "--agents: counts must be in [1, 1024]");
    counts.push_back(int(n));
  }

  const std::unique_ptr<Backend> backend = make_backend({device, threads});
  auto model = Model::load(model_path, *backend, rope);
  EngineOptions base;
  base.k_type = ctk;
  base.v_type = ctv;
  base.model_id = model_path;
  base.wait_for_running_prefix = prefix_wait == "on";
  const std::string wtype = dtype_name(model->weights().layers[0].wq.type);
  if (!json) {
    std::printf("| agents | share | KV MiB in use | TTFT agent 1 s | TTFT agents 2..N mean / max s | aggregate decode tok/s |\n");
    std::printf("|---|---|---|---|---|---|\n");
  }
  for (int rep = 0; rep < reps; ++rep)
    for (int n : counts)
      for (Share mode : {Share::Pool, Share::Off, Share::Prefix}) {
        const bool on = mode == Share::Pool;
        const bool wanted = share == "all" || share == share_name(mode) || (share == "both" && mode != Share::Prefix);
        if (!wanted) continue;
        const RunResult r = run_once(*model, base, n, mode, context, suffix, gen, 1234u + uint32_t(rep), arrival == "staggered");
        if (json) {
          const nlohmann::json j = {{"model", model_path}, {"weight_type", wtype}, {"matmul_isa", matmul_isa()},
                                    {"attention_isa", kv_row_isa()}, {"threads", threads},
                                    {"cache_type_k", ctk}, {"cache_type_v", ctv}, {"agents", n}, {"share", on},
                                    {"share_mode", share_name(mode)}, {"prefix_wait", prefix_wait == "on"},
                                    {"prompt_tokens", r.prompt_tokens},
                                    {"cached_prompt_tokens", r.cached_prompt_tokens},
                                    {"state_checkpoints", r.state_checkpoints},
                                    {"context", context}, {"suffix", suffix}, {"gen", gen}, {"rep", rep},
                                    {"arrival", arrival}, {"device", backend->describe()},
                                    {"kv_peak_bytes", r.kv_peak_bytes}, {"pool_prefill_s", r.pool_prefill_s},
                                    {"ttft_first_s", r.ttft_first}, {"ttft_rest_mean_s", r.ttft_rest_mean},
                                    {"ttft_rest_max_s", r.ttft_rest_max}, {"decode_tok_s", r.decode_tok_s},
                                    {"decode_window_s", r.decode_window_s}, {"tokens", r.tokens},
                                    {"decode_steps", r.steps}, {"decode_step_rows", r.step_rows},
                                    {"decode_step_s", r.step_s}, {"decode_forward_s", r.forward_s},
                                    {"decode_only_steps", r.dec_steps}, {"decode_only_seqs", r.dec_seqs},
                                    {"decode_only_step_s", r.dec_step_s}, {"decode_only_forward_s", r.dec_forward_s},
                                    {"decode_only_post_s", r.dec_post_s}, {"decode_only_host_cpu_s", r.dec_host_cpu_s},
                                    {"host_ms_per_agent_step",
                                     r.dec_seqs > 0 ? 1e3 * (r.dec_step_s - r.dec_forward_s) / double(r.dec_seqs) : 0.0},
                                    {"engine_step", engine_step_old() ? "old" : "new"}};
          std::printf("%s\n", j.dump().c_str());
        } else {
          std::printf("| %d | %s | %.1f | %.3f | %.3f / %.3f | %.2f |\n", n, share_name(mode),
                      double(r.kv_peak_bytes) / 1048576.0, r.ttft_first, r.ttft_rest_mean, r.ttft_rest_max,
                      r.decode_tok_s);
        }
        std::fflush(stdout);
      }
  return 0;
}

}  // namespace polykv::cli
