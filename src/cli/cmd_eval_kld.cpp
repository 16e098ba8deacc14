// `polykv eval kld -m FILE (-f TEXT | --ids FILE.i32) [-c CTX] -ctk T -ctv T [--ref-ctk T --ref-ctv T]
// [--json]`: how far the test KV types move next-token distributions from the reference types
// (src/eval/kld.h: KL(ref || test) in nats, total variation, top-1 agreement, both perplexities).
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "cli/cli_util.h"
#include "cli/eval_commands.h"
#include "core/error.h"
#include "eval/kld.h"
#include "tokenizer/tokenizer.h"

namespace polykv::cli {

int cmd_eval_kld(int argc, char** argv) {
  CLI::App app{"KL divergence of next-token distributions: test KV types against reference KV types",
               "polykv eval kld"};
  std::string model_path;
  RowSourceOptions src;
  KldOptions opts;
  int threads = 0;
  bool json = false;
  app.add_option("-m,--model", model_path, "GGUF model")->required();
  RopeOverride rope;
  add_rope_options(app, rope);
  add_row_source_options(app, src);
  app.add_option("--cache-type-k", opts.test.k, kv_type_help("K", KvDefaults::kNone) + " (under test)")
      ->check(kv_k_type_check())
      ->required();
  app.add_option("--cache-type-v", opts.test.v, kv_type_help("V", KvDefaults::kNone) + " (under test)")
      ->check(kv_v_type_check())
      ->required();
  app.add_option("--ref-ctk", opts.ref.k, "reference KV cache type for K (f16 by default, unlike run/bench)")->check(kv_k_type_check())->capture_default_str();
  app.add_option("--ref-ctv", opts.ref.v, "reference KV cache type for V")->check(kv_v_type_check())->capture_default_str();
  add_threads_option(app, threads);
  app.add_flag("--json", json, "print one JSON object instead of a table");
  add_k_eq_option(app, opts.test.k_eq);
  if (auto rc = parse_args(app, argc, argv)) return *rc;

  check_kv_types(opts.test);
  check_kv_types(opts.ref);
  check_row_source(src);
  const std::unique_ptr<Backend> backend = make_backend({"cpu", threads});
  auto model = Model::load(model_path, *backend, rope);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  const TokenRows rows = load_rows(src, tok);
  opts.chunk_tokens = src.chunk_tokens;
  opts.on_row = [](const RowProgress& p) {
    std::fprintf(stderr, "[row %d/%d] test ppl %.4f, %.1f s\n", p.row + 1, p.n_rows, std::exp(p.row_nll_mean),
                 p.row_seconds);
  };
  const KldResult r = evaluate_kld(*model, rows, opts);

  if (json) {
    nlohmann::json j = {{"mean_kld", r.mean_kld},
                        {"max_kld", r.max_kld},
                        {"mean_tv", r.mean_tv},
                        {"p95_tv", r.p95_tv},
                        {"top1_agreement", r.top1_agreement},
                        {"ppl", r.ppl},
                        {"ref_ppl", r.ref_ppl},
                        {"n_positions", r.n_positions},
                        {"n_rows", r.n_rows},
                        {"ctx", r.ctx},
                        {"cache_type_k", r.test.k},
                        {"k_eq", r.test.k_eq},
                        {"cache_type_v", r.test.v},
                        {"ref_cache_type_k", r.ref.k},
                        {"ref_cache_type_v", r.ref.v},
                        {"kv_bytes_per_token", kv_bytes_per_token(*model, r.test)},
                        {"ref_kv_bytes_per_token", kv_bytes_per_token(*model, r.ref)},
                        {"seconds", r.seconds}};
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf("rows            %d x %d tokens (%lld positions compared)\n", r.n_rows, r.ctx,
                (long long)r.n_positions);
    std::printf("test KV         K %s, V %s (%zu bytes/token)\n", r.test.k.c_str(), r.test.v.c_str(),
                kv_bytes_per_token(*model, r.test));
    std::printf("reference KV    K %s, V %s (%zu bytes/token)\n", r.ref.k.c_str(), r.ref.v.c_str(),
                kv_bytes_per_token(*model, r.ref));
    std::printf("mean KLD        %.6g nats (max %.6g)\n", r.mean_kld, r.max_kld);
    std::printf("mean TV         %.6g (p95 %.6g)\n", r.mean_tv, r.p95_tv);
    std::printf("top-1 agreement %.4f%%\n", 100.0 * r.top1_agreement);
    std::printf("ppl             %.4f (reference %.4f)\n", r.ppl, r.ref_ppl);
    std::printf("time            %.1f s\n", r.seconds);
  }
  return 0;
}

}  // namespace polykv::cli
