// WordPiece (tokenizer.ggml.model = "bert"), as llama.cpp stores BERT vocabularies: a piece that starts
// a word carries a leading ▁, a continuation piece ("##ing" in BERT) is stored bare ("ing").
// The text is normalized (lowercased and accents stripped when the model is uncased), split at
// whitespace and around punctuation / CJK characters; each word gets ▁ prepended and is cut greedily
// into the longest vocabulary pieces; a word that cannot be cut completely becomes the unknown token.
#pragma once
#include "tokenizer/fragment_encoder.h"
#include "tokenizer/vocab.h"

namespace polykv {

class WordPieceEncoder : public FragmentEncoder {
 public:
  explicit WordPieceEncoder(const Vocab& vocab);
  void encode(std::string_view text, bool starts_segment, std::vector<int32_t>& out) const override;

 private:
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  const Vocab& vocab_;
  size_t max_piece_bytes_ = 0;
};

}  // namespace polykv
