#include "server/request_json.h"

#include <cmath>
#include <sstream>

#include "core/error.h"
#include "server/api_error.h"

namespace polykv::server {

namespace {

const char* type_name(const Json& j) {
  switch (j.type()) {
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "a number";
    case Json::value_t::null:
      return "null";
    default:
      return "an unsupported value";
  }
}

[[noreturn]] void wrong_type(const std::string& param, const char* expected, const Json& got) {
  bad_request("'" + param + "' must be " + expected + ", not " + type_name(got), param, "wrong_type");
}

}  // namespace

Json parse_request_json(std::string_view body) {
  Json j;
  try {
    j = parse_json_limited<Json>(body, kMaxRequestJsonDepth, "the request body");
  } catch (const Error& e) {
    bad_request(truncate_for_message(e.what(), 300), "", "invalid_json");
  }
  if (!j.is_object())
    bad_request(std::string("the request body must be a JSON object, not ") + type_name(j), "", "invalid_json");
  return j;
}

std::string dump_json(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Fields::Fields(const Json& object, std::string prefix) : obj_(object), prefix_(std::move(prefix)) {}

const Json* Fields::get(const char* key) const {
  if (!obj_.is_object()) return nullptr;
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<bool> Fields::boolean(const char* key) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) wrong_type(name(key), "a boolean", *v);
  return v->get<bool>();
}

std::optional<std::string> Fields::string(const char* key, size_t max_bytes) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) wrong_type(name(key), "a string", *v);
  const auto& s = v->get_ref<const std::string&>();
  if (s.size() > max_bytes)
    bad_request("'" + name(key) + "' is longer than " + std::to_string(max_bytes) + " bytes", name(key));
  return s;
}

std::optional<double> Fields::number(const char* key, double lo, double hi) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(name(key), "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    std::ostringstream os;
    os << "'" << name(key) << "' must be between " << lo << " and " << hi;
    bad_request(os.str(), name(key));
  }
  return d;
}

std::optional<int64_t> Fields::integer(const char* key, int64_t lo, int64_t hi) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  return integer_element(*v, SIZE_MAX, lo, hi, name(key));
}

int64_t integer_element(const Json& value, size_t i, int64_t lo, int64_t hi, const std::string& param) {
  // i == SIZE_MAX: `value` itself; else element i of the array `value`.
  const Json& v = i == SIZE_MAX ? value : value[i];
  const std::string p = i == SIZE_MAX ? param : param + "[" + std::to_string(i) + "]";
  if (!v.is_number()) wrong_type(p, "an integer", v);
  bool ok = false;
  int64_t n = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    ok = u <= uint64_t(INT64_MAX);
    n = ok ? int64_t(u) : 0;
  } else if (v.is_number_integer()) {
    n = v.get<int64_t>();
    ok = true;
  } else {
    const double d = v.get<double>();
    ok = std::isfinite(d) && d == std::floor(d) && d >= -9.2e18 && d <= 9.2e18;
    n = ok ? int64_t(d) : 0;
    if (!ok) wrong_type(p, "an integer", v);
  }
  if (!ok || n < lo || n > hi)
    bad_request("'" + p + "' must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi), p);
  return n;
}

const Json* Fields::object(const char* key) const {
  const Json* v = get(key);
  if (v && !v->is_object()) wrong_type(name(key), "an object", *v);
  return v;
}

const Json* Fields::array(const char* key) const {
  const Json* v = get(key);
  if (v && !v->is_array()) wrong_type(name(key), "an array", *v);
  return v;
}

}  // namespace polykv::server
