// GPT-2's byte-to-unicode alphabet: every byte value maps to one printable code point, so any byte
// string has a text form made of vocabulary characters. Bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF map
// to themselves; the other 68 bytes map to U+0100, U+0101, ... in increasing byte order.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace polykv {

class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& instance();

  // UTF-8 text (1 or 2 bytes) of the code point that stands for `byte`.
  const std::string& encode_byte(uint8_t byte) const { return byte_to_text_[byte]; }
  // Appends the alphabet form of every byte of `bytes`.
  void encode(std::string_view bytes, std::string& out) const;
  // Inverse of encode: maps each code point back to its byte. Code points outside the alphabet (which
  // only appear in hand-added tokens) are copied through unchanged.
  std::string decode(std::string_view text) const;

 private:
  ByteLevelAlphabet();
  std::array<std::string, 256> byte_to_text_;
  std::array<int16_t, 324> codepoint_to_byte_;  // -1 where the code point is not in the alphabet
};

}  // namespace polykv
