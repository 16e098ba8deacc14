// The values of --spec and of a request's "spec" (one list for the CLI, the server and the engine). Header
// only, with no model dependency: the server's request parser (and its fuzz target) checks a kind without
// linking the drafters.
#pragma once
#include <string>

namespace polykv {

// none, ngram, draft, mtp, and the hybrids ngram+draft and ngram+mtp (engine/spec/hybrid_drafter.h: n-gram
// drafts where the context has a match, the model's elsewhere); "" is none.
inline constexpr const char* kSpecKindsText = "none, ngram, draft, mtp, ngram+draft, ngram+mtp";
inline bool valid_spec_kind(const std::string& kind) {
  return kind.empty() || kind == "none" || kind == "ngram" || kind == "draft" || kind == "mtp" ||
         kind == "ngram+draft" || kind == "ngram+mtp";
}
// The model drafter a kind uses: "draft", "mtp" or "" (none, ngram).
inline std::string spec_model_kind(const std::string& kind) {
  if (kind == "draft" || kind == "ngram+draft") return "draft";
  if (kind == "mtp" || kind == "ngram+mtp") return "mtp";
  return "";
}

}  // namespace polykv
