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
#include "tokenizer/pretokenizer.h"
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
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
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

// ---- round trips and decoding ----

// Decoding the encoding gives the text back for SentencePiece vocabularies with byte fallback and for
// byte-level BPE (every byte has a token). WordPiece (bert-bge) cannot: it lowercases, strips accents
// and drops whitespace, so it is left out.
TEST_P(TokenizerVocab, RoundTripAndStreaming) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::string name = GetParam();
  if (name == "bert-bge") GTEST_SKIP() << "WordPiece normalization is lossy";
  const Tokenizer& tok = load(vocab_path(name));
  for (const Case& c : read_cases(name)) {
    const auto ids = tok.encode(c.text, false, false);
    EXPECT_EQ(tok.decode(ids), c.text) << name << ": '" << c.text << "'";
    // Streaming: every chunk is valid UTF-8 (the inputs are), and the chunks add up to decode().
    StreamingDecoder stream(tok);
    std::string joined;
    for (int32_t id : ids) {
      const std::string chunk = stream.push(id);
      EXPECT_TRUE(utf8::is_valid(chunk)) << name << ": chunk splits a character in '" << c.text << "'";
      joined += chunk;
    }
    joined += stream.flush();
    EXPECT_EQ(joined, c.text);
  }
}

TEST(TokenizerSpm, ByteFallbackSplitsCharacterButStreamDoesNot) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const Tokenizer& tok = load(vocab_path("llama-spm"));
  // U+1F999 is not a piece: its 4 bytes become <0xF0> <0x9F> <0xA6> <0x99>.
  const std::string text = "a \xF0\x9F\xA6\x99 b";
  const auto ids = tok.encode(text, false, false);
  int byte_tokens = 0;
  for (int32_t id : ids) byte_tokens += tok.vocab().type(id) == TokenType::Byte;
  EXPECT_EQ(byte_tokens, 4);
  StreamingDecoder stream(tok);
  std::vector<std::string> chunks;
  for (int32_t id : ids) chunks.push_back(stream.push(id));
  chunks.push_back(stream.flush());
  std::string joined;
  for (const auto& ch : chunks) {
    EXPECT_TRUE(utf8::is_valid(ch));
    joined += ch;
  }
  EXPECT_EQ(joined, text);
}

TEST(TokenizerSpm, BosAndLeadingSpace) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const Tokenizer& tok = load(vocab_path("llama-spm"));
  const auto ids = tok.encode("Hello world", true, false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], tok.bos());
  EXPECT_EQ(ids[1], 15043);  // "▁Hello": the space prefix
  EXPECT_EQ(tok.decode(ids), "Hello world");
  EXPECT_EQ(tok.decode(ids, /*render_special=*/true), "<s> Hello world");
  EXPECT_TRUE(tok.is_eog(tok.eos()));
  EXPECT_FALSE(tok.is_eog(tok.bos()));
}

TEST(TokenizerSpecial, ParsedOnlyWhenAsked) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const Tokenizer& tok = load(vocab_path("llama-spm"));
  const auto plain = tok.encode("<s>x</s>", false, false);
  for (int32_t id : plain) EXPECT_FALSE(tok.vocab().is_control_like(id));
  EXPECT_EQ(tok.decode(plain), "<s>x</s>");
  const auto parsed = tok.encode("<s>x</s>", false, true);
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed.front(), 1);
  EXPECT_EQ(parsed.back(), 2);
  EXPECT_EQ(tok.decode(parsed, true), "<s> x</s>");  // text after a special token gets the space prefix

  const Tokenizer& gpt2 = load(vocab_path("gpt-2"));
  const auto eot = gpt2.encode("a<|endoftext|>b", false, true);
  ASSERT_EQ(eot.size(), 3u);
  EXPECT_EQ(eot[1], 50256);
  EXPECT_TRUE(gpt2.is_eog(eot[1]));
  EXPECT_GT(gpt2.encode("a<|endoftext|>b", false, false).size(), 3u);
  EXPECT_EQ(gpt2.decode(eot, true), "a<|endoftext|>b");
}

TEST(TokenizerBpe, UnknownPreTokenizerIsAnError) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Vocab v = Tokenizer::from_gguf(GgufFile::open(vocab_path("gpt-2"))).vocab();
  v.pre_name = "no-such-pre";
  try {
    Tokenizer::from_vocab(v);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-pre"), std::string::npos) << e.what();
  }
}

// The supported pre-tokenizers without a fixture vocabulary still compile and split sensibly.
TEST(TokenizerBpe, PreTokenizerPatternsOfOtherModels) {
  const std::string text = "Hello World's 12345 ,.!  \n\n  x";
  for (const std::string& name : PreTokenizer::supported_names()) {
    const PreTokenizer pre = PreTokenizer::for_name(name);
    size_t covered = 0;
    for (const PieceSpan& s : pre.split(text)) {
      EXPECT_EQ(s.offset, covered) << name;
      EXPECT_GT(s.length, 0u) << name;
      covered += s.length;
    }
    EXPECT_EQ(covered, text.size()) << name;
  }
  // Llama 3: digits in groups of at most three; contractions split off.
  const PreTokenizer llama3 = PreTokenizer::for_name("llama-bpe");
  std::vector<std::string> pieces;
  for (const PieceSpan& s : llama3.split("I'M 12345")) pieces.emplace_back("I'M 12345", s.offset, s.length);
  EXPECT_EQ(pieces, (std::vector<std::string>{"I", "'M", " ", "123", "45"}));
  const PreTokenizer qwen2 = PreTokenizer::for_name("qwen2");
  pieces.clear();
  for (const PieceSpan& s : qwen2.split("ab 123")) pieces.emplace_back("ab 123", s.offset, s.length);
  EXPECT_EQ(pieces, (std::vector<std::string>{"ab", " ", "1", "2", "3"}));
}

// ---- robustness ----

TEST(TokenizerRobustness, EmptyAndInvalidUtf8) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  for (const char* name : {"llama-spm", "phi-3", "gpt-2", "starcoder", "deepseek-coder", "falcon", "bert-bge"}) {
    const Tokenizer& tok = load(vocab_path(name));
    EXPECT_TRUE(tok.encode("", false, false).empty()) << name;
    const std::string bad[] = {std::string("\xFF"), std::string("a\xC3"), std::string("\xE2\x82 \x80\x80x"),
                               std::string("\xED\xA0\x80"), std::string("\xF4\x90\x80\x80"),
                               std::string("ok\0nul", 6), std::string("\xC0\xAF<s>\xF0\x9F")};
    for (const std::string& text : bad) {
      const auto ids = tok.encode(text, true, true);
      for (int32_t id : ids) EXPECT_TRUE(tok.valid(id));
      // Every byte survives where each byte value has a token: SentencePiece byte fallback (llama-spm,
      // phi-3) and GPT-2's complete alphabet. starcoder and falcon lack tokens for bytes that never occur
      // in UTF-8 (0xC0, 0xC1, 0xF5..0xFF) and falcon for some C0 controls: those bytes are dropped, as in
      // llama.cpp. deepseek-coder spells 13 Latin-1 letters as user-defined tokens, which decode as text.
      if (std::string(name) == "llama-spm" || std::string(name) == "phi-3" || std::string(name) == "gpt-2") {
        EXPECT_EQ(tok.decode(tok.encode(text, false, false)), text) << name;
      }
    }
  }
}

TEST(TokenizerRobustness, RandomBytesRoundTrip) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  std::mt19937 rng(7);
  for (const char* name : {"llama-spm", "phi-3", "gpt-2"}) {  // see EmptyAndInvalidUtf8 for the others
    const Tokenizer& tok = load(vocab_path(name));
    for (int trial = 0; trial < 200; ++trial) {
      std::string text(rng() % 64, '\0');
      for (char& c : text) c = static_cast<char>(rng() % 4 == 0 ? 0x80 + rng() % 128 : rng() % 128);
      EXPECT_EQ(tok.decode(tok.encode(text, false, false)), text) << name;
    }
  }
}

std::string mixed_text(size_t bytes) {
  std::string unit;
  for (const char* name : {"llama-spm", "gpt-2"}) unit += read_text(vocab_path(name) + ".inp");
  unit += read_text(test::fixtures_dir() + "/models/trained/ppl_dev.txt");
  std::string text;
  while (text.size() < bytes) text += unit;
  text.resize(bytes);
  return text;
}

// 2 MB must take well under a second per vocabulary (the merges are O(n log n), BPE words are cached).
TEST(TokenizerRobustness, TwoMegabytesInBoundedTime) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::string text = mixed_text(2 << 20);
  const std::string spaces(1 << 20, ' ');  // one enormous pre-tokenizer piece / SentencePiece run
  for (const char* name : {"llama-spm", "gpt-2", "falcon", "bert-bge"}) {
    const Tokenizer& tok = load(vocab_path(name));
    for (const std::string* input : {&text, &spaces}) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto ids = tok.encode(*input, false, false);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_EQ(ids.empty(), input == &spaces && std::string(name) == "bert-bge");  // WordPiece drops spaces
      EXPECT_LT(s, 10.0) << name;
      std::printf("[ timing   ] %-10s %zu bytes -> %zu ids in %.3f s\n", name, input->size(), ids.size(), s);
    }
  }
}

// ---- the trained model's SentencePiece vocabulary (add_space_prefix = false) ----

const Tokenizer& trained() { return load(test::fixtures_dir() + "/models/trained/trained_llama.gguf"); }

TEST(TokenizerTrained, SamplesMatchSentencePiece) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const auto info = nlohmann::json::parse(read_text(test::fixtures_dir() + "/models/trained/tokenizer_info.json"));
  const Tokenizer& tok = trained();
  EXPECT_FALSE(tok.vocab().add_space_prefix);
  int n = 0;
  for (const auto& sample : info["samples"]) {
    const std::string text = sample["text"];
    const auto expected = sample["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text, false, false), expected) << "'" << text << "'";
    EXPECT_EQ(tok.decode(expected), text);
    ++n;
  }
  EXPECT_EQ(n, 14);
}

// ppl_dev_ids rows are held-out token streams: documents separated by </s><s>, cut every 2048 ids.
// ppl_dev.txt is the rows decoded without control tokens, joined by newlines. Re-encoding each document piece of a row
// should give its ids back, except where SentencePiece's own encoder differs from llama.cpp-style
// merging, or at the row's cut ends (a cut can fall inside a merge).
TEST(TokenizerTrained, PplDevTextReEncodes) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const Tokenizer& tok = trained();
  const auto raw = test::read_file(test::fixtures_dir() + "/models/trained/ppl_dev_ids.i32");
  ASSERT_EQ(raw.size(), 16u * 2048u * 4u);
  std::vector<int32_t> all(raw.size() / 4);
  std::memcpy(all.data(), raw.data(), raw.size());

  std::string decoded_rows;
  size_t whole_rows_exact = 0;
  size_t segments = 0, exact_segments = 0, tokens = 0, tokens_in_exact = 0, interior = 0, interior_exact = 0;
  for (size_t r = 0; r < 16; ++r) {
    const std::vector<int32_t> row(all.begin() + r * 2048, all.begin() + (r + 1) * 2048);
    if (r > 0) decoded_rows += '\n';  // the file puts a newline between rows
    decoded_rows += tok.decode(row);
    // The whole row's text, document boundaries dropped: merges may now join across them.
    std::vector<int32_t> row_text_ids;
    for (int32_t id : row)
      if (!tok.vocab().is_control_like(id)) row_text_ids.push_back(id);
    whole_rows_exact += tok.encode(tok.decode(row), false, false) == row_text_ids;
    // Cut at control tokens into document pieces.
    std::vector<std::vector<int32_t>> pieces(1);
    for (int32_t id : row) {
      if (tok.vocab().is_control_like(id)) {
        if (!pieces.back().empty()) pieces.emplace_back();
      } else {
        pieces.back().push_back(id);
      }
    }
    if (pieces.back().empty()) pieces.pop_back();
    for (size_t p = 0; p < pieces.size(); ++p) {
      const auto re = tok.encode(tok.decode(pieces[p]), false, false);
      const bool exact = re == pieces[p];
      const bool is_interior = p > 0 && p + 1 < pieces.size();
      ++segments;
      tokens += pieces[p].size();
      if (exact) ++exact_segments, tokens_in_exact += pieces[p].size();
      if (is_interior) ++interior, interior_exact += exact;
    }
  }
  EXPECT_EQ(decoded_rows, read_text(test::fixtures_dir() + "/models/trained/ppl_dev.txt"));
  std::printf("[ ppl_dev  ] %zu/%zu document pieces re-encode exactly (%zu/%zu interior), %.2f%% of %zu tokens\n",
              exact_segments, segments, interior_exact, interior, 100.0 * tokens_in_exact / tokens, tokens);
  std::printf("[ ppl_dev  ] %zu/16 whole rows (boundaries dropped) re-encode exactly\n", whole_rows_exact);
  EXPECT_GE(static_cast<double>(tokens_in_exact) / tokens, 0.9);
}

}  // namespace
}  // namespace polykv
