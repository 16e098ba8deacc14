// Splits input text around special tokens (control, user-defined and unknown-type tokens written
// literally in the text) before the tokenization algorithm sees it.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace polykv {

struct TextFragment {
  std::string_view text;     // plain text when token == kNoToken
  int32_t token = kNoToken;  // a special token matched in the input
};

class SpecialTokenSplitter {
 public:
  explicit SpecialTokenSplitter(const Vocab& vocab);

  // Cuts `text` into plain fragments and special tokens, in order; the fragments' texts and the special
  // tokens' pieces concatenate to `text`. User-defined tokens are always recognised (as Hugging Face and
  // llama.cpp do); control and unknown-type tokens only when parse_special is set. Matching scans left
  // to right and takes the longest special token starting at each position.
  std::vector<TextFragment> split(std::string_view text, bool parse_special) const;

 private:
  struct Candidate {
    int32_t id;
    bool always;  // user-defined: recognised even without parse_special
  };
  const Vocab& vocab_;
  // First byte -> candidates starting with it, longest first.
  std::array<std::vector<Candidate>, 256> by_first_byte_;
};

}  // namespace polykv
