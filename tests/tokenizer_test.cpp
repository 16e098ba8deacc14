// Tokenizer tests against vocabularies and expected ids produced by reference implementations
// (llama.cpp's models/ggml-vocab-*.gguf with .inp/.out from Hugging Face tokenizers; the trained model's
// SentencePiece samples). See ../shared/fixtures/README.md.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/error.h"
#include "gguf/gguf.h"
#include "test_util.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace polykv {
namespace {

std::string read_text(const std::string& path) {
  const auto bytes = test::read_file(path);
  return std::string(bytes.begin(), bytes.end());
}

std::string vocab_path(const std::string& name) {
  return test::fixtures_dir() + "/tokenizers/ggml-vocab-" + name + ".gguf";
}

// Tokenizers are loaded once per vocabulary for the whole test binary.
const Tokenizer& load(const std::string& path) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(path);
  if (it == cache.end()) it = cache.emplace(path, Tokenizer::from_gguf(GgufFile::open(path))).first;
  return it->second;
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// .inp: case texts, each followed by "\n__ggml_vocab_test__\n" (so a text never includes the newline
// that precedes the separator line). .out: one line of space-separated ids per case.
std::vector<Case> read_cases(const std::string& name) {
  const std::string inp = read_text(vocab_path(name) + ".inp");
  const std::string out = read_text(vocab_path(name) + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t pos = 0;;) {
    const size_t at = inp.find(sep, pos);
    if (at == std::string::npos) break;
    cases.push_back({inp.substr(pos, at - pos), {}});
    pos = at + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line) && i < cases.size()) {
    std::istringstream nums(line);
    int32_t id;
    while (nums >> id) cases[i].ids.push_back(id);
    ++i;
  }
  EXPECT_EQ(i, cases.size()) << name << ": .out has fewer lines than .inp has cases";
  return cases;
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

class TokenizerVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerVocab, FixtureCasesMatch) {
  const std::string name = GetParam();
  const Tokenizer& tok = load(vocab_path(name));
  const auto cases = read_cases(name);
  ASSERT_FALSE(cases.empty());
  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto ids = tok.encode(cases[i].text, /*add_special=*/false, /*parse_special=*/false);
    if (ids == cases[i].ids) {
      ++passed;
    } else {
      ADD_FAILURE() << name << " case " << i << " text '" << cases[i].text << "'\n  expected: "
                    << ids_text(cases[i].ids) << "\n  got:      " << ids_text(ids);
    }
  }
  std::printf("[ vocab    ] %-16s %zu/%zu cases match\n", name.c_str(), passed, cases.size());
  RecordProperty("passed", static_cast<int>(passed));
}

INSTANTIATE_TEST_SUITE_P(TokenizerFixtures, TokenizerVocab,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "starcoder", "deepseek-coder", "falcon",
                                           "bert-bge"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace polykv
