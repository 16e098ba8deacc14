// The interface each tokenization algorithm implements: ids for a run of plain text (a fragment that
// contains no special token; special tokens are split off before, see special_tokens.h).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace polykv {

class FragmentEncoder {
 public:
  virtual ~FragmentEncoder() = default;
  // Appends the ids of `text` to `out`. `starts_segment`: the fragment begins the input or directly
  // follows a special token (SentencePiece prepends its space prefix only then).
  // Any bytes are accepted, invalid UTF-8 included; the call never throws on text content.
  virtual void encode(std::string_view text, bool starts_segment, std::vector<int32_t>& out) const = 0;
};

}  // namespace polykv
