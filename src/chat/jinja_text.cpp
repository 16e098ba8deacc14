#include "chat/jinja_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "tokenizer/utf8.h"

namespace polykv::jinja {

char32_t decode_utf8(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  auto continuation = [&](size_t k) -> int {
    if (i + k >= s.size()) return -1;
    const auto b = static_cast<unsigned char>(s[i + k]);
    return (b & 0xC0) == 0x80 ? (b & 0x3F) : -1;
  };
  if (b0 < 0x80) { i += 1; return b0; }
  int len = 0;
  char32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) { len = 2; cp = b0 & 0x1F; }
  else if ((b0 & 0xF0) == 0xE0) { len = 3; cp = b0 & 0x0F; }
  else if ((b0 & 0xF8) == 0xF0) { len = 4; cp = b0 & 0x07; }
  else { i += 1; return 0xFFFD; }
  for (int k = 1; k < len; ++k) {
    const int c = continuation(k);
    if (c < 0) { i += 1; return 0xFFFD; }
    cp = (cp << 6) | static_cast<char32_t>(c);
  }
  i += len;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) { utf8::append(out, static_cast<uint32_t>(cp)); }

std::vector<char32_t> to_code_points(std::string_view s) {
  std::vector<char32_t> cps;
  cps.reserve(s.size());
  for (size_t i = 0; i < s.size();) cps.push_back(decode_utf8(s, i));
  return cps;
}

std::string from_code_points(const std::vector<char32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t k = begin; k < end && k < cps.size(); ++k) append_utf8(out, cps[k]);
  return out;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) { decode_utf8(s, i); ++n; }
  return n;
}

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_python_linebreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 ||
         c == 0x2029;
}

std::string python_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const auto cps = to_code_points(s);
  std::vector<char32_t> set;
  if (chars) set = to_code_points(*chars);
  auto strippable = [&](char32_t c) {
    if (!chars) return is_python_space(c);
    for (char32_t x : set)
      if (x == c) return true;
    return false;
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strippable(cps[b])) ++b;
  if (right)
    while (e > b && strippable(cps[e - 1])) --e;
  return from_code_points(cps, b, e);
}

namespace {

// Whitespace split (sep=None) following CPython: runs of whitespace separate, ends are ignored,
// and after maxsplit splits the remainder is kept whole (only the whitespace before it is dropped).
std::vector<std::string> split_whitespace(std::string_view s, int64_t maxsplit, bool from_right) {
  auto cps = to_code_points(s);
  if (from_right) std::reverse(cps.begin(), cps.end());
  std::vector<std::string> parts;
  size_t i = 0;
  const size_t n = cps.size();
  while (true) {
    while (i < n && is_python_space(cps[i])) ++i;
    if (i >= n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      std::vector<char32_t> rest(cps.begin() + i, cps.end());
      if (from_right) std::reverse(rest.begin(), rest.end());
      parts.push_back(from_code_points(rest, 0, rest.size()));
      break;
    }
    size_t j = i;
    while (j < n && !is_python_space(cps[j])) ++j;
    std::vector<char32_t> word(cps.begin() + i, cps.begin() + j);
    if (from_right) std::reverse(word.begin(), word.end());
    parts.push_back(from_code_points(word, 0, word.size()));
    i = j;
  }
  if (from_right) std::reverse(parts.begin(), parts.end());
  return parts;
}

}  // namespace

std::vector<std::string> python_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                                      bool from_right) {
  if (!sep) return split_whitespace(s, maxsplit, from_right);
  const std::string& d = *sep;
  std::vector<std::string> parts;
  if (d.empty()) return parts;  // caller reports "empty separator"
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t k = s.find(d, start);
      if (k == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, k - start));
      start = k + d.size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  size_t end = s.size();
  int64_t splits = 0;
  while (maxsplit < 0 || splits < maxsplit) {
    if (end < d.size()) break;
    const size_t k = s.rfind(d, end - d.size());
    if (k == std::string_view::npos) break;
    parts.emplace_back(s.substr(k + d.size(), end - k - d.size()));
    end = k;
    ++splits;
  }
  parts.emplace_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> python_splitlines(std::string_view s) {
  std::vector<std::string> lines;
  std::string current;
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t c = decode_utf8(s, i);
    if (is_python_linebreak(c)) {
      if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
      lines.push_back(current);
      current.clear();
    } else {
      current.append(s.substr(start, i - start));
    }
  }
  if (!current.empty()) lines.push_back(current);
  return lines;
}

std::string python_replace(std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count) {
  std::string out;
  if (old_text.empty()) {  // Python inserts new_text between every code point (and at both ends)
    int64_t done = 0;
    size_t i = 0;
    while (true) {
      if (count >= 0 && done >= count) { out.append(s.substr(i)); break; }
      out.append(new_text);
      ++done;
      if (i >= s.size()) break;
      const size_t start = i;
      decode_utf8(s, i);
      out.append(s.substr(start, i - start));
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t k = s.find(old_text, start);
    if (k == std::string_view::npos) break;
    out.append(s.substr(start, k - start));
    out.append(new_text);
    start = k + old_text.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

int64_t python_count(std::string_view s, std::string_view needle) {
  if (needle.empty()) return static_cast<int64_t>(code_point_count(s)) + 1;
  int64_t n = 0;
  for (size_t k = s.find(needle); k != std::string_view::npos; k = s.find(needle, k + needle.size())) ++n;
  return n;
}

std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string python_capitalize(std::string_view s) {
  std::string out = ascii_lower(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

std::string jinja_title(std::string_view s) {
  // Jinja: "".join(item[0].upper() + item[1:].lower() for item in re.split(r"([-\s\[\](){}]+)", s) if item)
  std::string out;
  bool word_start = true;
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t c = decode_utf8(s, i);
    const bool separator = c == '-' || c == '[' || c == ']' || c == '(' || c == ')' || c == '{' || c == '}' ||
                           is_python_space(c);
    std::string piece(s.substr(start, i - start));
    if (separator) {
      out += piece;
      word_start = true;
    } else {
      out += word_start ? ascii_upper(piece) : ascii_lower(piece);
      word_start = false;
    }
  }
  return out;
}

std::string python_str_title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (char c : s) {
    const bool lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
    if (lower && !previous_cased) c = static_cast<char>(c - 'a' + 'A');
    else if (upper && previous_cased) c = static_cast<char>(c - 'A' + 'a');
    previous_cased = lower || upper || static_cast<unsigned char>(c) >= 0x80;
    out += c;
  }
  return out;
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // shortest round-trip digits: [-]d[.ddd]e[+-]XX
  std::string sign;
  if (sci[0] == '-') { sign = "-"; sci.erase(0, 1); }
  const size_t e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  const int n = static_cast<int>(digits.size());
  std::string out = sign;
  if (exponent >= -5 + 1 && exponent < 16) {  // Python repr uses fixed notation for 1e-4 <= |d| < 1e16
    if (exponent >= n - 1) {
      out += digits + std::string(exponent - (n - 1), '0') + ".0";
    } else if (exponent >= 0) {
      out += digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    } else {
      out += "0." + std::string(-exponent - 1, '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (n > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

namespace {

// Python's str.isprintable for code points >= 0x80 (approximation: the format, separator and
// private-use ranges that appear in practice).
bool is_python_printable_non_ascii(char32_t c) {
  if (c < 0xA1) return false;  // C1 controls and U+00A0
  if (c == 0xAD || (c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F))
    return false;
  if (c == 0x3000 || (c >= 0xD800 && c <= 0xF8FF) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB)) return false;
  if (c == 0xFFFE || c == 0xFFFF || (c >= 0xE0000 && c <= 0xE0FFF) || c >= 0xF0000) return false;
  return true;
}

void append_hex_escape(std::string& out, char32_t c) {
  char buf[16];
  if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
  else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
  else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
  out += buf;
}

}  // namespace

std::string python_string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t c = decode_utf8(s, i);
    if (c == static_cast<char32_t>(quote) || c == '\\') { out += '\\'; out += static_cast<char>(c); }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) append_hex_escape(out, c);
    else if (c < 0x80) out += static_cast<char>(c);
    else if (is_python_printable_non_ascii(c)) out.append(s.substr(start, i - start));
    else append_hex_escape(out, c);
  }
  out += quote;
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string json_quote(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t c = decode_utf8(s, i);
    char buf[16];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else if (c >= 0x80 && ensure_ascii) {
          if (c >= 0x10000) {  // surrogate pair
            const char32_t v = c - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          }
          out += buf;
        } else {
          out.append(s.substr(start, i - start));
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace polykv::jinja
