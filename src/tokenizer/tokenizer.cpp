#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/wordpiece.h"

namespace polykv {

namespace {

std::string replace_space_marker(std::string_view text) {
  static constexpr std::string_view kMarker = "\xE2\x96\x81";
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, kMarker.size(), kMarker) == 0) {
      out += ' ';
      pos += kMarker.size();
    } else {
      out += text[pos++];
    }
  }
  return out;
}

// The bytes a token stands for in decoded text. `bpe` says how BPE pieces are spelled (nullptr: byte alphabet).
std::string decoded_piece(const Vocab& v, const PreTokenizerTraits* bpe, int32_t id) {
  const std::string& text = v.pieces[id];
  const TokenType type = v.type(id);
  if (type == TokenType::Byte) {
    for (int b = 0; b < 256; ++b)
      if (v.byte_token[b] == id) return std::string(1, static_cast<char>(b));
    return text;  // a byte-typed token without the <0xNN> form: keep its text
  }
  if (type == TokenType::Control || type == TokenType::Unknown || type == TokenType::UserDefined)
    return text;
  switch (v.kind) {
    case VocabKind::ByteLevelBpe:
      if (bpe == nullptr || bpe->byte_level) return ByteLevelAlphabet::instance().decode(text);
      return bpe->escape_whitespace ? replace_space_marker(text) : text;
    case VocabKind::SentencePiece:
    case VocabKind::WordPiece: return replace_space_marker(text);
  }
  return text;
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& f) { return from_vocab(Vocab::from_gguf(f)); }

Tokenizer Tokenizer::from_vocab(Vocab vocab) {
  Tokenizer t;
  auto v = std::make_shared<const Vocab>(std::move(vocab));
  t.vocab_ = v;
  switch (v->kind) {
    case VocabKind::SentencePiece: t.encoder_ = std::make_shared<SpmEncoder>(*v); break;
    case VocabKind::ByteLevelBpe: t.encoder_ = std::make_shared<BpeEncoder>(*v); break;
    case VocabKind::WordPiece: t.encoder_ = std::make_shared<WordPieceEncoder>(*v); break;
  }
  t.splitter_ = std::make_shared<SpecialTokenSplitter>(*v);
  // The encoder has already rejected an unknown pre-tokenizer name.
  const PreTokenizerTraits* bpe_traits = PreTokenizer::traits_for(v->pre_name);
  auto decoded = std::make_shared<std::vector<std::string>>();
  decoded->reserve(v->pieces.size());
  t.hidden_.resize(v->pieces.size());
  for (int32_t id = 0; id < v->size(); ++id) {
    decoded->push_back(decoded_piece(*v, bpe_traits, id));
    const TokenType type = v->type(id);
    t.hidden_[id] = type == TokenType::Control || type == TokenType::Unknown || type == TokenType::Unused;
  }
  t.decoded_ = std::move(decoded);
  t.strip_leading_space_ = v->add_space_prefix || v->kind == VocabKind::WordPiece;
  return t;
}

void Tokenizer::encode_text(std::string_view text, bool parse_special, bool& starts_segment,
                            std::vector<int32_t>& out) const {
  for (const TextFragment& frag : splitter_->split(text, parse_special)) {
    if (frag.token != kNoToken) {
      out.push_back(frag.token);
      starts_segment = true;
    } else {
      encoder_->encode(frag.text, starts_segment, out);
      starts_segment = false;
    }
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && vocab_->add_bos) out.push_back(vocab_->bos);
  bool starts_segment = true;  // SentencePiece: a fragment that begins the input or follows a special token
  encode_text(text, parse_special, starts_segment, out);
  if (add_special && vocab_->add_eos) out.push_back(vocab_->eos);
  if (add_special && vocab_->add_sep && vocab_->sep != kNoToken) out.push_back(vocab_->sep);
  return out;
}

std::vector<int32_t> Tokenizer::encode_fragments(std::span<const TextFragment> fragments, bool add_special) const {
  std::vector<int32_t> out;
  if (add_special && vocab_->add_bos) out.push_back(vocab_->bos);
  bool starts_segment = true;
  for (const TextFragment& frag : fragments) {
    if (frag.token != kNoToken) {
      check(valid(frag.token), "token id ", frag.token, " is outside the vocabulary (0..", n_vocab() - 1, ")");
      out.push_back(frag.token);
      starts_segment = true;
    } else {
      encode_text(frag.text, false, starts_segment, out);
    }
  }
  if (add_special && vocab_->add_eos) out.push_back(vocab_->eos);
  if (add_special && vocab_->add_sep && vocab_->sep != kNoToken) out.push_back(vocab_->sep);
  return out;
}

std::vector<TextFragment> Tokenizer::split_special(std::string_view text, bool parse_special) const {
  return splitter_->split(text, parse_special);
}

bool Tokenizer::needs_parse_special(int32_t id) const {
  if (!valid(id)) return false;
  const TokenType t = vocab_->type(id);
  return t == TokenType::Control || t == TokenType::Unknown;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  StreamingDecoder decoder(*this, render_special);
  std::string out;
  for (int32_t id : ids) out += decoder.push(id);
  out += decoder.flush();
  return out;
}

const std::string& Tokenizer::token_to_piece(int32_t id) const {
  check(valid(id), "token id ", id, " is outside the vocabulary (0..", n_vocab() - 1, ")");
  return (*decoded_)[static_cast<size_t>(id)];
}

const std::string& Tokenizer::piece(int32_t id) const {
  check(valid(id), "token id ", id, " is outside the vocabulary (0..", n_vocab() - 1, ")");
  return vocab_->pieces[static_cast<size_t>(id)];
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(vocab_->end_of_generation.begin(), vocab_->end_of_generation.end(), id);
}

}  // namespace polykv
