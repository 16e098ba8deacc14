// Choosing a drafter by name (--spec, the server's "spec" field) and validating the speculative
// options once for every front end.
#pragma once
#include <memory>
#include <string>

#include "engine/spec/drafter.h"
#include "engine/spec/spec_kinds.h"
#include "model/model.h"

namespace polykv {

// The default --spec-n-max (the most drafted tokens per verify step) per drafter, chosen by measurement
// (docs/SPECULATIVE.md "Default n-max and why"): n-gram drafts cost nothing, and 8 tied or beat 3 at depths
// 0, 1536 and 4096 and through the server; the draft model and the MTP head pay for every drafted token: 3.
inline constexpr int kDefaultSpecNMax = 3;
inline constexpr int kDefaultNgramNMax = 8;
inline constexpr int kMaxSpecNMax = 16;
inline int default_spec_n_max(const std::string& kind) {
  return kind.starts_with("ngram") ? kDefaultNgramNMax : kDefaultSpecNMax;
}

struct SpecOptions {
  std::string kind;  // "" or "none": no speculation; "ngram", "draft", "mtp", "ngram+draft", "ngram+mtp"
  int n_max = 0;  // 1..kMaxSpecNMax; 0: the drafter's default (default_spec_n_max)
  std::string mtp_path;  // "mtp": the head from this side file (--model-mtp) instead of the model's GGUF
  // "adaptive" (default): each step drafts 0..n_max tokens per sequence, as many as pay for
  // themselves (engine/spec/spec_policy.h); "fixed": always n_max (as far as the drafter finds any).
  std::string policy = "adaptive";
  bool adaptive() const { return policy != "fixed"; }
  bool enabled() const { return !kind.empty() && kind != "none"; }
  int resolved_n_max() const { return n_max > 0 ? n_max : default_spec_n_max(kind); }
};

// Throws Error naming the problem: an unknown kind ("--spec must be one of none, ngram, draft, mtp"),
// n_max out of range (0 is the drafter's default). have_draft_model: whether a draft model is loaded (needed for "draft").
void validate_spec(const SpecOptions& o, bool have_draft_model);

// A drafter for one sequence, or nullptr when !o.enabled(). target: the model being decoded;
// draft_model: the loaded --model-draft (needed for "draft", vocabulary already checked);
// max_tokens: the sequence's context (for drafters with their own KV).
std::unique_ptr<Drafter> make_drafter(const SpecOptions& o, Model& target, Model* draft_model, int max_tokens);
// n-gram first, model_drafter where the context has no match (kind "ngram+<model_drafter's name>"); the model
// drafter drafts at most kDefaultSpecNMax tokens a step.
std::unique_ptr<Drafter> make_hybrid_drafter(std::unique_ptr<Drafter> model_drafter);

}  // namespace polykv
