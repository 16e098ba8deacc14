// `polykv eval ppl -m FILE (-f TEXT | --ids FILE.i32) [-c CTX] [-ctk T -ctv T] [--rows N] [--json]`:
// perplexity with the conventions of src/eval/perplexity.h (rows from position 0, every position
// t = 0..CTX-2 scored, natural log).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "cli/cli_util.h"
#include "cli/eval_commands.h"
#include "core/error.h"
#include "eval/perplexity.h"
#include "tokenizer/tokenizer.h"

namespace polykv::cli {

int cmd_eval_ppl(int argc, char** argv) {
  CLI::App app{"Perplexity over rows of tokens, each row from position 0", "polykv eval ppl"};
  std::string model_path;
  RowSourceOptions src;
  KvTypePair types;
  int threads = 0;
  bool json = false;
  app.add_option("-m,--model", model_path, "GGUF model")->required();
  RopeOverride rope;
  add_rope_options(app, rope);
  add_row_source_options(app, src);
  app.add_option("--cache-type-k", types.k, kv_type_help("K", KvDefaults::kEval))->check(kv_k_type_check())->capture_default_str();
  app.add_option("--cache-type-v", types.v, kv_type_help("V", KvDefaults::kEval))->check(kv_v_type_check())->capture_default_str();
  add_threads_option(app, threads);
  app.add_flag("--json", json, "print one JSON object instead of a table");
  add_k_eq_option(app, types.k_eq);
  if (auto rc = parse_args(app, argc, argv)) return *rc;

  check_kv_types(types);
  check_row_source(src);
  const std::unique_ptr<Backend> backend = make_backend({"cpu", threads});
  auto model = Model::load(model_path, *backend, rope);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  const TokenRows rows = load_rows(src, tok);
  if (model->config().n_ctx_train > 0 && rows.ctx > model->config().n_ctx_train)
    std::fprintf(stderr, "warning: -c %d exceeds the model's training context of %d\n", rows.ctx,
                 model->config().n_ctx_train);
  PplOptions opts;
  opts.chunk_tokens = src.chunk_tokens;
  opts.on_row = [](const RowProgress& p) {
    std::fprintf(stderr, "[row %d/%d] nll %.4f nats, ppl %.4f, %.1f s\n", p.row + 1, p.n_rows, p.row_nll_mean,
                 std::exp(p.row_nll_mean), p.row_seconds);
  };
  const PplResult r = evaluate_perplexity(*model, rows, types, opts);

  if (json) {
    nlohmann::json j = {{"ppl", r.ppl()},
                        {"nll_mean", r.nll_mean()},
                        {"n_tokens_scored", r.n_scored},
                        {"n_rows", r.n_rows},
                        {"ctx", r.ctx},
                        {"cache_type_k", types.k},
                        {"k_eq", types.k_eq},
                        {"cache_type_v", types.v},
                        {"kv_bytes_per_token", kv_bytes_per_token(*model, types)},
                        {"seconds", r.seconds}};
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf("rows          %d x %d tokens (%lld positions scored)\n", r.n_rows, r.ctx, (long long)r.n_scored);
    std::printf("KV types      K %s, V %s (%zu bytes/token)\n", types.k.c_str(), types.v.c_str(),
                kv_bytes_per_token(*model, types));
    std::printf("nll mean      %.6f nats/token\n", r.nll_mean());
    std::printf("perplexity    %.4f\n", r.ppl());
    std::printf("time          %.1f s (%.1f tokens/s)\n", r.seconds, double(r.n_rows) * r.ctx / std::max(1e-9, r.seconds));
  }
  return 0;
}

}  // namespace polykv::cli
