// Fuzz target for the tokenizers: arbitrary bytes (invalid UTF-8 included) are encoded with fixture
// vocabularies loaded once, with and without special-token parsing. Invariants (abort on violation):
//   - every id is inside the vocabulary;
//   - decode(encode(x)) == x for the lossless vocabularies (llama-spm: byte fallback; gpt-2: complete
//     byte alphabet), except that SentencePiece reads a literal U+2581 (▁) in the text as a space;
//   - the streaming decoder's chunks concatenate to decode() and, when the decoded text is valid
//     UTF-8, no chunk splits a character.
// The first input byte picks the vocabulary. Vocabularies: $POLYKV_TOKENIZER_FUZZ_VOCABS (colon-separated
// GGUF paths) or llama-spm, gpt-2, falcon and bert-bge from $POLYKV_FIXTURES (default ../shared/fixtures).
// Not wired into CMake; build e.g. with
//   clang++ -std=c++20 -fsanitize=fuzzer,address,undefined -Isrc fuzz/tokenizer_fuzz_target.cpp <polykv_lib>
// Defining POLYKV_TOKENIZER_FUZZ_NO_ENTRY leaves out LLVMFuzzerTestOneInput (to link beside another
// target) and keeps polykv_tokenizer_fuzz_one.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

struct FuzzVocab {
  polykv::Tokenizer tokenizer;
  bool lossless;
};

std::vector<std::string> vocab_paths() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("POLYKV_TOKENIZER_FUZZ_VOCABS")) {
    std::string_view list(env);
    while (!list.empty()) {
      const size_t colon = list.find(':');
      paths.emplace_back(list.substr(0, colon));
      list = colon == std::string_view::npos ? std::string_view() : list.substr(colon + 1);
    }
    return paths;
  }
  const char* fixtures = std::getenv("POLYKV_FIXTURES");
  const std::string dir = std::string(fixtures ? fixtures : "../shared/fixtures") + "/tokenizers/ggml-vocab-";
  for (const char* name : {"llama-spm", "gpt-2", "falcon", "bert-bge"}) paths.push_back(dir + name + ".gguf");
  return paths;
}

const std::vector<FuzzVocab>& vocabs() {
  static const std::vector<FuzzVocab> loaded = [] {
    std::vector<FuzzVocab> v;
    for (const std::string& path : vocab_paths()) {
      const bool lossless = path.find("llama-spm") != std::string::npos || path.find("gpt-2") != std::string::npos;
      v.push_back({polykv::Tokenizer::from_gguf(polykv::GgufFile::open(path)), lossless});
    }
    if (v.empty()) std::abort();
    return v;
  }();
  return loaded;
}

// What decode(encode(text)) must give for a lossless vocabulary.
std::string expected_round_trip(const polykv::Tokenizer& tok, std::string_view text) {
  if (tok.vocab().kind != polykv::VocabKind::SentencePiece) return std::string(text);
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, 3, "\xE2\x96\x81") == 0) {
      out += ' ';
      pos += 3;
    } else {
      out += text[pos++];
    }
  }
  return out;
}

}  // namespace

extern "C" int polykv_tokenizer_fuzz_one(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const FuzzVocab& fv = vocabs()[data[0] % vocabs().size()];
  const polykv::Tokenizer& tok = fv.tokenizer;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  for (const bool parse_special : {false, true}) {
    const std::vector<int32_t> ids = tok.encode(text, /*add_special=*/parse_special, parse_special);
    for (const int32_t id : ids)
      if (!tok.valid(id)) std::abort();
    const std::string decoded = tok.decode(ids, /*render_special=*/parse_special);
    if (!parse_special && fv.lossless && decoded != expected_round_trip(tok, text)) std::abort();

    polykv::StreamingDecoder stream(tok, parse_special);
    const bool check_chunks = polykv::utf8::is_valid(decoded);
    std::string joined;
    for (const int32_t id : ids) {
      const std::string chunk = stream.push(id);
      if (check_chunks && !polykv::utf8::is_valid(chunk)) std::abort();
      joined += chunk;
    }
    joined += stream.flush();
    if (joined != decoded) std::abort();
  }
  return 0;
}

#ifndef POLYKV_TOKENIZER_FUZZ_NO_ENTRY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return polykv_tokenizer_fuzz_one(data, size);
}
#endif
