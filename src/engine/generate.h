// Single-sequence generation: prefill a prompt, then sample token by token until an end-of-generation
// token, a stop, or n_predict tokens. The server's continuous batching builds on the same pieces.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/sampler.h"
#include "engine/spec/drafter.h"
#include "engine/spec/speculative.h"
#include "kv/kv_sequence.h"
#include "model/model.h"

namespace polykv {

struct GenerateOptions {
  int n_predict = 128;      // tokens to generate at most (< 0: until the context is full)
  int prefill_chunk = 512;  // prompt tokens per forward pass (bounds scratch memory)
  SamplingParams sampling;
  // Speculative decoding (engine/spec/speculative.h): with a drafter, each step feeds the last token
  // and up to spec_n_max drafts, keeps what the target agrees with and rolls the KV back (the KV must
  // be one truncate_sequence_kv() can roll back by spec_n_max positions). Greedy output is identical
  // to decoding without it; sampled output follows the same distribution. nullptr: off.
  Drafter* drafter = nullptr;
  int spec_n_max = 4;
  // Adaptive speculation (engine/spec/spec_policy.h): each step drafts 0..spec_n_max tokens, as many
  // as the acceptance so far and the measured cost of the verify steps say pay; false: spec_n_max.
  bool spec_adaptive = false;
  // Tokens the KV already holds before the prompt (kv.n_tokens() of them; empty: none or unknown):
  // the history the repetition penalty and the drafter see starts with them (bench at a depth).
  std::span<const int32_t> context;
};

// Why generation ended. The server maps EndOfText and Callback to OpenAI's finish_reason "stop",
// TokenLimit and ContextFull to "length".
enum class StopReason : uint8_t {
  EndOfText,    // the model produced an end-of-generation token (is_eog; it is not emitted)
  TokenLimit,   // n_predict tokens were generated
  ContextFull,  // the KV cache holds max_tokens(): no room to feed the last token back
  Callback,     // on_token returned false (a stop string matched, a request was cancelled)
};
// "end of text", "token limit", "context full", "stopped by the caller".
const char* stop_reason_text(StopReason r);

struct GenerateStats {
  int n_prompt = 0;
  int n_generated = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  StopReason stop_reason = StopReason::TokenLimit;
  SpecStats spec;  // with a drafter: verify steps, drafted and accepted tokens
};

// Called with each generated token; return false to stop. is_eog(id) says whether id ends generation
// (the token itself is not passed to on_token). on_prefill(n_done, n_total), if set, reports prompt
// progress: once with 0 before the first forward pass, then after each prefill chunk (the last call
// has n_done == n_total). All callbacks run on the calling thread.
struct GenerateCallbacks {
  std::function<bool(int32_t id)> on_token;
  std::function<bool(int32_t id)> is_eog;
  std::function<void(int n_done, int n_total)> on_prefill;
};

// Throws Error when the prompt is empty or does not fit the cache.
GenerateStats generate(Model& model, KvSequence& kv, std::span<const int32_t> prompt, const GenerateOptions& opts,
                       const GenerateCallbacks& cb);

}  // namespace polykv
