// The table of pre-tokenizers: every `tokenizer.ggml.pre` value llama.cpp's vocabulary loader accepts,
// mapped to its PCRE2 patterns and traits. Internal to pretokenizer.cpp (and its tests).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "tokenizer/pretokenizer.h"

namespace polykv {

struct PreTokenizerRecipe {
  std::string type;                   // the pattern family ("llama3", "qwen2", ...); names of one type share it
  std::vector<std::string> patterns;  // applied in turn (see pretokenizer.h)
  PreTokenizerTraits traits;
};

// name -> recipe. The empty name (a GGUF without tokenizer.ggml.pre) maps to "default", as in llama.cpp.
const std::map<std::string, PreTokenizerRecipe>& pre_tokenizer_recipes();

}  // namespace polykv
