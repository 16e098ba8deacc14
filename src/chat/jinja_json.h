// Conversions between nlohmann::json and interpreter values, and Python's json.dumps (used by
// transformers' tojson filter) reproduced byte for byte.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/jinja_value.h"

namespace polykv::jinja {

// nlohmann::json keeps object keys sorted; ordered_json keeps insertion order (as Python does).
// Throws polykv::Error when containers nest deeper than kMaxValueNesting, checked before recursing
// (so any depth is safe); parse outside input with parse_json_limited (core/json_limits.h).
Value value_from_json(const nlohmann::json& j);
Value value_from_json(const nlohmann::ordered_json& j);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: single line; else the per-level indent text
  std::optional<std::string> item_separator, key_separator;  // nullopt: Python's defaults
  bool sort_keys = false;
};

// json.dumps(v, ...); throws polykv::Error "Object of type X is not JSON serializable".
std::string python_json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace polykv::jinja
