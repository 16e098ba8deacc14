// JSON from untrusted sources (files, request bodies), parsed with a nesting limit that the parser
// itself enforces, so no code after it ever holds a document deeper than the limit.
//
// Why here and not later: in nlohmann 3.11 the parser (an explicit state stack) and the destructor
// (which flattens children onto a heap stack) are iterative, but dump(), copies, operator== and our
// own converters (jinja::value_from_json) recurse once per level; a 50 KB file of '[' overflows the
// stack in any of them. Everything that parses outside input calls parse_json_limited; nothing
// else in src/ calls json::parse.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace polykv {

// The depth every outside document is held to: matches the interpreter's container nesting limit
// (jinja::kMaxValueNesting), far above what any conversation, tool schema or request needs.
inline constexpr int kMaxJsonDepth = 512;

// Parses one complete JSON document (no comments; anything but whitespace after it is an error), in
// time linear in its size (objects with many members included; duplicate keys: the last value wins,
// at the first key's position, as in Python's json.loads).
// Depth counts containers: a scalar has depth 0, `[]` and `{"a": 1}` 1, `[[]]` 2. Throws
// polykv::Error
//   "<what> JSON nested deeper than <max_depth> levels" as soon as the parser opens container
//   number max_depth + 1 (before anything recursive runs), and
//   "<what> is not valid JSON: <position and reason>" for malformed text; the echo of the offending
//   token is cut to its last few dozen bytes, so the message stays short whatever the input.
// `what` names the document for the message ("messages", "tools", "request body").
// Json is nlohmann::ordered_json (keeps key order, as Python does) or nlohmann::json.
template <typename Json = nlohmann::ordered_json>
Json parse_json_limited(std::string_view text, int max_depth, const char* what);

extern template nlohmann::json parse_json_limited<nlohmann::json>(std::string_view, int, const char*);
extern template nlohmann::ordered_json parse_json_limited<nlohmann::ordered_json>(std::string_view, int,
                                                                                  const char*);

// A short description of j for error messages, never recursive and never longer than about
// max_bytes + 40: scalars as JSON text (cut with "..."), containers as "an array of N elements" /
// "an object of N members".
template <typename Json>
std::string json_excerpt(const Json& j, size_t max_bytes = 64);

extern template std::string json_excerpt<nlohmann::json>(const nlohmann::json&, size_t);
extern template std::string json_excerpt<nlohmann::ordered_json>(const nlohmann::ordered_json&, size_t);

// text cut to at most max_bytes at a UTF-8 character boundary, "..." appended when cut.
std::string truncate_for_message(std::string_view text, size_t max_bytes);

}  // namespace polykv
