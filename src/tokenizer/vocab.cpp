#include "tokenizer/vocab.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/printable.h"
#include "gguf/gguf.h"
#include "tokenizer/pretokenizer.h"

namespace polykv {

namespace {

// Token texts that end generation in the chat models GGUF files come from (beyond eos/eot/eom ids).
constexpr const char* kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<|eom_id|>", "<EOT>",      "_<EOT>",  "<|return|>",    "<|call|>",
};

void read_special_id(const GgufFile& f, const char* key, int32_t n_vocab, int32_t& id) {
  if (id >= n_vocab) id = kNoToken;  // a default that this vocabulary cannot hold
  if (!f.has(key)) return;
  const int64_t v = f.get_i64(key);
  if (v >= 0 && v < n_vocab) id = static_cast<int32_t>(v);
  // out of range in the file: keep the default, as llama.cpp does
}

}  // namespace

Vocab Vocab::from_gguf(const GgufFile& f) {
  Vocab v;
  v.model_name = f.get_str("tokenizer.ggml.model");
  v.pre_name = f.get_str("tokenizer.ggml.pre", "");
  v.pieces = f.get_str_array("tokenizer.ggml.tokens");
  const auto n = static_cast<int32_t>(v.pieces.size());
  check(n > 0, "tokenizer.ggml.tokens is empty");

  // Defaults by model family (llama.cpp's), overridden below by explicit keys.
  if (v.model_name == "llama") {
    v.kind = VocabKind::SentencePiece;
    v.bos = 1, v.eos = 2, v.unk = 0;
    v.add_bos = true, v.add_space_prefix = true;
  } else if (v.model_name == "gpt2") {
    v.kind = VocabKind::ByteLevelBpe;
    v.merges = f.get_str_array("tokenizer.ggml.merges");
    v.bos = 11, v.eos = 11;
  } else if (v.model_name == "gemma4") {  // BPE on raw UTF-8; its pre-tokenizer whatever the file says
    v.kind = VocabKind::ByteLevelBpe;
    v.merges = f.get_str_array("tokenizer.ggml.merges");
    v.pre_name = "gemma4";
  } else if (v.model_name == "bert") {
    v.kind = VocabKind::WordPiece;
    v.bos = 101, v.unk = 100, v.sep = 102, v.pad = 0;
    v.add_bos = true, v.add_sep = true;
  } else {
    fail("unsupported tokenizer model '", printable(v.model_name), "' (supported: llama, gpt2, gemma4, bert)");
  }

  if (f.has("tokenizer.ggml.scores")) {
    v.scores = f.get_f32_array("tokenizer.ggml.scores");
    check(v.scores.size() >= v.pieces.size(), "tokenizer.ggml.scores has ", v.scores.size(),
          " entries for ", n, " tokens");
    v.scores.resize(v.pieces.size());
    for (int32_t i = 0; i < n; ++i)
      check(std::isfinite(v.scores[size_t(i)]), "tokenizer.ggml.scores[", i, "] = ", v.scores[size_t(i)],
            " is not a finite number");
  } else {
    v.scores.assign(v.pieces.size(), 0.0f);
  }
  v.types.assign(v.pieces.size(), TokenType::Normal);
  if (f.has("tokenizer.ggml.token_type")) {
    const auto raw = f.get_i32_array("tokenizer.ggml.token_type");
    check(raw.size() >= v.pieces.size(), "tokenizer.ggml.token_type has ", raw.size(), " entries for ", n,
          " tokens");
    for (int32_t i = 0; i < n; ++i) {
      check(raw[i] >= int32_t(TokenType::Undefined) && raw[i] <= int32_t(TokenType::Byte), "tokenizer.ggml.token_type[",
            i, "] = ", raw[i], " is not a token type (0 to 6)");
      v.types[i] = static_cast<TokenType>(raw[i]);
    }
  }

  v.piece_to_id.reserve(v.pieces.size());
  for (int32_t i = 0; i < n; ++i)
    if (!v.pieces[i].empty()) v.piece_to_id.emplace(v.pieces[i], i);  // first id wins on duplicates

  const PreTokenizerTraits* pre = v.kind == VocabKind::ByteLevelBpe ? PreTokenizer::traits_for(v.pre_name) : nullptr;
  if (pre != nullptr && pre->no_default_bos) v.bos = kNoToken;
  read_special_id(f, "tokenizer.ggml.bos_token_id", n, v.bos);
  read_special_id(f, "tokenizer.ggml.eos_token_id", n, v.eos);
  read_special_id(f, "tokenizer.ggml.eot_token_id", n, v.eot);
  read_special_id(f, "tokenizer.ggml.eom_token_id", n, v.eom);
  read_special_id(f, "tokenizer.ggml.unknown_token_id", n, v.unk);
  read_special_id(f, "tokenizer.ggml.seperator_token_id", n, v.sep);
  read_special_id(f, "tokenizer.ggml.padding_token_id", n, v.pad);
  if (pre != nullptr) {  // some pre-tokenizers imply a BOS (Llama 3, Tekken, ...) or a SEP (RoBERTa)
    v.add_bos = v.add_bos || pre->adds_bos;
    v.add_sep = v.add_sep || pre->adds_sep;
  }
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  v.add_sep = f.get_bool("tokenizer.ggml.add_sep_token", v.add_sep);
  v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  if (v.kind != VocabKind::SentencePiece) v.add_space_prefix = false;
  check(!v.add_bos || v.bos != kNoToken, "add_bos_token is set but the vocabulary has no BOS id");
  check(!v.add_eos || v.eos != kNoToken, "add_eos_token is set but the vocabulary has no EOS id");

  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id != kNoToken) v.end_of_generation.push_back(id);
  for (const char* text : kEndOfGenerationTexts) {
    const int32_t id = v.find(text);
    if (id != kNoToken) v.end_of_generation.push_back(id);
  }
  std::sort(v.end_of_generation.begin(), v.end_of_generation.end());
  v.end_of_generation.erase(std::unique(v.end_of_generation.begin(), v.end_of_generation.end()),
                            v.end_of_generation.end());

  v.byte_token.fill(kNoToken);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    v.byte_token[b] = v.find(name);
  }
  return v;
}

}  // namespace polykv
