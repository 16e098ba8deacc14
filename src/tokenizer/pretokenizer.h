// Regex pre-tokenizers of BPE vocabularies, selected by `tokenizer.ggml.pre` (every value llama.cpp's
// vocabulary loader accepts; pretokenizer_patterns.cpp holds the table). A pre-tokenizer is a list of PCRE2
// patterns applied in turn, as llama.cpp and Hugging Face's Split(behavior = Isolated) do: the first cuts the
// text into pieces (each match is a piece, and so is each run of text between matches; an empty match is a cut
// at its position), every later pattern cuts each existing piece the same way. BPE merges then never cross a
// piece boundary. An unknown name is an error that names the value and lists the supported ones.
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

// How a vocabulary's BPE treats text besides the split patterns (llama.cpp sets these by pre-tokenizer name).
struct PreTokenizerTraits {
  bool ignore_merges = false;       // a piece that is itself a token is emitted whole, skipping merges
  bool byte_level = true;           // pieces are spelled in the GPT-2 byte alphabet; false: raw UTF-8 pieces,
                                    // <0xNN> tokens for bytes that no token covers, no alphabet on decode
  bool escape_whitespace = false;   // every ' ' becomes U+2581 before splitting (and back on decode)
  bool whole_newline_runs = false;  // a piece of only '\n' that is itself a token is emitted whole (Gemma 4)
  bool adds_bos = false;            // tokenizer.ggml.add_bos_token's default when the file has no such key
  bool adds_sep = false;            // tokenizer.ggml.add_sep_token's default (RoBERTa-style encoders)
  bool no_default_bos = false;      // no BOS id unless the file names one (ChatGLM / GLM-4)
};

class PreTokenizer {
 public:
  // Throws Error naming `name` and the supported names when it is not supported. "" means "default".
  static PreTokenizer for_name(const std::string& name);
  // The traits of a supported name, nullptr for an unknown one (nothing is compiled).
  static const PreTokenizerTraits* traits_for(const std::string& name);
  static std::vector<std::string> supported_names();

  // Cuts `text` into non-empty consecutive spans covering all of it. Invalid UTF-8 is allowed: no
  // pattern matches an ill-formed sequence, so its bytes land in the runs between matches. When
  // traits().escape_whitespace, the caller passes the text with its spaces already escaped.
  std::vector<PieceSpan> split(std::string_view text) const;

  const PreTokenizerTraits& traits() const { return traits_; }
  bool ignore_merges() const { return traits_.ignore_merges; }

 private:
  std::vector<std::shared_ptr<const CompiledRegex>> patterns_;
  PreTokenizerTraits traits_;
};

}  // namespace polykv
