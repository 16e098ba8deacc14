#include "engine/spec/make_drafter.h"

#include "core/error.h"
#include "engine/spec/draft_model_drafter.h"
#include "engine/spec/mtp_drafter.h"
#include "engine/spec/ngram_drafter.h"

namespace polykv {

void validate_spec(const SpecOptions& o, bool have_draft_model) {
  check(o.kind.empty() || o.kind == "none" || o.kind == "ngram" || o.kind == "draft" || o.kind == "mtp",
        "spec must be one of none, ngram, draft, mtp; got '", o.kind.substr(0, 40), "'");
  check(o.n_max >= 0 && o.n_max <= kMaxSpecNMax, "spec_n_max must be in [1, ", kMaxSpecNMax, "], got ", o.n_max);
  check(o.policy == "adaptive" || o.policy == "fixed", "spec_policy must be adaptive or fixed; got '",
        o.policy.substr(0, 40), "'");
  check(o.kind != "draft" || have_draft_model, "spec 'draft' needs a draft model (--model-draft FILE)");
}

std::unique_ptr<Drafter> make_drafter(const SpecOptions& o, Model& target, Model* draft_model, int max_tokens) {
  validate_spec(o, draft_model != nullptr);
  if (!o.enabled()) return nullptr;
  if (o.kind == "ngram") return std::make_unique<NgramDrafter>();
  if (o.kind == "mtp") return make_mtp_drafter(target, max_tokens, o.mtp_path);
  DraftModelOptions d;
  d.max_tokens = max_tokens + kMaxSpecNMax + 1;
  return std::make_unique<DraftModelDrafter>(*draft_model, d);
}

}  // namespace polykv
