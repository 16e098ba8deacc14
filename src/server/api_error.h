// Errors answered to HTTP clients, OpenAI-style: status + {"error": {"message", "type", "param", "code"}}.
// Request parsing and validation throw ApiError; the routes catch it (and polykv::Error, as 400) and
// answer it. Messages name the offending parameter and never echo more than a short excerpt of input.
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace polykv::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string code = "", std::string param = "")
      : std::runtime_error(std::move(message)), status_(status), code_(std::move(code)), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& code() const { return code_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string code_, param_;
};

// 400 invalid_request_error, naming the parameter when there is one.
[[noreturn]] inline void bad_request(const std::string& message, const std::string& param = "",
                                     const std::string& code = "invalid_value") {
  throw ApiError(400, message, code, param);
}

// The OpenAI error type for a status: 400/413 invalid_request_error, 401 authentication_error,
// 404 not_found_error, 429 rate_limit_error, 503 server_overloaded, else server_error.
inline const char* error_type(int status) {
  switch (status) {
    case 400:
    case 413:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "server_overloaded";
    default:
      return "server_error";
  }
}

// {"error": {"message", "type", "param", "code"}}; param and code are null when empty.
inline nlohmann::ordered_json error_body(int status, const std::string& message, const std::string& code = "",
                                         const std::string& param = "") {
  nlohmann::ordered_json e;
  e["message"] = message;
  e["type"] = error_type(status);
  e["param"] = param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(param);
  e["code"] = code.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(code);
  return {{"error", e}};
}

inline nlohmann::ordered_json error_body(const ApiError& e) {
  return error_body(e.status(), e.what(), e.code(), e.param());
}

}  // namespace polykv::server
