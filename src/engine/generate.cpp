#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

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

GenerateStats generate(Model& model, KvSequence& kv, std::span<const int32_t> prompt, const GenerateOptions& opts,
                       const GenerateCallbacks& cb) {
  using clock = std::chrono::steady_clock;
  check(!prompt.empty(), "the prompt is empty");
  check(int64_t(kv.n_tokens()) + int64_t(prompt.size()) <= kv.max_tokens(), "the prompt (", prompt.size(),
        " tokens) does not fit the context of ", kv.max_tokens(), " tokens");
  const int n_vocab = model.config().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  GenerateStats st;
  st.n_prompt = int(prompt.size());
  Sampler sampler(opts.sampling);  // validates the parameters before any work

  auto t0 = clock::now();
  const size_t chunk = size_t(std::max(1, opts.prefill_chunk));
  if (cb.on_prefill) cb.on_prefill(0, st.n_prompt);
  for (size_t i = 0; i < prompt.size(); i += chunk) {
    const size_t n = std::min(chunk, prompt.size() - i);
    model.forward(prompt.subspan(i, n), kv, logits.data(), false);
    if (cb.on_prefill) cb.on_prefill(int(i + n), st.n_prompt);
  }
  st.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count();

  t0 = clock::now();
  // Every exit of the loop sets stop_reason; n_predict == 0 never enters it (TokenLimit).
  st.stop_reason = StopReason::TokenLimit;
  while (opts.n_predict < 0 || st.n_generated < opts.n_predict) {
    const int32_t id = sampler.sample(logits.data(), n_vocab, history);
    if (cb.is_eog && cb.is_eog(id)) {
      st.stop_reason = StopReason::EndOfText;
      break;
    }
    ++st.n_generated;
    history.push_back(id);
    if (cb.on_token && !cb.on_token(id)) {
      st.stop_reason = StopReason::Callback;
      break;
    }
    if (opts.n_predict >= 0 && st.n_generated >= opts.n_predict) break;  // TokenLimit
    if (kv.n_tokens() >= kv.max_tokens()) {  // the token is emitted, not fed back
      st.stop_reason = StopReason::ContextFull;
      break;
    }
    model.forward(std::span(&id, 1), kv, logits.data(), false);
  }
  st.decode_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return st;
}

}  // namespace polykv
