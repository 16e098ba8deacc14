// SentencePiece-style BPE (tokenizer.ggml.model = "llama"), the algorithm llama.cpp uses for SPM
// vocabularies: spaces become ▁ (U+2581), the text is cut into UTF-8 characters, and adjacent symbols
// whose concatenation is a vocabulary piece are merged, highest piece score first (ties: leftmost).
// Symbols that end up not being pieces are written as <0xNN> byte tokens (byte fallback), or as the
// unknown token when the vocabulary has no byte tokens.
#pragma once
#include <array>
#include <unordered_set>

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
  // Runs the merges over `text` (already with ▁ for spaces) and appends the resulting ids.
  void encode_run(std::string_view text, std::vector<int32_t>& out) const;
  // Whether the character at text[pos, pos + len) occurs in no mergeable piece longer than itself.
  bool is_isolated(std::string_view text, size_t pos, size_t len) const;

  const Vocab& vocab_;
  // Characters that occur inside some mergeable piece of two or more characters. Any other character
  // can never merge with a neighbour, so the text is cut into independent runs around it: the merges
  // are the same as over the whole text (no merge straddles the cut), with smaller queues.
  std::array<bool, 128> ascii_in_pieces_{};
  std::unordered_set<uint32_t> non_ascii_in_pieces_;
  size_t max_piece_bytes_ = 0;  // longest mergeable piece: longer concatenations are not looked up
};

}  // namespace polykv
