// `polykv eval needle -m FILE --cases FILE.jsonl [-ctk T -ctv T] [--limit N] [--json]`: retrieval
// accuracy over needle cases (src/eval/needle.h: greedy decoding, stop at '"', newline or 12 tokens),
// overall and per variant, and agreement with the cases' reference results (ref_correct/ref_answer).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "cli/cli_util.h"
#include "cli/eval_commands.h"
#include "core/error.h"
#include "eval/needle.h"

namespace polykv::cli {
namespace {

nlohmann::json tally_json(const NeedleTally& t) {
  return {{"correct", t.correct}, {"n", t.n}, {"accuracy", t.accuracy()}};
}

}  // namespace

int cmd_eval_needle(int argc, char** argv) {
  CLI::App app{"Needle-in-a-haystack retrieval accuracy", "polykv eval needle"};
  std::string model_path, cases_path;
  KvTypePair types;
  int threads = 0, limit = 0;
  bool json = false, verbose = false;
  app.add_option("-m,--model", model_path, "GGUF model")->required();
  RopeOverride rope;
  add_rope_options(app, rope);
  app.add_option("--cases", cases_path, "cases, one JSON object a line (e.g. needle_dev.jsonl)")->required();
  app.add_option("--cache-type-k", types.k, kv_type_help("K", KvDefaults::kEval))->check(kv_k_type_check())->capture_default_str();
  app.add_option("--cache-type-v", types.v, kv_type_help("V", KvDefaults::kEval))->check(kv_v_type_check())->capture_default_str();
  app.add_option("--limit", limit, "run only the first N cases (0: all)")->check(CLI::NonNegativeNumber);
  add_threads_option(app, threads);
  app.add_flag("--json", json, "print one JSON object instead of a table");
  app.add_flag("-v,--verbose", verbose, "with --json: include every case's answer");
  add_k_eq_option(app, types.k_eq);
  if (auto rc = parse_args(app, argc, argv)) return *rc;

  check_kv_types(types);
  std::vector<NeedleCase> cases = read_needle_cases(cases_path);
  if (limit > 0 && size_t(limit) < cases.size()) cases.resize(size_t(limit));
  const std::unique_ptr<Backend> backend = make_backend({"cpu", threads});
  auto model = Model::load(model_path, *backend, rope);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  const NeedleReport rep =
      evaluate_needle(*model, tok, types, cases, [&](size_t i, const NeedleCase& c, const NeedleOutcome& o) {
        std::fprintf(stderr, "[case %zu/%zu] %-12s %s answer \"%s\" expected \"%s\"%s (%d tokens, %.1f s)\n", i + 1,
                     cases.size(), c.variant.c_str(), o.correct ? "ok  " : "FAIL", o.answer.c_str(),
                     c.expected.c_str(),
                     c.ref_answer && *c.ref_answer != o.answer ? (" ref \"" + *c.ref_answer + "\"").c_str() : "",
                     o.n_prompt_tokens, o.seconds);
      });

  if (json) {
    nlohmann::json j = {{"accuracy", rep.all.accuracy()},
                        {"correct", rep.all.correct},
                        {"n", rep.all.n},
                        {"cache_type_k", types.k},
                        {"k_eq", types.k_eq},
                        {"cache_type_v", types.v},
                        {"seconds", rep.seconds}};
    for (const auto& [name, t] : rep.by_variant) j["variants"][name] = tally_json(t);
    if (rep.same_correct_as_ref.n > 0) j["agreement_with_ref_correct"] = tally_json(rep.same_correct_as_ref);
    if (rep.same_answer_as_ref.n > 0) j["agreement_with_ref_answer"] = tally_json(rep.same_answer_as_ref);
    if (verbose) {
      for (size_t i = 0; i < cases.size(); ++i)
        j["cases"].push_back({{"line", cases[i].line},
                              {"variant", cases[i].variant},
                              {"expected", cases[i].expected},
                              {"answer", rep.outcomes[i].answer},
                              {"correct", rep.outcomes[i].correct},
                              {"generated_ids", rep.outcomes[i].generated_ids}});
    }
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf("KV types: K %s, V %s\n\n%-16s %8s %6s %9s\n", types.k.c_str(), types.v.c_str(), "variant", "correct",
                "n", "accuracy");
    for (const auto& [name, t] : rep.by_variant)
      std::printf("%-16s %8d %6d %8.1f%%\n", name.empty() ? "(none)" : name.c_str(), t.correct, t.n,
                  100.0 * t.accuracy());
    std::printf("%-16s %8d %6d %8.1f%%\n", "all", rep.all.correct, rep.all.n, 100.0 * rep.all.accuracy());
    if (rep.same_correct_as_ref.n > 0)
      std::printf("\nsame correctness as the reference: %d/%d\n", rep.same_correct_as_ref.correct,
                  rep.same_correct_as_ref.n);
    if (rep.same_answer_as_ref.n > 0)
      std::printf("same answer as the reference:      %d/%d\n", rep.same_answer_as_ref.correct,
                  rep.same_answer_as_ref.n);
    std::printf("time: %.1f s\n", rep.seconds);
  }
  return 0;
}

}  // namespace polykv::cli
