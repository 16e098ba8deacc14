#include "tokenizer/streaming_decoder.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace polykv {

std::string StreamingDecoder::push(int32_t id) {
  const std::string& piece = tokenizer_.token_to_piece(id);  // validates id
  if (piece.empty() || (!render_special_ && tokenizer_.is_hidden(id))) return {};
  std::string_view text = piece;
  if (!produced_text_) {
    produced_text_ = true;
    if (tokenizer_.strips_leading_space() && text.front() == ' ') text.remove_prefix(1);
  }
  pending_ += text;
  const size_t hold = utf8::incomplete_suffix_length(pending_);
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StreamingDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

void StreamingDecoder::reset() {
  produced_text_ = false;
  pending_.clear();
}

}  // namespace polykv
