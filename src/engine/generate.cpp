#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "engine/sequence_kv.h"
#include "engine/spec/spec_policy.h"
#include "engine/step_switch.h"

namespace polykv {

const char* stop_reason_text(StopReason r) {
  switch (r) {
    case StopReason::EndOfText: return "end of text";
    case StopReason::TokenLimit: return "token limit";
    case StopReason::ContextFull: return "context full";
    case StopReason::Callback: return "stopped by the caller";
  }
  return "unknown";
}

namespace {

// One forward pass of one sequence that also hands its rows' final hidden states to the drafter
// when it asks for them (the MTP drafter): rows at positions kv.n_tokens() ... .
void forward_feeding_drafter(Model& model, KvSequence& kv, std::span<const int32_t> tokens, float* logits,
                             bool all_logits, Drafter* drafter, std::vector<float>& hidden) {
  if (!drafter || !drafter->needs_target_hidden()) {
    model.forward(tokens, kv, logits, all_logits);
    return;
  }
  const int pos0 = kv.n_tokens();
  hidden.resize(tokens.size() * size_t(model.config().n_embd));
  const Model::BatchSeq one{tokens, &kv, logits, all_logits, hidden.data()};
  model.forward_batch(std::span<const Model::BatchSeq>(&one, 1));
  drafter->target_hidden(hidden.data(), int(tokens.size()), pos0);
}

// The speculative decode loop. On entry the KV holds the prompt and `history` ends with the first
// generated token (from the prefill's logits, not yet fed); that invariant
// (the KV holds all of `history` but its last token) holds at the top of every step. Each step feeds
// [last, d_1..d_k] with all logits, accepts n drafts (verify_drafts), truncates the KV to the
// accepted length and emits d_1..d_n and the target's token, applying the same stop rules, token by
// token, as the one-token loop in generate().
void decode_speculative(Model& model, KvSequence& kv, Sampler& sampler, std::vector<int32_t>& history,
                        const GenerateOptions& opts, const GenerateCallbacks& cb, GenerateStats& st) {
  const int n_vocab = model.config().n_vocab;
  const int k_max = std::max(1, opts.spec_n_max);
  Drafter& drafter = *opts.drafter;
  std::vector<int32_t> drafts, feed;
  std::vector<float> rows(size_t(k_max + 1) * size_t(n_vocab));  // [1 + k][n_vocab]
  std::vector<float> hidden;                                      // [1 + k][n_embd] for an MTP drafter
  st.stop_reason = StopReason::TokenLimit;
  if (opts.n_predict == 0) return;
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  SpecSeqState state;   // adaptive: acceptance, probes
  StepCostFit cost;     // adaptive: verify-step seconds against rows
  DraftCostFit draft_costs[Drafter::kMaxSources];  // adaptive: per source, seconds per call and per drafted token
  for (;;) {
    // Rows that fit the context, drafts that could still be emitted.
    int k = std::min(k_max, kv.max_tokens() - kv.n_tokens() - 1);
    if (opts.n_predict >= 0) k = std::min(k, opts.n_predict - st.n_generated - 1);
    const int source = std::clamp(drafter.next_source(history), 0, Drafter::kMaxSources - 1);
    DraftCostFit& draft_cost = draft_costs[source];
    if (opts.spec_adaptive && k > 0) {
      const DraftCandidate c{state.of(source).rate, k, draft_cost.per_token(), draft_cost.per_call(), state.probe_due()};
      k = plan_drafts(cost, 1, 1, std::span(&c, 1))[0];
    }
    drafts.clear();
    // The policy's clock is the wall clock (as the engine's): the clock of tokens per second.
    if (k > 0) {
      const auto t = clock::now();
      drafter.draft(history, k, drafts, nullptr);
      if (int(drafts.size()) > k) drafts.resize(size_t(k));
      if (!drafts.empty() && drafter.last_catch_up() <= Drafter::kSteadyCatchUp)
        draft_cost.add(1, int(drafts.size()), since(t));
    }
    feed.assign(1, history.back());
    feed.insert(feed.end(), drafts.begin(), drafts.end());
    const int n0 = kv.n_tokens();
    const auto tf = clock::now();
    forward_feeding_drafter(model, kv, feed, rows.data(), true, &drafter, hidden);
    cost.add(int(feed.size()), since(tf));
    const VerifyResult r = verify_drafts(sampler, rows.data(), n_vocab, drafts, history);
    state.after_step(int(drafts.size()), r.n_accepted, source);
    if (r.n_accepted < int(drafts.size())) truncate_sequence_kv(kv, n0 + 1 + r.n_accepted);
    ++st.spec.steps;
    st.spec.drafted += int64_t(drafts.size());
    st.spec.accepted += r.n_accepted;
    for (int i = 0; i <= r.n_accepted; ++i) {
      const int32_t id = i < r.n_accepted ? drafts[size_t(i)] : r.next;
      if (cb.is_eog && cb.is_eog(id)) {
        st.stop_reason = StopReason::EndOfText;
        return;
      }
      ++st.n_generated;
      ++st.spec.emitted;
      history.push_back(id);
      if (cb.on_token && !cb.on_token(id)) {
        st.stop_reason = StopReason::Callback;
        return;
      }
      if (opts.n_predict >= 0 && st.n_generated >= opts.n_predict) return;  // TokenLimit
      if (int(history.size()) - 1 >= kv.max_tokens()) {  // as the one-token loop: emitted, not fed back
        st.stop_reason = StopReason::ContextFull;
        return;
      }
    }
    drafter.accept(history, r.n_accepted);
  }
}

// generate()'s stop rules for a token just chosen, in their order: an end-of-text token stops before it is
// emitted; any other is emitted (history, on_token), after which the callback or the token limit may stop.
// True (stop_reason set) when generation stops here; the full-context rule is the caller's.
bool emit_or_stop(int32_t id, std::vector<int32_t>& history, const GenerateOptions& opts, const GenerateCallbacks& cb,
                  GenerateStats& st) {
  if (cb.is_eog && cb.is_eog(id)) {
    st.stop_reason = StopReason::EndOfText;
    return true;
  }
  ++st.n_generated;
  history.push_back(id);
  if (cb.on_token && !cb.on_token(id)) {
    st.stop_reason = StopReason::Callback;
    return true;
  }
  if (opts.n_predict >= 0 && st.n_generated >= opts.n_predict) {
    st.stop_reason = StopReason::TokenLimit;
    return true;
  }
  return false;
}

// The steps in flight of decode_greedy_pipelined (at most two), oldest first. Its destructor waits for
// any left (an exception between issue and retire), so no copy lands in results_ after it is gone.
class GreedyPipeline {
 public:
  GreedyPipeline(Model& model, KvSequence& kv) : model_(model), kv_(kv) {}
  ~GreedyPipeline() {
    for (; in_flight_ > 0; --in_flight_) {
      try {
        model_.finish_argmax();
      } catch (...) {  // a destructor never throws; the error was or will be reported by the caller
      }
    }
  }
  GreedyPipeline(const GreedyPipeline&) = delete;
  GreedyPipeline& operator=(const GreedyPipeline&) = delete;

  int in_flight() const { return in_flight_; }
  // Issues a step feeding `tok` (chained: the previous step's argmax on the backend instead).
  void issue(int32_t tok, bool chained) {
    Model::BatchSeq one{std::span(&tok, 1), &kv_, nullptr, false};
    one.argmax = &results_[(first_ + in_flight_) % 2];
    one.argmax_async = true;
    one.token_from_last_argmax = chained;
    model_.forward_batch(std::span<const Model::BatchSeq>(&one, 1));
    ++in_flight_;
  }
  // Waits for the oldest step and returns its argmax; with `rollback`, its position leaves the KV (it fed
  // a token the plain loop would not have fed).
  int32_t retire(bool rollback) {
    model_.finish_argmax();
    const int32_t id = results_[first_];
    first_ ^= 1;
    --in_flight_;
    if (rollback) truncate_sequence_kv(kv_, kv_.n_tokens() - 1);
    return id;
  }

 private:
  Model& model_;
  KvSequence& kv_;
  int32_t results_[2] = {-1, -1};  // the steps' argmax destinations, a ring from first_
  int first_ = 0, in_flight_ = 0;
};

// Greedy decoding with the backend's argmax, pipelined (Model::BatchSeq::token_from_last_argmax): on
// entry `history` ends with a token the KV does not hold yet and that was emitted. Each step feeds the
// previous step's argmax straight from backend memory, so step k + 1 is issued before the host reads
// step k's token (on the H200 so far the same speed as one step at a time: docs/CUDA_DECODE.md). The host
// then reads the token and applies the stop rules of generate()'s loop, in its order. A stop leaves one step issued past
// the last token that loop would have fed (or none when the step was not issued: the token limit and a
// full context are known beforehand); that step's position is truncated away, so the KV ends as
// generate()'s plain loop leaves it. Returns with stop_reason set.
void decode_greedy_pipelined(Model& model, KvSequence& kv, std::vector<int32_t>& history, const GenerateOptions& opts,
                             const GenerateCallbacks& cb, GenerateStats& st) {
  const int n_vocab = model.config().n_vocab;
  GreedyPipeline pipe(model, kv);
  pipe.issue(history.back(), false);  // feeds the last emitted token (host-known)
  for (;;) {
    // The token the oldest step computes is next; feed it on before reading it if it will be fed:
    // it is not the last one allowed (n_predict) and the KV has room for it.
    const bool ahead = (opts.n_predict < 0 || st.n_generated + 1 < opts.n_predict) && kv.n_tokens() < kv.max_tokens();
    if (ahead) pipe.issue(history.back(), true);  // the token argument is a placeholder here
    const int32_t id = pipe.retire(false);
    check(id >= 0, "sampler: no finite logit among ", n_vocab, " (all NaN or -inf)");
    if (emit_or_stop(id, history, opts, cb, st)) break;
    if (!ahead) {  // the KV was full: the token is emitted, not fed back
      st.stop_reason = StopReason::ContextFull;
      break;
    }
  }
  while (pipe.in_flight() > 0) pipe.retire(true);  // a step issued past the stop
}

}  // namespace

GenerateStats generate(Model& model, KvSequence& kv, std::span<const int32_t> prompt, const GenerateOptions& opts,
                       const GenerateCallbacks& cb) {
  using clock = std::chrono::steady_clock;
  check(!prompt.empty(), "the prompt is empty");
  check(int64_t(kv.n_tokens()) + int64_t(prompt.size()) <= kv.max_tokens(), "the prompt (", prompt.size(),
        " tokens) does not fit the context of ", kv.max_tokens(), " tokens");
  const int n_vocab = model.config().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  check(opts.context.empty() || int64_t(opts.context.size()) == kv.n_tokens(), "generate: the context holds ",
        opts.context.size(), " tokens, the KV ", kv.n_tokens());
  std::vector<int32_t> history(opts.context.begin(), opts.context.end());
  history.insert(history.end(), prompt.begin(), prompt.end());
  GenerateStats st;
  st.n_prompt = int(prompt.size());
  Sampler sampler(opts.sampling);  // validates the parameters before any work

  auto t0 = clock::now();
  const size_t chunk = size_t(std::max(1, opts.prefill_chunk));
  if (cb.on_prefill) cb.on_prefill(0, st.n_prompt);
  // Every prompt token goes through the prefill, drafter or not, and the first token comes from its last
  // row, as in plain decoding (and as in the engine); the speculative loop starts from that token. Until
  // 2026-12-01 the last prompt token was fed by the first verify step instead: one step earlier with
  // drafts, but then its row (and its K/V) came from a verify step where plain decoding computes it in a
  // prefill chunk, which only a backend invariant for every row count (the CPU) gives the same bits;
  // CUDA's --batch-invariant covers steps of up to 32 rows per sequence (docs/CUDA_SPEC.md).
  const size_t n_prefill = prompt.size();
  std::vector<float> hidden;  // a prefill chunk's hidden states, for an MTP drafter
  for (size_t i = 0; i < n_prefill; i += chunk) {
    const size_t n = std::min(chunk, n_prefill - i);
    forward_feeding_drafter(model, kv, prompt.subspan(i, n), logits.data(), false, opts.drafter, hidden);
    if (cb.on_prefill && i + n < prompt.size()) cb.on_prefill(int(i + n), st.n_prompt);
  }
  if (opts.drafter) opts.drafter->prefill(history);
  if (cb.on_prefill) cb.on_prefill(st.n_prompt, st.n_prompt);
  st.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count();

  t0 = clock::now();
  // Every exit of the loop sets stop_reason; n_predict == 0 never enters it (TokenLimit).
  st.stop_reason = StopReason::TokenLimit;
  // Plain greedy steps on a GPU backend take the argmax from the backend (4 bytes copied back, not the
  // 0.5 MB logit row; engine/step_switch.h), pipelined (decode_greedy_pipelined) unless the KV cannot
  // take back a position (a hybrid model's recurrent state) or the sampler's choice depends on history.
  const bool backend_argmax = device_argmax(model.backend().kind());
  const bool pipelined = backend_argmax && kv.recurrent_state() == nullptr && pipelined_greedy() &&
                         sampler.always_plain_argmax();
  int32_t backend_id = -1;  // the next token when the last forward gave the backend's argmax
  bool have_backend_id = false;
  while (opts.n_predict < 0 || st.n_generated < opts.n_predict) {
    if (have_backend_id) check(backend_id >= 0, "sampler: no finite logit among ", n_vocab, " (all NaN or -inf)");
    const int32_t id = have_backend_id ? backend_id : sampler.sample(logits.data(), n_vocab, history);
    if (emit_or_stop(id, history, opts, cb, st)) break;
    if (kv.n_tokens() >= kv.max_tokens()) {  // the token is emitted, not fed back
      st.stop_reason = StopReason::ContextFull;
      break;
    }
    if (opts.drafter) {  // the rest speculatively: the KV holds all of history but its last token
      decode_speculative(model, kv, sampler, history, opts, cb, st);
      break;
    }
    if (pipelined) {  // every remaining step greedy on the backend, pipelined
      decode_greedy_pipelined(model, kv, history, opts, cb, st);
      break;
    }
    have_backend_id = backend_argmax && sampler.plain_argmax(history);
    if (have_backend_id) {  // what sample() would return (Sampler::plain_argmax), without the logits
      Model::BatchSeq one{std::span(&id, 1), &kv, nullptr, false};
      one.argmax = &backend_id;
      model.forward_batch(std::span<const Model::BatchSeq>(&one, 1));
    } else {
      model.forward(std::span(&id, 1), kv, logits.data(), false);
    }
  }
  st.decode_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return st;
}

}  // namespace polykv
