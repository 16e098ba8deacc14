#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace polykv {

SpecialTokenSplitter::SpecialTokenSplitter(const Vocab& vocab) : vocab_(vocab) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenType t = vocab.type(id);
    const std::string& piece = vocab.pieces[id];
    if (piece.empty()) continue;
    if (t == TokenType::Control || t == TokenType::Unknown || t == TokenType::UserDefined)
      by_first_byte_[static_cast<uint8_t>(piece[0])].push_back({id, t == TokenType::UserDefined});
  }
  for (auto& list : by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [&](const Candidate& a, const Candidate& b) {
      return vocab_.pieces[a.id].size() > vocab_.pieces[b.id].size();
    });
}

std::vector<TextFragment> SpecialTokenSplitter::split(std::string_view text, bool parse_special) const {
  std::vector<TextFragment> out;
  size_t plain_start = 0;  // start of the plain text not yet emitted
  size_t pos = 0;
  while (pos < text.size()) {
    const auto& list = by_first_byte_[static_cast<uint8_t>(text[pos])];
    int32_t matched = kNoToken;
    for (const Candidate& c : list) {
      if (!c.always && !parse_special) continue;
      const std::string& piece = vocab_.pieces[c.id];
      if (text.compare(pos, piece.size(), piece) == 0) {
        matched = c.id;
        break;  // longest first
      }
    }
    if (matched == kNoToken) {
      ++pos;
      continue;
    }
    if (pos > plain_start) out.push_back({text.substr(plain_start, pos - plain_start), kNoToken});
    out.push_back({std::string_view(vocab_.pieces[matched]), matched});
    pos += vocab_.pieces[matched].size();
    plain_start = pos;
  }
  if (plain_start < text.size()) out.push_back({text.substr(plain_start), kNoToken});
  return out;
}

}  // namespace polykv
