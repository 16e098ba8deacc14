// UTF-8 helpers shared by the tokenizers. All functions accept arbitrary bytes: invalid input is never
// an error here, callers decide what an invalid byte means (byte fallback, byte-level mapping, ...).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace polykv::utf8 {

// Length of the well-formed UTF-8 sequence starting at s[pos] (1..4), or 0 when the bytes there do not
// form one (stray continuation byte, overlong form, surrogate, > U+10FFFF, truncated sequence).
size_t valid_sequence_length(std::string_view s, size_t pos);

// Length that a lead byte announces (1 for ASCII and for bytes that cannot start a sequence).
inline size_t announced_length(uint8_t lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF8) return 4;
  return 1;
}

// Decodes the well-formed sequence of `len` bytes at s[pos] (len from valid_sequence_length).
uint32_t decode(std::string_view s, size_t pos, size_t len);

// Appends the UTF-8 encoding of code point cp (must be <= 0x10FFFF and not a surrogate).
void append(std::string& out, uint32_t cp);

// Number of bytes at the end of s that form the beginning of a well-formed sequence still missing its
// last bytes (0..3). Used by streaming output to hold back a character split across tokens.
size_t incomplete_suffix_length(std::string_view s);

bool is_valid(std::string_view s);

}  // namespace polykv::utf8
