#include "tokenizer/wordpiece.h"

#include <string>

#include "core/error.h"
#include "tokenizer/utf8.h"

#ifdef POLYKV_HAVE_ICU
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#endif

namespace polykv {

namespace {

constexpr std::string_view kWordStart = "\xE2\x96\x81";  // ▁

// CJK ideograph blocks BERT splits into single-character words (BasicTokenizer._is_chinese_char; the
// upper bound of the second extension block is the one the Hugging Face Rust code uses).
bool is_cjk_ideograph(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

#ifdef POLYKV_HAVE_ICU
// Code points of `text` after NFD (canonical decomposition). Ill-formed bytes become U+FFFD.
std::u32string decompose(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(status);
  check(U_SUCCESS(status), "ICU NFD normalizer unavailable");
  icu::UnicodeString src = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  icu::UnicodeString dst = nfd->normalize(src, status);
  check(U_SUCCESS(status), "ICU NFD normalization failed");
  std::u32string out;
  out.reserve(static_cast<size_t>(dst.length()));
  for (int32_t i = 0; i < dst.length();) {
    const UChar32 c = dst.char32At(i);
    out += static_cast<char32_t>(c);
    i += U16_LENGTH(c);
  }
  return out;
}
#endif

}  // namespace

WordPieceEncoder::WordPieceEncoder(const Vocab& vocab) : vocab_(vocab) {
#ifndef POLYKV_HAVE_ICU
  fail("WordPiece (bert) vocabularies need polykv built with ICU (Debian: libicu-dev)");
#endif
  for (const std::string& p : vocab.pieces) max_piece_bytes_ = std::max(max_piece_bytes_, p.size());
}

void WordPieceEncoder::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  std::string text(kWordStart);
  text += word;
  const size_t n = text.size();
  const size_t first = out.size();
  for (size_t i = 0; i < n;) {
    size_t matched_end = 0;
    for (size_t j = std::min(n, i + max_piece_bytes_); j > i; --j) {
      const int32_t id = vocab_.find(std::string_view(text).substr(i, j - i));
      if (id != kNoToken) {
        out.push_back(id);
        matched_end = j;
        break;
      }
    }
    if (matched_end == 0) {  // the word cannot be cut into pieces: it is unknown as a whole
      out.resize(first);
      break;
    }
    i = matched_end;
  }
  if (out.size() == first && vocab_.unk != kNoToken) out.push_back(vocab_.unk);
}

void WordPieceEncoder::encode(std::string_view text, bool /*starts_segment*/, std::vector<int32_t>& out) const {
#ifdef POLYKV_HAVE_ICU
  // BERT's BasicTokenizer for uncased models: NFD, drop accents (Mn), lowercase, drop control chars,
  // split at whitespace, and make every punctuation / ASCII symbol / CJK ideograph a word of its own.
  std::string word;
  const auto finish_word = [&] {
    if (!word.empty()) encode_word(word, out);
    word.clear();
  };
  for (const char32_t c : decompose(text)) {
    const auto cp = static_cast<UChar32>(c);
    if (u_isUWhiteSpace(cp)) {
      finish_word();
      continue;
    }
    const int8_t category = u_charType(cp);
    if (cp == 0 || cp == 0xFFFD || category == U_CONTROL_CHAR || category == U_FORMAT_CHAR ||
        category == U_PRIVATE_USE_CHAR || category == U_SURROGATE || category == U_UNASSIGNED)
      continue;
    if (category == U_NON_SPACING_MARK) continue;  // accent stripping
    const auto lower = static_cast<uint32_t>(u_tolower(cp));
    const bool punct = u_ispunct(cp) || (cp < 0x7F && (category == U_MATH_SYMBOL || category == U_CURRENCY_SYMBOL ||
                                                        category == U_MODIFIER_SYMBOL || category == U_OTHER_SYMBOL));
    if (punct || is_cjk_ideograph(static_cast<uint32_t>(cp))) {
      finish_word();
      utf8::append(word, lower);
      finish_word();
    } else {
      utf8::append(word, lower);
    }
  }
  finish_word();
#else
  (void)text;
  (void)out;
#endif
}

}  // namespace polykv
