#include "core/printable.h"

#include <algorithm>
#include <cstdint>
#include <sstream>

namespace polykv {
namespace {

// Length of the valid, printable UTF-8 sequence of 2 to 4 bytes at s[i], or 0: overlong forms,
// surrogates, code points past U+10FFFF and the C1 controls (U+0080..U+009F) count as not printable.
size_t printable_utf8_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return uint8_t(s[i + k]); };
  const uint8_t c = b(0);
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp < 0xA0) return 0;
  return n;
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Printable& p) {
  static const char kHex[] = "0123456789abcdef";
  const std::string_view s = p.text.substr(0, std::min(p.text.size(), p.max_len));
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = uint8_t(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      os << char(c);
      ++i;
    } else if (const size_t n = printable_utf8_len(s, i)) {
      os << s.substr(i, n);
      i += n;
    } else {
      os << "\\x" << kHex[c >> 4] << kHex[c & 15];
      ++i;
    }
  }
  if (p.text.size() > s.size()) os << "\u2026(" << p.text.size() << " bytes)";
  return os;
}

std::string Printable::str() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

}  // namespace polykv
