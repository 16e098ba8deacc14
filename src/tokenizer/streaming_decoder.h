// Incremental detokenization for generation: feed ids one at a time, get text that is safe to print.
// It never emits part of a UTF-8 character: bytes that begin a character still missing its last bytes
// (byte-fallback tokens can split one character over several tokens) are held until it completes.
// Bytes that can never become a valid character are emitted as they are. The concatenation of all
// push() results and flush() equals Tokenizer::decode of the same ids.
#pragma once
#include <cstdint>
#include <string>

namespace polykv {

class Tokenizer;

class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool render_special = false)
      : tokenizer_(tokenizer), render_special_(render_special) {}

  std::string push(int32_t id);  // throws Error for an id outside the vocabulary
  std::string flush();           // everything still held back (an unfinished character, as is)
  void reset();

 private:
  const Tokenizer& tokenizer_;
  bool render_special_;
  bool produced_text_ = false;  // the SentencePiece leading space is removed from the first text only
  std::string pending_;         // held bytes: an incomplete UTF-8 sequence (0..3 bytes)
};

}  // namespace polykv
