#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace polykv {

namespace {
bool maps_to_itself(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }
}  // namespace

ByteLevelAlphabet::ByteLevelAlphabet() {
  codepoint_to_byte_.fill(-1);
  uint32_t next_extra = 256;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = maps_to_itself(b) ? static_cast<uint32_t>(b) : next_extra++;
    utf8::append(byte_to_text_[b], cp);
    codepoint_to_byte_[cp] = static_cast<int16_t>(b);
  }
}

const ByteLevelAlphabet& ByteLevelAlphabet::instance() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

void ByteLevelAlphabet::encode(std::string_view bytes, std::string& out) const {
  for (char c : bytes) out += byte_to_text_[static_cast<uint8_t>(c)];
}

std::string ByteLevelAlphabet::decode(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = utf8::valid_sequence_length(text, pos);
    if (len == 0) {  // not UTF-8: copy the byte
      out += text[pos++];
      continue;
    }
    const uint32_t cp = utf8::decode(text, pos, len);
    if (cp < codepoint_to_byte_.size() && codepoint_to_byte_[cp] >= 0)
      out += static_cast<char>(codepoint_to_byte_[cp]);
    else
      out.append(text.substr(pos, len));
    pos += len;
  }
  return out;
}

}  // namespace polykv
