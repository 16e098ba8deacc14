// Running needle cases (needle_case.h): prefill the prompt, decode greedily (argmax, lowest id on
// ties; end-of-text tokens do not stop it, as in the reference script) until the decoded text holds
// a '"' or a newline, or 12 tokens were generated. The answer is the decoded text before the first
// '"', cut at the first newline; a case is correct iff the answer equals `expected`.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "eval/kv_types.h"
#include "eval/needle_case.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace polykv {

inline constexpr int kNeedleMaxNewTokens = 12;

// The answer part of generated text: before the first '"', then before the first '\n'.
std::string needle_answer(std::string_view generated_text);

struct NeedleOutcome {
  std::vector<int32_t> generated_ids;
  std::string generated_text;
  std::string answer;
  bool correct = false;
  int n_prompt_tokens = 0;
  double seconds = 0;
};

// Throws Error if the prompt holds ids outside the vocabulary or does not fit the model's context.
NeedleOutcome run_needle_case(Model& model, const Tokenizer& tok, const KvTypePair& types, const NeedleCase& c);

struct NeedleTally {
  int correct = 0;
  int n = 0;
  double accuracy() const { return n > 0 ? double(correct) / n : 0.0; }
};

struct NeedleReport {
  KvTypePair types;
  NeedleTally all;
  std::map<std::string, NeedleTally> by_variant;
  // Agreement with the reference's result, over the cases that carry it.
  NeedleTally same_correct_as_ref;  // our correct == ref_correct
  NeedleTally same_answer_as_ref;   // our answer == ref_answer
  std::vector<NeedleOutcome> outcomes;  // one per case, in order
  double seconds = 0;
};

// Runs the cases in order; on_case (optional) is called after each with its index.
NeedleReport evaluate_needle(Model& model, const Tokenizer& tok, const KvTypePair& types,
                             const std::vector<NeedleCase>& cases,
                             const std::function<void(size_t, const NeedleCase&, const NeedleOutcome&)>& on_case = {});

}  // namespace polykv
