// BPE with ranked merges (tokenizer.ggml.model = "gpt2"): the regex pre-tokenizer cuts the text into pieces;
// each piece is written in the GPT-2 byte alphabet (one symbol per byte) and adjacent symbols are
// merged by merge rank, lowest rank first (ties: leftmost), until no ranked pair is left. Pre-tokenizers
// whose traits say so (Gemma 4 style) work on raw UTF-8 instead: ' ' becomes U+2581 first, symbols are
// characters, and bytes that no token covers become <0xNN> tokens.
#pragma once
#include <unordered_map>

#include "tokenizer/fragment_encoder.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"

namespace polykv {

class BpeEncoder : public FragmentEncoder {
 public:
  explicit BpeEncoder(const Vocab& vocab);  // throws Error for an unknown pre-tokenizer
  void encode(std::string_view text, bool starts_segment, std::vector<int32_t>& out) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // id of the merged text, kNoToken if the merged text is not a token
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  // Appends the ids of one pre-tokenized piece, already in the byte alphabet (or raw UTF-8).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  // Appends the ids standing for the bytes of `text`, a symbol that is not a token.
  void encode_fallback(std::string_view text, std::vector<int32_t>& out) const;

  const Vocab& vocab_;
  PreTokenizer pre_;
  // (left id, right id) -> merge. Merges whose sides are not both tokens can never apply: every symbol
  // is a token (single alphabet characters are, merged symbols are merge results).
  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace polykv
