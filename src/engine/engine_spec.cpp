// The engine's speculative decoding before the batch is built (engine.h): the plan of every decoding
// sequence's drafts (plan_speculation), the drafts of the drafters that draft in batches across
// sequences (draft_before_batch: the draft model and the MTP head), and what agents on a named pool
// share of their drafter's work on the pool (share_pool_draft, share_pool_mtp). Step thread only.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/engine_seq.h"
#include "engine/spec/draft_model_drafter.h"
#include "engine/spec/hybrid_drafter.h"
#include "engine/spec/mtp_drafter.h"

namespace polykv {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int Engine::draft_limit(const Seq& s, int budget) const {
  // Drafts that fit the plan, the step's budget, the context and the request's remaining tokens.
  int k = std::min({s.k_plan, s.spec_n_max, budget - 1, opts_.n_ctx - int(s.tokens.size())});
  if (s.req.max_tokens >= 0) k = std::min(k, s.req.max_tokens - s.n_generated - 1);
  return k;
}

// Plans this step's drafts. Rows and budget are counted as the batch loop counts them, without
// drafts: every sequence with tokens to feed adds its rows (1 when decoding, a prompt chunk), every
// decoding one emits a token. Each decoding sequence with a drafter is a candidate of plan_drafts
// (adaptive) with the drafts its limits allow, bounded by the batch it decodes in (bound_in_batch: the
// running sequences with tokens to feed, the pool's own excepted); a fixed-policy sequence drafts n_max.
void Engine::plan_speculation(const std::vector<Seq*>& order) {
  std::vector<DraftCandidate> cands;
  std::vector<Seq*> who;
  int budget = opts_.step_tokens, base_rows = 0, base_tokens = 0, batch_seqs = 0;
  for (Seq* s : order)
    if (!s->finished && s->sid >= 0 && !s->is_pool && int(s->tokens.size()) > s->kv->n_tokens()) ++batch_seqs;
  for (Seq* s : order) {
    s->k_plan = 0;
    if (budget == 0 || s->finished || s->sid < 0) continue;
    const int n = std::min(budget, int(s->tokens.size()) - s->kv->n_tokens());
    if (n <= 0) continue;
    if (n == 1 && s->drafter) {
      s->spec_source = std::clamp(s->drafter->next_source(s->tokens), 0, Drafter::kMaxSources - 1);
      if (!s->spec_adaptive) {
        s->k_plan = s->spec_n_max;
      } else {
        s->k_plan = s->spec_n_max;
        DraftCandidate c;
        c.acceptance = s->spec_state.of(s->spec_source).rate;
        c.k_max = std::max(0, draft_limit(*s, budget));
        auto d = draft_cost_.find(s->drafter->source_name(s->spec_source));
        if (d != draft_cost_.end()) {
          c.draft_seconds = d->second.per_token();
          c.draft_call_seconds = d->second.per_call();
        }
        c.probe = s->spec_state.probe_due();
        bound_in_batch(step_cost_.fit(batch_seqs), batch_seqs, c);
        cands.push_back(c);
        who.push_back(s);
      }
    }
    if (n == 1) ++base_tokens;
    base_rows += n;
    budget -= n;
  }
  if (cands.empty()) return;
  // The step's cost as measured for steps with as many decoding sequences.
  const std::vector<int> k = plan_drafts(step_cost_.fit(base_tokens), base_rows, base_tokens, cands);
  for (size_t i = 0; i < who.size(); ++i) who[i]->k_plan = k[i];
  // POLYKV_SPEC_TRACE=1: one stderr line per plan (the fit and each candidate's inputs and k), to see
  // why the policy drafts what it drafts (docs/SPECULATIVE.md).
  static const bool trace = std::getenv("POLYKV_SPEC_TRACE") != nullptr;
  if (trace) {
    const StepCostFit& f = step_cost_.fit(base_tokens);
    std::fprintf(stderr, "spec plan: seqs %d rows %d batch %d fixed %.3f per_row %.3f ms |", base_tokens,
                 base_rows, batch_seqs, 1e3 * f.fixed(), 1e3 * f.per_row());
    for (size_t i = 0; i < cands.size(); ++i)  // k_max and probe after the batch bound; due: before it
      std::fprintf(stderr, " a %.2f call %.3f tok %.3f ms k_max %d due %d probe %d -> %d;", cands[i].acceptance,
                   1e3 * cands[i].draft_call_seconds, 1e3 * cands[i].draft_seconds, cands[i].k_max,
                   int(who[i]->spec_state.probe_due()), int(cands[i].probe), k[i]);
    std::fprintf(stderr, "\n");
  }
}

// Before the batch is built: the drafts of every decoding sequence whose drafter drafts in batches,
// each kind together: the draft model (DraftModelDrafter::draft_many: one draft-model forward_batch
// per draft position for all of them, as the target's step reads its weights once for all sequences)
// and the MTP head (MtpDrafter::draft_many: one head pass per catch-up round and per draft position).
// Each gets the k the batch loop will allow it: the budget is counted as that loop counts it, with
// every drafter assumed to fill its k, so the loop's own budget (hence k) is never smaller. Other
// drafters draft inside the loop. A sequence the loop then leaves out (budget, preemption) drops its
// drafts; a draft model's KV rolls back to the context on its next draft, an MTP head drops its
// chained rows. Clears every sequence's drafts first. Agents' first drafts copy their pool's shared
// drafter state here (share_pool_*). Returns the seconds spent; `drafting` gets each kind's steady
// drafts (no drafter caught up more than kSteadyCatchUp tokens: a copy or prefill is not drafting).
double Engine::draft_before_batch(const std::vector<Seq*>& order, std::map<std::string, DraftTiming>& drafting) {
  const auto t_all = Clock::now();
  std::vector<DraftJob> jobs;
  std::vector<Seq*> model_seqs;
  std::map<MtpHead*, std::vector<MtpJob>> mtp_jobs;  // per head (one per engine: shared_mtp_head)
  std::map<MtpHead*, std::vector<Seq*>> mtp_seqs;
  int budget = opts_.step_tokens;
  for (Seq* s : order) {
    s->drafts.clear();
    if (budget == 0 || s->finished || s->sid < 0) continue;
    int n = std::min(budget, int(s->tokens.size()) - s->kv->n_tokens());
    if (n <= 0) continue;
    if (n == 1 && s->drafter) {
      const int k = draft_limit(*s, budget);
      if (k > 0) {
        if (auto* d = dynamic_cast<DraftModelDrafter*>(s->drafter.get())) {
          if (d->cached_tokens().empty() && s->n_pool >= 2) share_pool_draft(*s, *d);
          jobs.push_back({d, s->tokens, k, &s->drafts});
          model_seqs.push_back(s);
        } else if (auto* m = dynamic_cast<MtpDrafter*>(s->drafter.get())) {
          share_pool_mtp(*s, *m);  // a no-op unless its head still waits for the pool's rows
          mtp_jobs[m->head().get()].push_back({m, s->tokens, k, &s->drafts});
          mtp_seqs[m->head().get()].push_back(s);
        }
        n += k;
      }
    }
    budget -= n;
  }
  // The drafts' cost sample: seconds, calls (sequences that drafted), drafted tokens.
  auto record = [&](const std::string& name, double seconds, const std::vector<Seq*>& seqs) {
    int tokens = 0, calls = 0;
    bool steady = true;
    for (Seq* s : seqs)
      if (!s->drafts.empty()) {
        tokens += int(s->drafts.size());
        ++calls;
        steady = steady && s->drafter->last_catch_up() <= Drafter::kSteadyCatchUp;
      }
    if (tokens > 0 && steady) {
      DraftTiming& d = drafting[name];
      d.seconds += seconds;
      d.calls += calls;
      d.tokens += tokens;
    }
  };
  int n_forward = 0, n_mtp = 0;
  if (!jobs.empty()) {
    const auto t = Clock::now();
    n_forward = DraftModelDrafter::draft_many(jobs);
    record("draft", seconds_since(t), model_seqs);
  }
  for (auto& [head, js] : mtp_jobs) {
    const auto t = Clock::now();
    n_mtp += MtpDrafter::draft_many(js);
    record("mtp", seconds_since(t), mtp_seqs[head]);
  }
  if (n_forward > 0 || n_mtp > 0) {
    std::lock_guard<std::mutex> lk(mu_);
    m_.spec_draft_forwards_total += n_forward;
    m_.spec_mtp_passes_total += n_mtp;
  }
  return seconds_since(t_all);
}

void Engine::share_pool_draft(Seq& s, DraftModelDrafter& d) {
  const std::span<const int32_t> pool = std::span<const int32_t>(s.tokens).first(size_t(s.n_pool));
  std::unique_ptr<DraftModelDrafter>& shared = pool_drafts_[s.pool];
  if (!shared || !std::ranges::equal(shared->cached_tokens(), pool)) {  // first use, or a new pool of that name
    DraftModelOptions o;
    o.max_tokens = opts_.n_ctx + kMaxSpecNMax + 1;  // as make_drafter's
    shared = std::make_unique<DraftModelDrafter>(*opts_.draft_model, o);
    shared->extend(pool);
  }
  // All but the last context token: draft() feeds that one for its logits.
  const int n = d.copy_prefix_from(*shared, s.tokens, s.tokens.size() - 1);
  std::lock_guard<std::mutex> lk(mu_);
  m_.spec_draft_shared_tokens_total += n;
}

// An MTP agent's head still lacking its pool's rows (at its first draft): copies them
// from the pool's shared head KV, made on first use from the pool's hidden states (those the agent's
// drafter was given at admission, Seq::pool_hidden_src, of which it holds only the last row: the
// copy's contract), so the head runs over the pool once per pool instead of once per agent. Its own
// rows are left to catch up. Should the copy fail, the agent's head has a gap: no drafts, lossless.
void Engine::share_pool_mtp(Seq& s, MtpDrafter& d) {
  if (s.n_pool < 2 || !s.pool_hidden_src || !d.wants_prefix()) return;
  const std::span<const int32_t> pool = std::span<const int32_t>(s.tokens).first(size_t(s.n_pool));
  PoolMtp& shared = pool_mtps_[s.pool];
  if (!shared.drafter || shared.hidden != s.pool_hidden_src || shared.drafter->head() != d.head()) {
    shared.drafter = std::make_unique<MtpDrafter>(d.head(), s.n_pool);
    shared.drafter->target_hidden(s.pool_hidden_src->data(), s.n_pool, 0);
    shared.drafter->fill(pool);
    shared.hidden = s.pool_hidden_src;
  }
  const int n = d.copy_prefix_from(*shared.drafter, s.tokens);
  std::lock_guard<std::mutex> lk(mu_);
  m_.spec_mtp_shared_rows_total += n;
}

Drafter* Engine::hybrid_model(Drafter* d) {
  auto* h = dynamic_cast<HybridDrafter*>(d);
  return h ? &h->model_drafter() : nullptr;
}

void Engine::share_pool_hybrid(Seq& s) {
  Drafter* m = hybrid_model(s.drafter.get());
  if (auto* mtp = dynamic_cast<MtpDrafter*>(m)) {
    share_pool_mtp(s, *mtp);  // a no-op once its head has the rows
  } else if (auto* d = dynamic_cast<DraftModelDrafter*>(m); d && d->cached_tokens().empty() && s.n_pool >= 2) {
    share_pool_draft(s, *d);
  }
}

std::shared_ptr<MtpHead> Engine::shared_mtp_head(const std::string& path) {
  std::lock_guard<std::mutex> lk(mtp_head_mu_);
  if (!mtp_head_ || mtp_head_path_ != path) {
    mtp_head_ = load_mtp_head(model_, path);
    mtp_head_path_ = path;
  }
  return mtp_head_;
}

}  // namespace polykv
