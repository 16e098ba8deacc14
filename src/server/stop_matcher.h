// Stop strings over streamed text: text is released as soon as it can no longer be the start of a
// stop string, and generation ends at the first stop string found (the text ends before it).
// Invariants: the concatenation of everything push() and flush() return is the input text up to (not
// including) the first occurrence of any stop string, or all of it when none occurs; at most
// (longest stop - 1) bytes are ever held back. Stop strings are whole UTF-8 text, so a held-back tail
// starts at a character boundary when the input does.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace polykv::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);  // empty strings are ignored

  // Adds text; returns what may be sent now. After a match: the text before the stop string; all
  // later calls return "".
  std::string push(std::string_view text);
  std::string flush();  // the held-back tail (never part of a match)
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool matched_ = false;
};

}  // namespace polykv::server
