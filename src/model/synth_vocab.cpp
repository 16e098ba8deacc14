#include "model/synth_vocab.h"

#include <cstdio>

#include "core/error.h"

namespace polykv {
namespace {

// ggml token types.
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;

// Bijective base-26 name of k >= 0: a..z, aa..az, ba.., so every k gives a different string.
std::string letters(int k) {
  std::string s;
  for (++k; k > 0; k = (k - 1) / 26) s.insert(s.begin(), char('a' + (k - 1) % 26));
  return s;
}

}  // namespace

void add_synth_tokenizer(GgufWriter& w, int n_vocab) {
  check(n_vocab >= kSynthMinVocab, "vocabulary of ", n_vocab, " is too small: needs at least ", kSynthMinVocab);
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0.f, 0.f, 0.f};
  std::vector<int32_t> types = {kUnknown, kControl, kControl};
  tokens.reserve(size_t(n_vocab));
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.emplace_back(buf);
    scores.push_back(0.f);
    types.push_back(kByte);
  }
  for (int k = 0; int(tokens.size()) < n_vocab; ++k) {
    tokens.push_back((k % 2 ? "\xE2\x96\x81" : "") + letters(k / 2));  // U+2581 "▁" marks a word start
    scores.push_back(-float(k + 1));
    types.push_back(kNormal);
  }
  w.set_str("tokenizer.ggml.model", "llama");
  w.set_str("tokenizer.ggml.pre", "default");
  w.set_str_array("tokenizer.ggml.tokens", tokens);
  w.set_f32_array("tokenizer.ggml.scores", scores);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
}

}  // namespace polykv
