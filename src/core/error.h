// Errors: bad input (files, flags, requests) is reported by throwing polykv::Error with a message that
// names the problem. Callers at the edges (CLI, server) catch it and turn it into an exit code or status.
// UsageError is the subset that is wrong on the command line itself, knowable before any file is read
// (unknown type name, malformed id list, conflicting options): the CLI exits 2 for it, 1 for other Errors.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace polykv {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class UsageError : public Error {
 public:
  using Error::Error;
};

// Concatenates any streamable values into one string: cat("bad offset ", off, " in ", name).
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(cat(args...));
}

// Checks a condition on input data; throws Error with the message when it does not hold.
template <typename... Args>
void check(bool ok, const Args&... args) {
  if (!ok) fail(args...);
}

// Like check, for command-line arguments: throws UsageError.
template <typename... Args>
void usage_check(bool ok, const Args&... args) {
  if (!ok) throw UsageError(cat(args...));
}

}  // namespace polykv
