// Regex pre-tokenizers of byte-level BPE vocabularies, selected by `tokenizer.ggml.pre`. A pre-tokenizer
// is a list of PCRE2 patterns applied in turn, as llama.cpp does: the first cuts the text into pieces
// (each match is a piece, and so is each run of text between matches), every later pattern cuts each
// existing piece the same way. BPE merges then never cross a piece boundary.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace polykv {

class CompiledRegex;

struct PieceSpan {
  size_t offset;
  size_t length;
};

class PreTokenizer {
 public:
  // Throws Error naming `name` and the supported names when it is not supported.
  static PreTokenizer for_name(const std::string& name);
  static std::vector<std::string> supported_names();

  // Cuts `text` into non-empty consecutive spans covering all of it. Invalid UTF-8 is allowed: no
  // pattern matches an ill-formed sequence, so its bytes land in the runs between matches.
  std::vector<PieceSpan> split(std::string_view text) const;

  // Whether a piece that is itself a vocabulary token is emitted whole, skipping merges (Llama 3).
  bool ignore_merges() const { return ignore_merges_; }

 private:
  std::vector<std::shared_ptr<const CompiledRegex>> patterns_;
  bool ignore_merges_ = false;
};

}  // namespace polykv
