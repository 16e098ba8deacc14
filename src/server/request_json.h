// Request bodies: depth-limited JSON parsing and typed access to an object's members. Every mismatch
// throws ApiError 400 naming the parameter, so handlers never touch a value of the wrong type.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/json_limits.h"

namespace polykv::server {

using Json = nlohmann::ordered_json;  // keeps key order (templates see messages as the client wrote them)

// Containers nested deeper than this are refused while parsing, before anything recursive runs.
inline constexpr int kMaxRequestJsonDepth = kMaxJsonDepth;

// Parses a request body that must be one JSON object (parse_json_limited); 400 ("invalid_json") for
// malformed text, invalid UTF-8, nesting deeper than kMaxRequestJsonDepth, or anything but an object.
// The only place in the server that parses JSON.
Json parse_request_json(std::string_view body);

// Dumps a response: invalid UTF-8 in strings (a token's raw bytes) becomes U+FFFD, never an exception.
std::string dump_json(const Json& j);

// Typed, validated access to the members of one JSON object. A member that is absent or null is
// "not given" (std::nullopt): clients send null for unset optional parameters. `prefix` names the
// object in messages ("stream_options." -> "stream_options.include_usage").
class Fields {
 public:
  explicit Fields(const Json& object, std::string prefix = "");

  const Json* get(const char* key) const;  // nullptr when absent or null
  std::optional<bool> boolean(const char* key) const;
  std::optional<std::string> string(const char* key, size_t max_bytes = 1 << 20) const;
  // A number in [lo, hi] (finite). Integers are accepted as numbers.
  std::optional<double> number(const char* key, double lo, double hi) const;
  // An integer in [lo, hi]; a float with an integral value (1e3) counts as an integer.
  std::optional<int64_t> integer(const char* key, int64_t lo, int64_t hi) const;
  const Json* object(const char* key) const;  // nullptr when not given; 400 when not an object
  const Json* array(const char* key) const;   // nullptr when not given; 400 when not an array

  std::string name(const char* key) const { return prefix_ + key; }

 private:
  const Json& obj_;
  std::string prefix_;
};

// Element i of an integer array as an int64 in [lo, hi]; 400 naming param[i] otherwise.
int64_t integer_element(const Json& array, size_t i, int64_t lo, int64_t hi, const std::string& param);

}  // namespace polykv::server
