// SentencePiece-style BPE (tokenizer.ggml.model = "llama"), the algorithm llama.cpp uses for SPM
// vocabularies: spaces become ▁ (U+2581), the text is cut into UTF-8 characters, and adjacent symbols
// whose concatenation is a vocabulary piece are merged, highest piece score first (ties: leftmost).
// Symbols that end up not being pieces are written as <0xNN> byte tokens (byte fallback), or as the
// unknown token when the vocabulary has no byte tokens.
#pragma once
#include "tokenizer/fragment_encoder.h"
#include "tokenizer/vocab.h"

namespace polykv {

class SpmEncoder : public FragmentEncoder {
 public:
  explicit SpmEncoder(const Vocab& vocab);
  void encode(std::string_view text, bool starts_segment, std::vector<int32_t>& out) const override;

 private:
  // The id of `text` if it is a piece merges may produce (normal or user-defined), else kNoToken.
  // Control, unknown, unused and byte tokens are never produced by merging, as in SentencePiece.
  int32_t mergeable_id(std::string_view text) const;
  void append_fallback(std::string_view symbol, std::vector<int32_t>& out) const;

  const Vocab& vocab_;
};

}  // namespace polykv
