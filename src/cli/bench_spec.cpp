#include "cli/bench_spec.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "cli/cli_util.h"
#include "core/error.h"
#include "core/sysinfo.h"
#include "engine/generate.h"
#include "engine/sequence_kv.h"
#include "tokenizer/tokenizer.h"

namespace polykv::cli {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(f.good(), "cannot read ", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Run {
  std::vector<int32_t> out;
  GenerateStats st;
};

Run decode(Model& m, KvSequence& kv, std::span<const int32_t> context, std::span<const int32_t> prompt, int n_gen,
           Drafter* drafter, int n_max, bool adaptive = false) {
  GenerateOptions o;
  o.n_predict = n_gen;
  o.sampling.temperature = 0;
  o.sampling.repeat_penalty = 1;
  o.drafter = drafter;
  o.spec_n_max = n_max;
  o.spec_adaptive = adaptive;
  o.context = context;
  Run r;
  GenerateCallbacks cb;  // no is_eog: exactly n_gen tokens
  cb.on_token = [&](int32_t id) {
    r.out.push_back(id);
    return true;
  };
  r.st = generate(m, kv, prompt, o, cb);
  return r;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

}  // namespace

int run_bench_spec(const BenchSpecArgs& a) {
  const std::unique_ptr<Backend> backend = make_backend({a.device, a.threads, a.batch_invariant});
  CpuBackend* cpu = dynamic_cast<CpuBackend*>(backend.get());
  auto model = Model::load(a.model_path, *backend, a.rope);
  const std::unique_ptr<Model> draft_model = load_draft_model(a.spec, *model, *backend, a.rope);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  const std::vector<int32_t> text = tok.encode(read_text(a.text_path), true, false);
  const int need = a.depth + a.n_prompt;
  check(a.n_prompt >= 1, "bench --spec: -p must be at least 1 (the prompt)");
  check(int(text.size()) >= need, "bench --spec: ", a.text_path, " has ", text.size(), " tokens; depth ", a.depth,
        " + prompt ", a.n_prompt, " needs ", need);
  const std::span<const int32_t> context(text.data(), size_t(a.depth));
  const std::span<const int32_t> prompt(text.data() + a.depth, size_t(a.n_prompt));
  const int n_max = a.spec.spec.resolved_n_max();
  const int ctx = need + a.n_gen + n_max + 1;

  SequenceKvOptions kvo;
  kvo.k_type = a.ctk;
  kvo.v_type = a.ctv;
  kvo.max_tokens = ctx;
  kvo.rollback_tokens = a.n_prompt + a.n_gen + n_max + 1;
  const std::unique_ptr<KvSequence> kv = make_sequence_kv(*model, kvo);
  print_kv_summary(*kv);
  const std::unique_ptr<Drafter> drafter = make_drafter(a.spec.spec, *model, draft_model.get(), ctx);
  {
    // The depth fill, once (each repetition rolls back to it). A drafter reading the target's hidden
    // states (MTP) gets the fill's rows too, as it gets a prompt's: without them it has a gap at the
    // context and drafts nothing. Its catch-up over them runs in the first prompt's prefill.
    std::vector<float> logits(size_t(model->config().n_vocab));
    std::vector<float> hidden;  // [512][n_embd]
    const bool feed = drafter && drafter->needs_target_hidden();
    for (int i = 0; i < a.depth; i += 512) {
      const int n = std::min(512, a.depth - i);
      const std::span<const int32_t> chunk = context.subspan(size_t(i), size_t(n));
      if (!feed) {
        model->forward(chunk, *kv, logits.data(), false);
        continue;
      }
      hidden.resize(size_t(n) * size_t(model->config().n_embd));
      const Model::BatchSeq one{chunk, kv.get(), logits.data(), false, hidden.data()};
      model->forward_batch(std::span<const Model::BatchSeq>(&one, 1));
      drafter->target_hidden(hidden.data(), n, i);
    }
  }
  // Every repetition comes back to the depth (a hybrid model's recurrent state by a copy of it).
  const SequenceMark at_depth(*kv);
  if (drafter && a.depth > 0) {
    // Untimed warm-up: a drafter with its own KV (draft model, MTP head) fills it over the depth
    // here, not inside the first repetition's decode time; later repetitions roll it back to the depth.
    (void)decode(*model, *kv, context, prompt, 2, drafter.get(), n_max, a.spec.spec.adaptive());
  }

  std::vector<double> base_reps, spec_reps, ratio_reps;
  SpecStats total;
  bool lossless = true;
  std::vector<int32_t> last_out;  // the plain greedy tokens of the last repetition
  for (int r = 0; r < a.reps; ++r) {  // interleaved: base, spec, base, spec, ...
    at_depth.rewind(*kv);
    const Run base = decode(*model, *kv, context, prompt, a.n_gen, nullptr, 1);
    at_depth.rewind(*kv);
    const Run spec = decode(*model, *kv, context, prompt, a.n_gen, drafter.get(), n_max, a.spec.spec.adaptive());
    lossless = lossless && base.out == spec.out;
    last_out = base.out;
    base_reps.push_back(base.st.n_generated / std::max(1e-9, base.st.decode_seconds));
    spec_reps.push_back(spec.st.n_generated / std::max(1e-9, spec.st.decode_seconds));
    ratio_reps.push_back(spec_reps.back() / base_reps.back());
    total = spec.st.spec;  // identical every repetition (greedy, deterministic drafters)
  }
  std::vector<double> sorted = ratio_reps;
  std::sort(sorted.begin(), sorted.end());
  const double median_ratio = sorted[sorted.size() / 2];
  nlohmann::json j = {
      {"model", a.model_path},
      {"text", a.text_path},
      {"spec", a.spec.spec.kind},
      {"spec_n_max", n_max},
      {"spec_policy", a.spec.spec.policy},
      {"model_draft", a.spec.draft_path},
      {"threads", cpu ? cpu->pool().size() : 0},
      {"device", backend->describe()},
      {"batch_invariant", backend->batch_invariant()},
      {"depth", a.depth},
      {"n_prompt", a.n_prompt},
      {"n_gen", a.n_gen},
      {"cache_type_k", a.ctk},
      {"cache_type_v", a.ctv},
      {"decode_tok_s_base_reps", base_reps},
      {"decode_tok_s_spec_reps", spec_reps},
      {"speedup_reps", ratio_reps},
      {"decode_tok_s_base", mean(base_reps)},
      {"decode_tok_s_spec", mean(spec_reps)},
      {"speedup_median", median_ratio},
      {"speedup_min", sorted.front()},
      {"speedup_max", sorted.back()},
      {"steps", total.steps},
      {"drafted", total.drafted},
      {"accepted", total.accepted},
      {"acceptance_rate", total.acceptance_rate()},
      {"tokens_per_step", total.tokens_per_step()},
      {"lossless", lossless},
  };
  if (a.json) j["output_ids"] = last_out;  // the greedy continuation (for offline drafter studies)
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("| spec | n-max | depth | tg | base tok/s | spec tok/s | speedup (min..max) | accept | tok/step | lossless |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    std::printf("| %s | %d | %d | %d | %.2f | %.2f | %.2fx (%.2f..%.2f) | %.1f%% (%lld/%lld) | %.2f | %s |\n",
                a.spec.spec.kind.c_str(), n_max, a.depth, a.n_gen, mean(base_reps), mean(spec_reps),
                median_ratio, sorted.front(), sorted.back(), 100.0 * total.acceptance_rate(),
                (long long)total.accepted, (long long)total.drafted, total.tokens_per_step(),
                lossless ? "yes" : "NO");
  }
  check(lossless, "bench --spec: speculative output differs from plain greedy decoding");
  return 0;
}

}  // namespace polykv::cli
