#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace polykv {

GenerateStats generate(Model& model, KvCache& kv, std::span<const int32_t> prompt, const GenerateOptions& opts,
                       const GenerateCallbacks& cb, ThreadPool& pool) {
  using clock = std::chrono::steady_clock;
  check(!prompt.empty(), "the prompt is empty");
  check(int64_t(kv.n_tokens()) + int64_t(prompt.size()) <= kv.max_tokens(), "the prompt (", prompt.size(),
        " tokens) does not fit the context of ", kv.max_tokens(), " tokens");
  const int n_vocab = model.config().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  GenerateStats st;
  st.n_prompt = int(prompt.size());

  auto t0 = clock::now();
  const size_t chunk = size_t(std::max(1, opts.prefill_chunk));
  for (size_t i = 0; i < prompt.size(); i += chunk)
    model.forward(prompt.subspan(i, std::min(chunk, prompt.size() - i)), kv, logits.data(), false, pool);
  st.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count();

  Sampler sampler(opts.sampling);
  t0 = clock::now();
  while (opts.n_predict < 0 || st.n_generated < opts.n_predict) {
    const int32_t id = sampler.sample(logits.data(), n_vocab, history);
    if (cb.is_eog && cb.is_eog(id)) {
      st.stopped_by_eog = true;
      break;
    }
    ++st.n_generated;
    history.push_back(id);
    if (cb.on_token && !cb.on_token(id)) break;
    if (kv.n_tokens() >= kv.max_tokens()) break;  // context full: the token is emitted, not fed back
    if (opts.n_predict >= 0 && st.n_generated >= opts.n_predict) break;
    model.forward(std::span(&id, 1), kv, logits.data(), false, pool);
  }
  st.decode_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return st;
}

}  // namespace polykv
