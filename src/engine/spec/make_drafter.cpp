#include "engine/spec/make_drafter.h"

#include "core/error.h"
#include "engine/spec/draft_model_drafter.h"
#include "engine/spec/hybrid_drafter.h"
#include "engine/spec/mtp_drafter.h"
#include "engine/spec/ngram_drafter.h"

namespace polykv {

void validate_spec(const SpecOptions& o, bool have_draft_model) {
  check(valid_spec_kind(o.kind), "spec must be one of ", kSpecKindsText, "; got '", o.kind.substr(0, 40), "'");
  check(o.n_max >= 0 && o.n_max <= kMaxSpecNMax, "spec_n_max must be in [1, ", kMaxSpecNMax, "], got ", o.n_max);
  check(o.policy == "adaptive" || o.policy == "fixed", "spec_policy must be adaptive or fixed; got '",
        o.policy.substr(0, 40), "'");
  check(spec_model_kind(o.kind) != "draft" || have_draft_model, "spec '", o.kind,
        "' needs a draft model (--model-draft FILE)");
}

std::unique_ptr<Drafter> make_drafter(const SpecOptions& o, Model& target, Model* draft_model, int max_tokens) {
  validate_spec(o, draft_model != nullptr);
  if (!o.enabled()) return nullptr;
  if (o.kind == "ngram") return std::make_unique<NgramDrafter>();
  std::unique_ptr<Drafter> model;
  if (spec_model_kind(o.kind) == "mtp") {
    model = make_mtp_drafter(target, max_tokens, o.mtp_path);
  } else {
    DraftModelOptions d;
    d.max_tokens = max_tokens + kMaxSpecNMax + 1;
    model = std::make_unique<DraftModelDrafter>(*draft_model, d);
  }
  return o.kind.starts_with("ngram+") ? make_hybrid_drafter(std::move(model)) : std::move(model);
}

std::unique_ptr<Drafter> make_hybrid_drafter(std::unique_ptr<Drafter> model_drafter) {
  return std::make_unique<HybridDrafter>(std::move(model_drafter), kDefaultSpecNMax);
}

}  // namespace polykv
