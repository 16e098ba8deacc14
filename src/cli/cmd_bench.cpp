// `polykv bench -m FILE [-p 512] [-n 128] [-d DEPTH] [-t THREADS] [-ctk q8_0] [-ctv turbo3] [--json]`: prefill and decode
// speed at a context depth, as llama-bench measures them: the KV cache is first filled with DEPTH
// random tokens (not timed); prefill times one forward over P tokens after it; decode times N
// single-token steps after it. Decode is memory-bound, so it is reported against its floor:
// (weight bytes + KV bytes read per token) / measured read bandwidth.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "backend/backend.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kv_row_ops.h"
#include "backend/cpu/matmul.h"
#include "cli/bench_spec.h"
#include "cli/bench_verify.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/sysinfo.h"
#include "engine/argmax.h"
#include "engine/sequence_kv.h"
#include "engine/step_switch.h"
#include "gguf/gguf.h"
#include "kv/owned_paged_kv.h"
#include "model/model.h"

namespace polykv::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Forwards tokens in chunks (bounded scratch memory), keeping only the last logits.
void fill(Model& m, KvSequence& kv, const std::vector<int32_t>& toks, std::vector<float>& logits, int ubatch) {
  const size_t chunk = size_t(ubatch);
  for (size_t i = 0; i < toks.size(); i += chunk) {
    const size_t n = std::min(chunk, toks.size() - i);
    m.forward(std::span(toks).subspan(i, n), kv, logits.data(), false);
  }
}

// Rolls a bench sequence back to n positions: both kinds make_sequence_kv returns can.
void truncate(KvSequence& kv, int n) {
  if (auto* c = dynamic_cast<KvCache*>(&kv)) return c->truncate(n);
  if (auto* p = dynamic_cast<OwnedPagedKv*>(&kv)) return p->truncate(n);
  fail("bench: this KV cannot roll back");
}

// The model's matrix type for the report: the first layer with attention weights (a hybrid's layer 0
// is a Gated DeltaNet layer without them).
std::string weight_type_name(const Model& m) {
  for (const auto& l : m.weights().layers)
    if (l.wq.data) return dtype_name(l.wq.type);
  return dtype_name(m.weights().output.type);
}

// How many weight matrices (2-D and 3-D tensors of a weight type) the file holds per type, e.g. {"q4_K": 193,
// "q6_K": 33} for a q4_K_M file: weight_type names one of them only.
nlohmann::json matrix_type_counts(const std::string& path) {
  std::map<std::string, int> counts;
  for (const GgufTensor& t : GgufFile::open(path).tensors())
    if (t.ne.size() >= 2 && dtype_info(t.type).weight_type) counts[dtype_name(t.type)]++;
  return counts;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  CLI::App app{"Measure prefill and decode tokens/s", "polykv bench"};
  std::string model_path, ctk = kDefaultCacheTypeK, ctv = kDefaultCacheTypeV;
  int n_prompt = 512, n_gen = 128, depth = 0, threads = 0, fill_threads = 0, reps = 1, ubatch = 0;
  bool json = false, no_warmup = false;
  double bw_gbs = 0;
  app.add_option("-m,--model", model_path, "GGUF model")->required();
  RopeOverride rope;
  add_rope_options(app, rope);
  app.add_option("-p,--n-prompt", n_prompt, "prefill tokens (0: skip)")->check(CLI::Range(0, 1 << 20));
  app.add_option("-n,--n-gen", n_gen, "decode tokens (0: skip)")->check(CLI::Range(0, 1 << 20));
  app.add_option("-d,--depth", depth, "tokens already in the KV cache")->check(CLI::Range(0, 1 << 22));
  add_threads_option(app, threads);
  add_ubatch_option(app, ubatch);
  app.add_option("--fill-threads", fill_threads, "threads for the untimed depth fill (0: same as -t)")
      ->check(CLI::Range(0, 1024));
  app.add_option("-r,--repetitions", reps, "repetitions (best in the table and JSON; every one in the JSON's *_reps)")->check(CLI::Range(1, 100));
  app.add_flag("--no-warmup", no_warmup,
               "skip the untimed warm-up (one prompt pass and one decode step before the repetitions, as "
               "llama-bench does: first-touch page faults, scratch buffers and caches are not timed)");
  app.add_option("--cache-type-k", ctk, kv_type_help("K"))->check(kv_k_type_check())->capture_default_str();
  app.add_option("--cache-type-v", ctv, kv_type_help("V"))->check(kv_v_type_check())->capture_default_str();
  app.add_option("--bandwidth", bw_gbs, "memory read bandwidth in GB/s (0: measured)")->check(CLI::NonNegativeNumber);
  app.add_flag("--json", json, "print one JSON object instead of a table");
  float k_eq = 0;
  add_k_eq_option(app, k_eq);
  std::string device = "auto";
  add_device_option(app, device);
  bool batch_invariant = false;
  const CLI::Option* batch_invariant_opt = add_batch_invariant_option(app, batch_invariant);
  SpecCli spec;
  add_spec_options(app, spec);
  std::string text_path;
  app.add_option("--text", text_path, "with --spec: a text file whose tokens fill the depth and the prompt");
  std::string verify_k;  // --verify-k: the verify-step cost curve instead of prefill / decode (bench_verify.h)
  int verify_steps = 8;
  app.add_option("--verify-k", verify_k, "verify-step widths, e.g. 1,2,3,4,8: time k-token all-logits steps at "
                 "DEPTH against k = 1 (replaces -p / -n)")
      ->check(error_check([](const std::string& s) { (void)parse_verify_ks(s); }, "LIST"));
  app.add_option("--verify-steps", verify_steps, "timed steps per width and repetition")->check(CLI::Range(1, 10000));
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  check_spec_options(spec);
  batch_invariant = resolve_batch_invariant(batch_invariant_opt, batch_invariant, drafting_configured(spec));
  usage_check(spec.spec.enabled() == !text_path.empty(), "--spec and --text go together (speculation is measured on real text)");
  usage_check(!(spec.spec.enabled() && !verify_k.empty()), "--spec and --verify-k measure different things: use one");
  if (spec.spec.enabled()) {
    usage_check(k_eq == 0 && bw_gbs == 0 && fill_threads == 0, "--k-eq, --bandwidth and --fill-threads are not used with --spec");
    return run_bench_spec(
        {model_path, text_path, device, ctk, ctv, threads, depth, n_prompt, n_gen, reps, json, spec, batch_invariant, rope});
  }
  std::vector<int> verify_ks;
  if (!verify_k.empty()) {
    verify_ks = parse_verify_ks(verify_k);
    n_prompt = n_gen = *std::max_element(verify_ks.begin(), verify_ks.end());  // sizes the KV below
  }

  const std::unique_ptr<Backend> backend_ptr = make_backend({device, threads, batch_invariant});
  Backend& backend = *backend_ptr;
  ubatch = resolve_ubatch(ubatch, backend);
  CpuBackend* cpu = dynamic_cast<CpuBackend*>(&backend);  // nullptr on a GPU
  const int n_threads = cpu ? cpu->pool().size() : 0;
  auto model = Model::load(model_path, backend, rope);
  const ModelConfig& c = model->config();
  std::mt19937 rng(42);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = int32_t(rng() % uint32_t(c.n_vocab));
    return t;
  };
  const int capacity = depth + std::max(n_prompt, n_gen) + 1;
  // Every repetition rolls back to DEPTH: sliding-window layers must keep what that needs.
  SequenceKvOptions kvo;
  kvo.k_type = ctk;
  kvo.v_type = ctv;
  kvo.max_tokens = capacity;
  kvo.rollback_tokens = std::max(n_prompt, n_gen) + 1;
  kvo.k_eq = k_eq;
  const std::unique_ptr<KvSequence> kv_seq = make_sequence_kv(*model, kvo);
  KvSequence& kv = *kv_seq;
  print_kv_summary(kv);
  size_t kv_bytes_per_token = 0, kv_allocated = 0;
  if (const auto* c = dynamic_cast<const KvCache*>(&kv)) {
    kv_bytes_per_token = c->bytes_per_token();
  } else if (const auto* p = dynamic_cast<const OwnedPagedKv*>(&kv)) {
    kv_bytes_per_token = p->bytes_per_token();
    kv_allocated = p->allocated_bytes();
  }
  std::vector<float> logits(size_t(c.n_vocab));
  if (depth > 0) {
    const auto t0 = std::chrono::steady_clock::now();
    if (cpu && fill_threads > 0 && fill_threads != n_threads) {
      ThreadPool& pool = cpu->pool();
      ThreadPool fill_pool(fill_threads);
      cpu->set_pool(fill_pool);
      struct Restore {
        CpuBackend& b;
        ThreadPool& p;
        ~Restore() { b.set_pool(p); }
      } restore{*cpu, pool};
      fill(*model, kv, random_tokens(depth), logits, ubatch);
    } else {
      fill(*model, kv, random_tokens(depth), logits, ubatch);
    }
    std::fprintf(stderr, "depth fill: %d tokens in %.1f s\n", depth, seconds_since(t0));
  }

  // Every repetition comes back here (a hybrid model's recurrent state by a copy: it cannot roll back that far).
  const SequenceMark at_depth(kv);
  const auto rewind = [&](int n) { n == depth ? at_depth.rewind(kv) : truncate(kv, n); };
  if (!verify_ks.empty()) {
    nlohmann::json r = bench_verify(*model, kv, rewind, {verify_ks, verify_steps, reps, depth}, rng);
    r.update({{"model", model_path}, {"arch", c.arch}, {"weight_type", weight_type_name(*model)},
              {"threads", n_threads}, {"device", backend.describe()}, {"matmul_isa", matmul_isa()}, {"depth", depth},
              {"cache_type_k", ctk}, {"cache_type_v", ctv}, {"batch_invariant", backend.batch_invariant()}});
    if (json) std::printf("%s\n", r.dump().c_str());
    else print_verify_table(r, r["weight_type"].get<std::string>() + " d" + std::to_string(depth));
    return 0;
  }

  double prefill_tok_s = 0, decode_tok_s = 0;
  std::vector<double> prefill_reps, decode_reps;  // every repetition, in order (the spread)
  // Decode picks each next token greedily as `run` does: from the backend's argmax on a GPU (4 bytes
  // copied back; pipelined: each step fed its predecessor's argmax on the backend, POLYKV_GREEDY_PIPELINE),
  // from the host's logits on the CPU (engine/step_switch.h; POLYKV_ENGINE_ARGMAX).
  const bool backend_argmax = device_argmax(backend.kind());
  const bool pipelined = pipelined_greedy();
  // N greedy decode steps from a random token, as `run` decodes.
  const auto decode_steps = [&](int n) {
    int32_t tok = int32_t(rng() % uint32_t(c.n_vocab));
    int32_t ring[2] = {-1, -1};  // pipelined steps' tokens (read back one step late; unused by the loop)
    for (int i = 0; i < n; ++i) {
      if (backend_argmax && pipelined) {  // as generate(): step i + 1 issued before step i's token is read
        Model::BatchSeq one{std::span(&tok, 1), &kv, nullptr, false};
        one.argmax = &ring[i % 2];
        one.argmax_async = true;
        one.token_from_last_argmax = i > 0;
        model->forward_batch(std::span<const Model::BatchSeq>(&one, 1));
        if (i > 0) model->finish_argmax();  // step i - 1's token (fed to step i on the backend)
        if (i + 1 == n) model->finish_argmax();
      } else if (backend_argmax) {
        Model::BatchSeq one{std::span(&tok, 1), &kv, nullptr, false};
        int32_t next = -1;
        one.argmax = &next;
        model->forward_batch(std::span<const Model::BatchSeq>(&one, 1));
        tok = std::max(next, 0);  // -1: no finite logit (random weights); any id keeps the loop going
      } else {
        model->forward(std::span(&tok, 1), kv, logits.data(), false);
        tok = std::max(argmax_first(logits.data(), c.n_vocab), 0);  // the sampler's greedy kernel, as `run`'s
      }
    }
  };
  // Untimed warm-up, as llama-bench's (its default): one prompt pass of the timed size and two decode
  // steps, so that no repetition pays for first touches of scratch and weights (or a GPU's graph
  // captures) that the other engine's warm-up has already paid.
  if (!no_warmup) {
    if (n_prompt > 0) {
      fill(*model, kv, random_tokens(n_prompt), logits, ubatch);
      rewind(depth);
    }
    if (n_gen > 0) {
      decode_steps(std::min(n_gen, 2));
      rewind(depth);
    }
  }
  for (int r = 0; r < reps; ++r) {
    if (n_prompt > 0) {
      const auto toks = random_tokens(n_prompt);
      const auto t0 = std::chrono::steady_clock::now();
      fill(*model, kv, toks, logits, ubatch);
      prefill_reps.push_back(n_prompt / seconds_since(t0));
      prefill_tok_s = std::max(prefill_tok_s, prefill_reps.back());
      rewind(depth);
    }
    if (n_gen > 0) {
      const auto t0 = std::chrono::steady_clock::now();
      decode_steps(n_gen);
      decode_reps.push_back(n_gen / seconds_since(t0));
      decode_tok_s = std::max(decode_tok_s, decode_reps.back());
      rewind(depth);
    }
  }

  const size_t peak_rss = peak_rss_bytes();  // before the bandwidth probe's buffer
  if (const auto* c = dynamic_cast<const KvCache*>(&kv)) kv_allocated = c->allocated_bytes();
  const double bw = bw_gbs > 0 ? bw_gbs * 1e9 : backend.measure_bandwidth();
  // No bandwidth: the speeds stand, the floor fields are null (NaN) rather than the run lost.
  if (!(bw > 0))
    std::fprintf(stderr, "bench: %s could not measure its bandwidth (give --bandwidth GB/s): no floor\n",
                 backend.describe().c_str());
  const double weight_bytes = double(model->weight_bytes_per_token());
  // Mean KV bytes read per decode step, at the middle of the run: every cached position of every attention layer,
  // but only the last sliding_window positions of a sliding-window layer (Gemma's local layers, gpt-oss's even ones).
  // bytes_per_token is over all KV layers, which hold the same row sizes.
  const double mid = depth + n_gen / 2.0;
  double visible = 0;
  int n_kv_layers = 0;
  for (const LayerConfig& l : c.layers)
    if (l.kind == LayerKind::Attention) {
      ++n_kv_layers;
      visible += l.sliding && c.sliding_window > 0 ? std::min(mid, double(c.sliding_window)) : mid;
    }
  const double kv_read = n_kv_layers > 0 ? double(kv_bytes_per_token) * visible / n_kv_layers : 0.0;
  const double floor_tok_s = bw > 0 ? bw / (weight_bytes + kv_read) : std::nan("");
  const std::string wtype = weight_type_name(*model);

  nlohmann::json j = {
      {"model", model_path},           {"arch", c.arch},
      {"weight_type", wtype},          {"weight_types", matrix_type_counts(model_path)},
      {"threads", n_threads},
      {"device", backend.describe()},
      {"matmul_isa", matmul_isa()},    {"depth", depth}, {"ubatch", ubatch},
      {"n_prompt", n_prompt},          {"n_gen", n_gen},
      {"cache_type_k", ctk},           {"cache_type_v", ctv},
      {"prefill_tok_s", prefill_tok_s}, {"decode_tok_s", decode_tok_s},
      {"weight_bytes_per_token", weight_bytes}, {"kv_bytes_per_token", kv_bytes_per_token},
      {"kv_read_bytes_per_step", kv_read},
      {"kv_allocated_bytes", kv_allocated}, {"attention_isa", kv_row_isa()},
      {"attention_k_scores",  // how the CPU attention scores K (attention_q8.h)
       attention_uses_q8_scores(attention_kernels(), parse_kv_type(ctk), c.head_dim) ? "int8 (q8_0 query)" : "f32"},
      {"mem_read_bw_gbs", bw / 1e9},   {"decode_floor_tok_s", floor_tok_s},
      {"decode_fraction_of_floor", decode_tok_s / floor_tok_s}, {"peak_rss_bytes", peak_rss},
      {"prefill_tok_s_reps", prefill_reps}, {"decode_tok_s_reps", decode_reps},
      {"batch_invariant", backend.batch_invariant()}, {"warmup", !no_warmup},
      {"decode_argmax", backend_argmax ? (pipelined ? "backend, pipelined" : "backend") : "host"},
  };
  if (json) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("| model | type | KV k/v | threads | depth | test | tok/s | floor tok/s | of floor |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  if (n_prompt > 0)
    std::printf("| %s | %s | %s/%s | %d | %d | pp%d | %.2f | | |\n", c.arch.c_str(), wtype.c_str(), ctk.c_str(),
                ctv.c_str(), n_threads, depth, n_prompt, prefill_tok_s);
  if (n_gen > 0)
    std::printf("| %s | %s | %s/%s | %d | %d | tg%d | %.2f | %.2f | %.0f%% |\n", c.arch.c_str(), wtype.c_str(),
                ctk.c_str(), ctv.c_str(), n_threads, depth, n_gen, decode_tok_s, floor_tok_s,
                100.0 * decode_tok_s / floor_tok_s);
  std::printf("weights read per token: %.1f MiB; KV: %zu bytes/token; read bandwidth %.1f GB/s; peak RSS %.1f MiB\n",
              weight_bytes / 1048576.0, kv_bytes_per_token, bw / 1e9, double(peak_rss) / 1048576.0);
  return 0;
}

}  // namespace polykv::cli
