// The engine as the server sees it: requests in, token events out, named pools, metrics. The server
// (src/server) is written against this interface only, so it can be tested with a fake; the real
// implementation is Engine (engine/engine.h: continuous batching over the shared KV pool).
//
// Threading rules:
//  - Every method may be called from any thread (HTTP handler threads); implementations lock inside.
//  - Callbacks of a request (on_token, on_done) run on the engine's own step thread, in order:
//    zero or more on_token, then exactly one on_done (also after cancel() or a failure). They must be
//    quick and must not call back into the service (queue the event and return).
//  - on_token returning false cancels the request (e.g. the client went away or a stop string
//    matched); on_done then follows with FinishReason::Cancelled.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace polykv {

enum class FinishReason {
  Stop,          // an end-of-generation token (OpenAI "stop"); the token itself is not emitted
  Length,        // max_tokens reached (OpenAI "length")
  ContextFull,   // the sequence reached the context limit (OpenAI "length")
  Cancelled,     // cancel() or on_token returned false
  Error,         // see FinishInfo::error
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;  // natural log, of the distribution the token was drawn from (logits at T = 1)
};

struct TokenEvent {
  int32_t id = 0;
  float logprob = 0;                 // of the sampled token (only when the request asked for logprobs)
  std::vector<TokenLogprob> top;     // the top_logprobs most likely tokens, descending
};

struct FinishInfo {
  FinishReason reason = FinishReason::Stop;
  std::string error;                 // when reason == Error
  int prompt_tokens = 0;             // tokens of the request's context: pool tokens + its own prompt
  int cached_tokens = 0;             // of those, how many came from shared/cached KV (not recomputed)
  int completion_tokens = 0;
  double time_to_first_token_s = 0;  // from submit to the first sampled token
};

struct GenerationRequest {
  std::string pool;                  // named pool whose content precedes `prompt`; empty: none
  std::vector<int32_t> prompt;       // token ids after the pool's content (the whole prompt if no pool)
  std::string cache_salt;            // optional per-tenant salt: cached prefixes are shared only within it
  SamplingParams sampling;
  int max_tokens = 256;              // < 0: until the context is full
  int top_logprobs = -1;             // < 0: no logprobs; 0..20: the sampled token's logprob and that many
  bool ignore_eos = false;           // end-of-generation tokens do not end it (benchmarks; llama-server's ignore_eos)
  // Speculative decoding (docs/SPECULATIVE.md): "" uses the server's default (serve --spec), "none"
  // turns it off, "ngram" / "draft" / "mtp" choose a drafter; spec_n_max 0 uses the server's default.
  std::string spec;
  int spec_n_max = 0;
  std::string spec_policy;  // "adaptive" or "fixed" (engine/spec/spec_policy.h); empty: the server's
  std::function<bool(const TokenEvent&)> on_token;
  std::function<void(const FinishInfo&)> on_done;
};

struct PoolInfo {
  std::string name;
  int n_tokens = 0;
  size_t kv_bytes = 0;               // bytes of KV blocks the pool holds
  std::string k_type, v_type;
  int agents_attached = 0;           // requests running on it now
  int64_t hits = 0;                  // requests served from it since it was created
};

struct ServiceMetrics {
  int64_t requests_total = 0, requests_running = 0, requests_waiting = 0, requests_failed = 0;
  int64_t prompt_tokens_total = 0, cached_prompt_tokens_total = 0, generated_tokens_total = 0;
  int64_t preemptions_total = 0;
  int64_t prefix_waits_total = 0;  // requests that waited for a running sequence to compute their prefix
  // Speculative decoding: verify steps of sequences with a drafter, tokens drafted, of which accepted.
  int64_t spec_steps_total = 0, spec_drafted_tokens_total = 0, spec_accepted_tokens_total = 0;
  int64_t spec_draft_forwards_total = 0;  // draft-model forward passes (batched over the step's sequences)
  int64_t spec_draft_shared_tokens_total = 0;  // draft-model KV positions copied from a pool's shared draft KV
  int64_t spec_mtp_passes_total = 0;        // MTP head passes while drafting (batched over the step's sequences)
  int64_t spec_mtp_shared_rows_total = 0;   // MTP head KV rows copied from a pool's shared head KV
  int kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_shared = 0, kv_blocks_cached_idle = 0;
  int kv_block_tokens = 0;
  size_t kv_bytes_per_block = 0;
  double prefix_hit_rate = 0;        // cached_prompt_tokens_total / prompt_tokens_total
  size_t pool_bytes = 0;             // KV bytes held by named pools
  // Hybrid models: recurrent-state checkpoints the prefix cache holds, and how many it evicted.
  int state_checkpoints = 0;
  int64_t state_checkpoint_evictions_total = 0;
  int64_t steps_total = 0;
  double step_seconds_total = 0, last_step_seconds = 0;
  // Step composition (profiling): rows the target's forward passes computed (prompt chunks, decode
  // and verify rows), sequences in those passes, and the seconds inside the target's forward passes
  // and inside the drafters (draft-model passes included).
  int64_t step_rows_total = 0, step_seqs_total = 0;
  double forward_seconds_total = 0, draft_seconds_total = 0;
  double forward_cpu_seconds_total = 0;  // process CPU time (all threads) inside the target's forward passes
  // Decode-only steps (every sequence of the step feeds one token or a verify row set; no prompt chunk):
  // their count, sequences, wall seconds, seconds inside the forward pass, and seconds after it
  // (sampling and emitting). (step - forward) / seqs is the engine's host time per sequence and step.
  int64_t decode_steps_total = 0, decode_step_seqs_total = 0;
  double decode_step_seconds_total = 0, decode_forward_seconds_total = 0, decode_post_seconds_total = 0;
  // The step thread's CPU time in those steps outside the forward pass: the host work without the
  // time the thread waited or was descheduled (a loaded machine), for benchmarks.
  double decode_host_cpu_seconds_total = 0;
};

struct ModelInfo {
  std::string id;                    // the model's name (file stem)
  int n_ctx = 0;                     // context limit of one sequence (tokens)
  int n_vocab = 0;
  std::string k_type, v_type;        // default KV types
};

class InferenceService {
 public:
  virtual ~InferenceService() = default;

  virtual ModelInfo model_info() const = 0;

  // Queues a request; returns its id. Throws polykv::Error for a request that can never run (unknown
  // pool, prompt + max_tokens over the context limit, invalid sampling); the server maps those to 4xx.
  virtual uint64_t submit(GenerationRequest req) = 0;
  // Cancels a queued or running request (its blocks are freed); a finished or unknown id is ignored.
  virtual void cancel(uint64_t id) = 0;

  // Named pools. create_pool prefills `tokens` once and pins them (blocks stay until delete_pool);
  // it blocks until the prefill is done. Throws Error on a duplicate name, bad types, or no memory.
  virtual PoolInfo create_pool(const std::string& name, const std::vector<int32_t>& tokens,
                               const std::string& k_type, const std::string& v_type) = 0;
  virtual std::vector<PoolInfo> list_pools() const = 0;
  virtual std::optional<PoolInfo> get_pool(const std::string& name) const = 0;
  virtual bool delete_pool(const std::string& name) = 0;  // false if there is none; agents on it finish first

  virtual ServiceMetrics metrics() const = 0;
};

}  // namespace polykv
