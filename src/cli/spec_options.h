// The speculative-decoding flags of `run`, `bench` and `serve`: --spec, --spec-n-max, --model-draft,
// --model-mtp (kept in spec.mtp_path).
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "engine/spec/make_drafter.h"
#include "model/model.h"

namespace polykv::cli {

struct SpecCli {
  SpecOptions spec;
  std::string draft_path;  // --model-draft
};

void add_spec_options(CLI::App& app, SpecCli& s);
// Whether any drafter is configured: --spec other than none, or a draft model / MTP head to serve
// requests that ask for one.
inline bool drafting_configured(const SpecCli& s) {
  return s.spec.enabled() || !s.draft_path.empty() || !s.spec.mtp_path.empty();
}
// Usage errors (exit 2): an unknown --spec, --spec-n-max out of range, --spec draft without
// --model-draft, --model-draft without --spec draft (allowed for serve: requests may ask for "draft").
void check_spec_options(const SpecCli& s, bool serve = false);
// Loads --model-draft on `backend` and checks its vocabulary against target's; nullptr without one.
// rope: the target's --rope-* override, applied to the draft model too (it drafts at the target's positions).
std::unique_ptr<Model> load_draft_model(const SpecCli& s, const Model& target, Backend& backend,
                                        const RopeOverride& rope = {});

// Loads --model-mtp once against target to check it (Error naming the file and the mismatch); no-op without one.
void check_mtp_head(const SpecCli& s, Model& target);

}  // namespace polykv::cli
