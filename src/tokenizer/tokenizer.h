// Text <-> token ids for the vocabularies GGUF files carry (see vocab.h for the kinds). Built once from
// a file's metadata; const afterwards and safe to use from several threads at once.
//
// Encoding: special tokens written in the text are split off first (special_tokens.h), then each plain
// fragment goes to the vocabulary's algorithm (spm.h, bpe.h, wordpiece.h). Any byte string is accepted:
// ill-formed UTF-8 bytes become byte-fallback tokens (SentencePiece) or their byte-alphabet tokens
// (byte-level BPE), so decode(encode(x)) == x holds whatever x is, for vocabularies that have a token
// for every byte value (SentencePiece with byte fallback; most byte-level BPE vocabularies) — except
// that SentencePiece cannot tell a literal U+2581 (▁) in the text from a space.
//
// Decoding: the concatenation of the tokens' bytes (token_to_piece), where SentencePiece's ▁ is a space,
// control/unknown/unused tokens are left out unless render_special, and — for vocabularies that add a
// space prefix — one leading space is removed from the first text produced.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/special_tokens.h"
#include "tokenizer/vocab.h"

namespace polykv {

class FragmentEncoder;
class GgufFile;

class Tokenizer {
 public:
  // Throws Error when the metadata is missing, inconsistent or names an unsupported model/pre-tokenizer.
  static Tokenizer from_gguf(const GgufFile& f);
  static Tokenizer from_vocab(Vocab vocab);

  // add_special: add the tokens the vocabulary asks for (BOS if add_bos_token, EOS if add_eos_token;
  // for WordPiece [CLS] ... [SEP]). parse_special: recognise control tokens written in the text.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  // For prompts whose control tokens the caller places itself (chat/chat_prompt.h): encodes the
  // fragments in order, text fragments with parse_special = false (user-defined tokens are still
  // recognised) and token fragments as given. encode(text, add_special, true) is the same as
  // encode_fragments(split_special(text, true), add_special): SentencePiece's start-of-segment state
  // carries across fragments exactly as inside encode(). Throws Error for a token outside the vocabulary.
  std::vector<int32_t> encode_fragments(std::span<const TextFragment> fragments, bool add_special) const;
  // The split encode() starts with (special_tokens.h); fragments view `text`.
  std::vector<TextFragment> split_special(std::string_view text, bool parse_special) const;
  // Whether `id` is recognised in text only with parse_special (control and unknown-type tokens), as
  // opposed to user-defined tokens, which are always recognised.
  bool needs_parse_special(int32_t id) const;

  // The bytes token `id` stands for in decoded text (▁ already a space, byte tokens as their byte,
  // byte-level alphabet undone). Throws Error for an id outside the vocabulary.
  const std::string& token_to_piece(int32_t id) const;
  const std::string& piece(int32_t id) const;  // the vocabulary text, as stored
  // Whether decoding leaves this token out unless asked to render special tokens.
  bool is_hidden(int32_t id) const { return hidden_[static_cast<size_t>(id)] != 0; }
  // Whether decoding removes one leading space from the first text (vocabularies with a space prefix).
  bool strips_leading_space() const { return strip_leading_space_; }

  int32_t n_vocab() const { return vocab_->size(); }
  int32_t bos() const { return vocab_->bos; }
  int32_t eos() const { return vocab_->eos; }
  int32_t unk() const { return vocab_->unk; }
  bool is_eog(int32_t id) const;
  bool valid(int32_t id) const { return vocab_->valid(id); }
  const Vocab& vocab() const { return *vocab_; }

 private:
  Tokenizer() = default;
  // Encodes one plain fragment; starts_segment: SentencePiece state (see encode()).
  void encode_text(std::string_view text, bool parse_special, bool& starts_segment, std::vector<int32_t>& out) const;

  // Shared so that Tokenizer is cheap to copy; the encoders keep references into the vocabulary.
  std::shared_ptr<const Vocab> vocab_;
  std::shared_ptr<const FragmentEncoder> encoder_;
  std::shared_ptr<const SpecialTokenSplitter> splitter_;
  std::shared_ptr<const std::vector<std::string>> decoded_;  // id -> token_to_piece
  std::vector<uint8_t> hidden_;                              // id -> is_hidden
  bool strip_leading_space_ = false;
};

}  // namespace polykv
