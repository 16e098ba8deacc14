// Text helpers that reproduce Python's str semantics on UTF-8 byte strings: code-point length and
// slicing, str.strip/split/splitlines, repr() quoting, float repr(), and json.dumps string escaping.
// Invariant: every std::string here holds UTF-8; malformed bytes are treated as single code points
// (U+FFFD-like) so nothing ever reads past the end of a buffer.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace polykv::jinja {

// Decodes one code point starting at s[i]; advances i by its byte length (at least 1).
char32_t decode_utf8(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t cp);
std::vector<char32_t> to_code_points(std::string_view s);
std::string from_code_points(const std::vector<char32_t>& cps, size_t begin, size_t end);
size_t code_point_count(std::string_view s);
bool is_ascii(std::string_view s);

bool is_python_space(char32_t cp);    // str.isspace()
bool is_python_linebreak(char32_t cp);  // boundaries of str.splitlines()

// str.strip / lstrip / rstrip; chars == nullopt strips whitespace.
std::string python_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit) / str.rsplit; sep == nullopt splits on whitespace runs.
std::vector<std::string> python_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                                      bool from_right);
std::vector<std::string> python_splitlines(std::string_view s);
std::string python_replace(std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count);
int64_t python_count(std::string_view s, std::string_view needle);

// ASCII-only case mapping (non-ASCII code points are kept as they are).
std::string ascii_upper(std::string_view s);
std::string ascii_lower(std::string_view s);
std::string python_capitalize(std::string_view s);
std::string jinja_title(std::string_view s);  // Jinja's `title` filter (word = run after -, space, brackets)
std::string python_str_title(std::string_view s);  // str.title()

std::string python_float_repr(double d);  // repr(float): 1.0, 1e+16, 0.30000000000000004, nan, inf
std::string python_string_repr(std::string_view s);  // repr(str): 'it\'s', "it's"
// markupsafe.escape: & < > " ' become entities.
std::string html_escape(std::string_view s);
// json.dumps string with ensure_ascii as given (quotes included).
std::string json_quote(std::string_view s, bool ensure_ascii);

}  // namespace polykv::jinja
