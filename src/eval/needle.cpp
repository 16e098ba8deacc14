#include "eval/needle.h"

#include <chrono>

#include "core/error.h"
#include "engine/generate.h"
#include "tokenizer/streaming_decoder.h"

namespace polykv {

std::string needle_answer(std::string_view generated_text) {
  std::string_view s = generated_text.substr(0, generated_text.find('"'));
  return std::string(s.substr(0, s.find('\n')));
}

NeedleOutcome run_needle_case(Model& model, const Tokenizer& tok, const KvTypePair& types, const NeedleCase& c) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const std::vector<int32_t> prompt =
      !c.prompt_ids.empty() ? c.prompt_ids : tok.encode(c.prompt, /*add_special=*/true, /*parse_special=*/false);
  for (int32_t id : prompt)
    check(tok.valid(id) && id < model.config().n_vocab, "case on line ", c.line, ": token id ", id,
          " is outside the vocabulary");
  const int max_tokens = int(prompt.size()) + kNeedleMaxNewTokens;
  const int n_ctx_train = model.config().n_ctx_train;
  check(n_ctx_train <= 0 || max_tokens <= n_ctx_train, "case on line ", c.line, ": prompt of ", prompt.size(),
        " tokens plus ", kNeedleMaxNewTokens, " generated exceeds the model's context of ", n_ctx_train);

  std::unique_ptr<KvCache> kv = make_kv_cache(model, types, max_tokens);
  NeedleOutcome out;
  out.n_prompt_tokens = int(prompt.size());
  StreamingDecoder dec(tok);
  GenerateOptions opts;
  opts.n_predict = kNeedleMaxNewTokens;
  opts.sampling.temperature = 0;  // greedy
  opts.sampling.repeat_penalty = 1.0f;
  GenerateCallbacks cb;  // no is_eog: the reference decodes 12 tokens whatever they are
  cb.on_token = [&](int32_t id) {
    out.generated_ids.push_back(id);
    out.generated_text += dec.push(id);
    return out.generated_text.find_first_of("\"\n") == std::string::npos;
  };
  generate(model, *kv, prompt, opts, cb);
  out.generated_text += dec.flush();
  out.answer = needle_answer(out.generated_text);
  out.correct = out.answer == c.expected;
  out.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return out;
}

NeedleReport evaluate_needle(Model& model, const Tokenizer& tok, const KvTypePair& types,
                             const std::vector<NeedleCase>& cases,
                             const std::function<void(size_t, const NeedleCase&, const NeedleOutcome&)>& on_case) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  NeedleReport rep;
  rep.types = types;
  for (size_t i = 0; i < cases.size(); ++i) {
    const NeedleCase& c = cases[i];
    NeedleOutcome o = run_needle_case(model, tok, types, c);
    for (NeedleTally* t : {&rep.all, &rep.by_variant[c.variant]}) {
      ++t->n;
      t->correct += o.correct;
    }
    if (c.ref_correct) {
      ++rep.same_correct_as_ref.n;
      rep.same_correct_as_ref.correct += o.correct == *c.ref_correct;
    }
    if (c.ref_answer) {
      ++rep.same_answer_as_ref.n;
      rep.same_answer_as_ref.correct += o.answer == *c.ref_answer;
    }
    if (on_case) on_case(i, c, o);
    rep.outcomes.push_back(std::move(o));
  }
  rep.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return rep;
}

}  // namespace polykv
