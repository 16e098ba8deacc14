#include "tokenizer/utf8.h"

namespace polykv::utf8 {

namespace {

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Valid range of the second byte for a lead byte (Unicode Table 3-7, "well-formed byte sequences").
// Returns false for bytes that cannot lead a multi-byte sequence.
bool second_byte_range(uint8_t lead, uint8_t& lo, uint8_t& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) return true;
  if (lead == 0xE0) { lo = 0xA0; return true; }
  if (lead >= 0xE1 && lead <= 0xEC) return true;
  if (lead == 0xED) { hi = 0x9F; return true; }
  if (lead >= 0xEE && lead <= 0xEF) return true;
  if (lead == 0xF0) { lo = 0x90; return true; }
  if (lead >= 0xF1 && lead <= 0xF3) return true;
  if (lead == 0xF4) { hi = 0x8F; return true; }
  return false;
}

}  // namespace

size_t valid_sequence_length(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  const auto lead = static_cast<uint8_t>(s[pos]);
  if (lead < 0x80) return 1;
  uint8_t lo, hi;
  if (!second_byte_range(lead, lo, hi)) return 0;
  const size_t len = announced_length(lead);
  if (pos + len > s.size()) return 0;
  const auto b1 = static_cast<uint8_t>(s[pos + 1]);
  if (b1 < lo || b1 > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if (!is_continuation(static_cast<uint8_t>(s[pos + k]))) return 0;
  return len;
}

uint32_t decode(std::string_view s, size_t pos, size_t len) {
  const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[pos + k])); };
  switch (len) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t incomplete_suffix_length(std::string_view s) {
  // A split character has its lead byte among the last 3 bytes, followed only by valid continuations,
  // and fewer bytes than the lead announces.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<uint8_t>(s[n - back]);
    if (is_continuation(b)) continue;
    uint8_t lo, hi;
    if (b < 0x80 || !second_byte_range(b, lo, hi)) return 0;
    const size_t len = announced_length(b);
    if (back >= len) return 0;  // complete (or over-long run): nothing to hold back
    if (back >= 2) {
      const auto b1 = static_cast<uint8_t>(s[n - back + 1]);
      if (b1 < lo || b1 > hi) return 0;  // can never become valid: emit as is
    }
    return back;
  }
  return 0;
}

bool is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t len = valid_sequence_length(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace polykv::utf8
