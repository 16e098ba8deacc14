#include "cli/spec_options.h"

#include "core/error.h"
#include "engine/spec/draft_model_drafter.h"
#include "model/mtp_head.h"

namespace polykv::cli {

void add_spec_options(CLI::App& app, SpecCli& s) {
  app.add_option("--spec", s.spec.kind,
                 "speculative decoding: none, ngram (prompt lookup), draft (--model-draft), mtp (the model's MTP head), "
                 "ngram+draft / ngram+mtp (prompt lookup where the context has a match, the model elsewhere)")
      ->capture_default_str();
  app.add_option("--spec-n-max", s.spec.n_max,
                 "the most tokens drafted per verify step, 1..16 (default: 8 for ngram and ngram+*, 3 for draft and "
                 "mtp; the model of ngram+* drafts at most 3)")
      ->check(CLI::Range(1, kMaxSpecNMax));
  app.add_option("--spec-policy", s.spec.policy,
                 "adaptive: draft 0..n-max tokens per step, as many as pay for themselves (acceptance and measured "
                 "step cost); fixed: always n-max")
      ->capture_default_str();
  app.add_option("--model-draft", s.draft_path, "draft model (GGUF) sharing the target's vocabulary, for --spec draft");
  app.add_option("--model-mtp", s.spec.mtp_path,
                 "MTP head (GGUF holding only the nextn block) for --spec mtp, when the model has none");
}

void check_spec_options(const SpecCli& s, bool serve) {
  const std::string& k = s.spec.kind;
  usage_check(valid_spec_kind(k), "--spec must be one of ", kSpecKindsText, "; got '", k, "'");
  usage_check(s.spec.n_max >= 0 && s.spec.n_max <= kMaxSpecNMax, "--spec-n-max must be in [1, ", kMaxSpecNMax,
              "], got ", s.spec.n_max);
  usage_check(s.spec.policy == "adaptive" || s.spec.policy == "fixed", "--spec-policy must be adaptive or fixed; got '",
              s.spec.policy, "'");
  const std::string model = spec_model_kind(k);
  usage_check(model != "draft" || !s.draft_path.empty(), "--spec ", k, " needs --model-draft FILE");
  usage_check(serve || s.draft_path.empty() || model == "draft",
              "--model-draft is only used with --spec draft or ngram+draft");
  usage_check(serve || s.spec.mtp_path.empty() || model == "mtp", "--model-mtp is only used with --spec mtp or ngram+mtp");
}

std::unique_ptr<Model> load_draft_model(const SpecCli& s, const Model& target, Backend& backend,
                                        const RopeOverride& rope) {
  if (s.draft_path.empty()) return nullptr;
  auto draft = Model::load(s.draft_path, backend, rope);
  check_draft_vocab(target, *draft);
  return draft;
}

void check_mtp_head(const SpecCli& s, Model& target) {
  if (!s.spec.mtp_path.empty()) (void)MtpHead::load(target, s.spec.mtp_path);
}

}  // namespace polykv::cli
