// Pre-tokenizers of every `tokenizer.ggml.pre` value llama.cpp accepts.
// - HuggingFaceSplits: polykv's PCRE2 splits equal the pieces Hugging Face `tokenizers` (Rust, Oniguruma) cuts
//   with the models' own tokenizer.json patterns, on tricky texts (tests/data/pretokenizer/hf_splits.json, made by
//   tools/pretokenizer_refs.js: an independent implementation and independently written patterns).
// - The name lists of both sides agree, so every name is covered.
// - Hand-checked splits derived from the patterns' meaning (not from another implementation).
// - BPE on raw UTF-8 (Gemma 4 style) with a hand-made vocabulary; the BOS default some names imply.
// The real vocabularies at hand (gpt-2, starcoder, deepseek-coder, falcon, llama3, qwen3 = qwen2's pattern)
// are tested with their reference ids in tokenizer_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace polykv {
namespace {

std::vector<std::string> pieces_of(const PreTokenizer& pre, const std::string& text) {
  std::vector<std::string> out;
  for (const PieceSpan& s : pre.split(text)) out.emplace_back(text, s.offset, s.length);
  return out;
}

std::vector<std::string> split(const std::string& name, const std::string& text) {
  return pieces_of(PreTokenizer::for_name(name), text);
}

std::string escape_spaces(const std::string& text) {
  std::string out;
  for (char c : text) out += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
  return out;
}

const nlohmann::json& hf_splits() {
  static const nlohmann::json j = [] {
    std::ifstream in(test::test_data_dir() + "/pretokenizer/hf_splits.json");
    EXPECT_TRUE(in.good()) << "missing tests/data/pretokenizer/hf_splits.json";
    std::stringstream ss;
    ss << in.rdbuf();
    return nlohmann::json::parse(ss.str());
  }();
  return j;
}

std::string show(const std::vector<std::string>& pieces) {
  std::string s;
  for (const std::string& p : pieces) s += "[" + p + "]";
  return s;
}

TEST(PreTokenizer, HuggingFaceSplits) {
  const nlohmann::json& ref = hf_splits();
  const auto& texts = ref.at("texts");
  size_t checked = 0;
  for (const auto& [type, t] : ref.at("types").items()) {
    const bool escape = t.at("escape_whitespace").get<bool>();
    for (const auto& name_json : t.at("names")) {
      const std::string name = name_json.get<std::string>();
      SCOPED_TRACE("type " + type + ", name '" + name + "'");
      const PreTokenizer pre = PreTokenizer::for_name(name);
      EXPECT_EQ(pre.traits().escape_whitespace, escape);
      for (size_t i = 0; i < texts.size(); ++i) {
        const std::string text = texts[i].get<std::string>();
        const auto expected = t.at("splits")[i].get<std::vector<std::string>>();
        const auto got = pieces_of(pre, escape ? escape_spaces(text) : text);
        EXPECT_EQ(got, expected) << "text " << i << " polykv " << show(got) << "\n  HF " << show(expected);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 1000u);
}

// Every supported name is in the reference (under exactly one type) and every reference name is supported.
TEST(PreTokenizer, NameListsAgreeWithTheReference) {
  std::map<std::string, std::string> ref_type;  // name -> type
  for (const auto& [type, t] : hf_splits().at("types").items())
    for (const auto& n : t.at("names")) {
      const std::string name = n.get<std::string>();
      EXPECT_TRUE(ref_type.emplace(name, type).second) << "'" << name << "' under two types";
      EXPECT_NE(PreTokenizer::traits_for(name), nullptr) << "reference name '" << name << "' is not supported";
    }
  for (const std::string& name : PreTokenizer::supported_names())
    EXPECT_TRUE(ref_type.count(name)) << "'" << name << "' has no reference split";
}

// The names llama.cpp's loader lists (its vocabulary loader, checked 2026-05), including the ones that share an
// already tested pattern: llama3's (llama-bpe ...), qwen2's (qwen3 fixture), gpt-2's, starcoder's, falcon's.
TEST(PreTokenizer, EveryLlamaCppNameCompilesAndSplitsTrickyText) {
  const char* names[] = {
      "default", "minicpm5", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
      "lfm2", "jina-v5-nano", "deepseek-llm", "deepseek-coder", "deepseek-v3", "spark2_5", "youtu", "falcon",
      "mpt", "starcoder", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
      "a.x-4.0", "mellum", "modern-bert", "jais-2", "gemma4", "granite-embed-multi-311m", "sarvam-moe",
      "jina-v1-en", "jina-v2-code", "roberta-bpe", "whitespace", "refact", "command-r", "qwen2",
      "deepseek-r1-qwen", "kormo", "f2llmv2", "qwen35", "stablelm2", "olmo", "dbrx", "smaug-bpe", "poro-chat",
      "glm4", "chatglm-bpe", "viking", "jais", "tekken", "smollm", "codeshell", "bloom", "gpt3-finnish", "exaone",
      "exaone4", "exaone-moe", "chameleon", "minerva-7b", "megrez", "gpt-4o", "llama4", "kanana2", "talkie",
      "granite-embed-multi-97m", "tiny_aya", "cohere2moe", "superbpe", "trillion", "granite-docling",
      "bailingmoe", "bailingmoe2", "llada-moe", "seed-coder", "hunyuan", "hunyuan-dense", "hy_v4", "joyai-llm",
      "kimi-k2", "ufakzeka", "grok-2", "afmoe", "laguna", "minimax-m2", "solar-open", "mellum2"};
  const std::string tricky[] = {
      "",
      " ",
      "\n",
      "Hello World's 12345 ,.!  \n\n  x",
      std::string(3000, ' ') + "x" + std::string(5000, '9'),  // long runs (JIT stack, backtracking)
      "\xFF\xFE bad \xC3 utf8 \xE2\x82",                       // invalid UTF-8 passes through
      "\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x91\x8B a\xCC\x81",   // CJK, emoji, a combining mark
  };
  for (const char* name : names) {
    SCOPED_TRACE(name);
    const PreTokenizer pre = PreTokenizer::for_name(name);
    for (const std::string& text : tricky) {
      size_t covered = 0;
      for (const PieceSpan& s : pre.split(text)) {
        EXPECT_EQ(s.offset, covered);
        EXPECT_GT(s.length, 0u);
        covered += s.length;
      }
      EXPECT_EQ(covered, text.size());
    }
  }
  EXPECT_EQ(std::size(names), PreTokenizer::supported_names().size()) << "the table and this list differ";
}

TEST(PreTokenizer, UnknownNameNamesTheValueAndTheSupportedOnes) {
  EXPECT_EQ(PreTokenizer::traits_for("no-such-pre"), nullptr);
  try {
    PreTokenizer::for_name("no-such-pre");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'no-such-pre'"), std::string::npos) << what;
    EXPECT_NE(what.find("tokenizer.ggml.pre"), std::string::npos) << what;
    EXPECT_NE(what.find("kimi-k2"), std::string::npos) << what;
    EXPECT_NE(what.find("qwen35"), std::string::npos) << what;
  }
}

// Expected pieces worked out by hand from each pattern's meaning (derived, not from another implementation).
TEST(PreTokenizer, HandCheckedSplits) {
  using V = std::vector<std::string>;
  // Digits: 1..3 from the left (Llama 3), one at a time (Qwen 2), threes from the right (Tiny Aya, AFMoE,
  // SuperBPE's empty-match cuts), whole runs then ASCII threes from the left (Falcon).
  EXPECT_EQ(split("llama3", "1234567"), (V{"123", "456", "7"}));
  EXPECT_EQ(split("qwen2", "1234"), (V{"1", "2", "3", "4"}));
  EXPECT_EQ(split("tiny_aya", "1234567"), (V{"1", "234", "567"}));
  EXPECT_EQ(split("afmoe", "12345"), (V{"12", "345"}));
  EXPECT_EQ(split("superbpe", "1234567"), (V{"1", "234", "567"}));
  EXPECT_EQ(split("superbpe", "123456"), (V{"123", "456"}));
  EXPECT_EQ(split("falcon", "1234567"), (V{"123", "456", "7"}));
  // Tiny Aya's \b: digits glued to letters have no boundary after them, so the lookahead never holds and the
  // o200k pattern takes 1..3 digits from the left instead.
  EXPECT_EQ(split("tiny_aya", "1234 x"), (V{"1", "234", " x"}));
  EXPECT_EQ(split("tiny_aya", "1234x"), (V{"123", "4", "x"}));
  // CJK: DeepSeek V3 keeps a Han run whole; Kimi K2 cuts Han from the letters around it.
  EXPECT_EQ(split("deepseek-v3", "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C"),
            (V{"\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C"}));
  EXPECT_EQ(split("kimi-k2", "ab\xE4\xBD\xA0\xE5\xA5\xBD" "cd"), (V{"ab", "\xE4\xBD\xA0\xE5\xA5\xBD", "cd"}));
  // o200k: case changes cut words; Tekken likewise without contractions.
  EXPECT_EQ(split("gpt-4o", "HTMLParser it's"), (V{"HTMLParser", " it's"}));
  EXPECT_EQ(split("gpt-4o", "CamelCase"), (V{"Camel", "Case"}));
  EXPECT_EQ(split("tekken", "it's"), (V{"it", "'s"}));
  // Contractions are case-insensitive ('S, 'LL) as in the tokenizer.json originals.
  EXPECT_EQ(split("llama3", "WE'LL"), (V{"WE", "'LL"}));
  // Qwen 3.5 keeps combining marks in the word; Qwen 2 starts a new piece at the mark.
  EXPECT_EQ(split("qwen35", "a\xCC\x81" "b"), (V{"a\xCC\x81" "b"}));
  EXPECT_EQ(split("qwen2", "a\xCC\x81" "b"), (V{"a", "\xCC\x81" "b"}));
  // EXAONE MoE: words joined by single spaces stay one piece.
  EXPECT_EQ(split("exaone-moe", "hello big world"), (V{"hello big world"}));
  // Gemma 4: only newline runs cut (on text whose spaces are already U+2581).
  EXPECT_EQ(split("gemma4", "a\xE2\x96\x81" "b\n\nc"), (V{"a\xE2\x96\x81" "b", "\n\n", "c"}));
  // Jais 2 cuts space runs into power-of-two lengths (the last space joins the word); Llama 3 keeps the run.
  EXPECT_EQ(split("jais-2", "a       b"), (V{"a", "    ", "  ", " b"}));
  EXPECT_EQ(split("llama3", "a       b"), (V{"a", "      ", " b"}));
}

TEST(PreTokenizer, TraitsFollowLlamaCppLoaderFlags) {
  for (const char* n : {"llama3", "llama-bpe", "falcon3", "pixtral", "lfm2", "jina-v5-nano", "tekken"}) {
    EXPECT_TRUE(PreTokenizer::traits_for(n)->ignore_merges) << n;
    EXPECT_TRUE(PreTokenizer::traits_for(n)->adds_bos) << n;
  }
  for (const char* n : {"youtu", "minicpm5", "granite-embed-multi-97m"})
    EXPECT_TRUE(PreTokenizer::traits_for(n)->ignore_merges) << n;
  for (const char* n : {"dbrx", "smaug-bpe", "glm4", "gpt-4o", "qwen2", "gpt-2"}) {
    EXPECT_FALSE(PreTokenizer::traits_for(n)->ignore_merges) << n;
    EXPECT_FALSE(PreTokenizer::traits_for(n)->adds_bos) << n;
  }
  for (const char* n : {"gemma4", "granite-embed-multi-311m", "sarvam-moe"}) {
    EXPECT_FALSE(PreTokenizer::traits_for(n)->byte_level) << n;
    EXPECT_TRUE(PreTokenizer::traits_for(n)->escape_whitespace) << n;
  }
  EXPECT_FALSE(PreTokenizer::traits_for("whitespace")->byte_level);
  EXPECT_FALSE(PreTokenizer::traits_for("whitespace")->escape_whitespace);
}

// A hand-made SentencePiece-style BPE vocabulary (raw UTF-8, U+2581 for spaces, <0xNN> byte tokens).
Vocab raw_bpe_vocab(const std::string& pre) {
  Vocab v;
  v.kind = VocabKind::ByteLevelBpe;
  v.model_name = "gpt2";
  v.pre_name = pre;
  v.pieces = {"<unk>", "<bos>", "\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab", "\xE2\x96\x81" "ab", "\n", "\n\n",
              "<0xC3>", "<0xA9>"};
  v.types.assign(v.pieces.size(), TokenType::Normal);
  v.types[0] = TokenType::Unknown;
  v.types[1] = TokenType::Control;
  v.types[10] = v.types[11] = TokenType::Byte;
  v.scores.assign(v.pieces.size(), 0.0f);
  for (int32_t i = 0; i < v.size(); ++i) v.piece_to_id.emplace(v.pieces[i], i);
  v.merges = {"\xE2\x96\x81 a", "a b", "\xE2\x96\x81" "a b"};  // no "\n \n": only Gemma 4's rule makes "\n\n"
  v.unk = 0, v.bos = 1;
  v.byte_token.fill(kNoToken);
  v.byte_token[0xC3] = 10, v.byte_token[0xA9] = 11;
  return v;
}

TEST(PreTokenizer, RawUtf8BpeLikeGemma4) {
  const std::string text = "ab ab\n\n\xC3\xA9";  // "ab ab\n\né"
  // "ab▁ab": ▁+a (rank 0), a+b (1), ▁a+b (2) -> ab ▁ab; "\n\n" whole (Gemma 4) or two "\n" (Sarvam);
  // é is no token: its bytes' <0xC3> <0xA9>.
  const Tokenizer gemma = Tokenizer::from_vocab(raw_bpe_vocab("gemma4"));
  EXPECT_EQ(gemma.encode(text, false, false), (std::vector<int32_t>{6, 7, 9, 10, 11}));
  EXPECT_EQ(gemma.decode({6, 7, 9, 10, 11}, false), text);
  const Tokenizer sarvam = Tokenizer::from_vocab(raw_bpe_vocab("sarvam-moe"));
  EXPECT_EQ(sarvam.encode(text, false, false), (std::vector<int32_t>{6, 7, 8, 8, 10, 11}));
  EXPECT_EQ(sarvam.decode({6, 7, 8, 8, 10, 11}, false), text);
}

// tokenizer.ggml.model "gemma4" is BPE with the gemma4 pre-tokenizer; some names imply add_bos / add_sep / no BOS.
TEST(PreTokenizer, VocabularyDefaultsFromThePreTokenizer) {
  const auto write_vocab = [](const std::string& model, const std::string& pre, bool with_bos_id = true) {
    GgufWriter w;
    w.set_str("general.architecture", "llama");
    w.set_str("tokenizer.ggml.model", model);
    if (!pre.empty()) w.set_str("tokenizer.ggml.pre", pre);
    std::vector<std::string> tokens = {"a", "b", "ab"};
    while (tokens.size() < 16) tokens.push_back("x" + std::to_string(tokens.size()));  // holds llama.cpp's BOS 11
    w.set_str_array("tokenizer.ggml.tokens", tokens);
    w.set_str_array("tokenizer.ggml.merges", {"a b"});
    if (with_bos_id) w.set_u32("tokenizer.ggml.bos_token_id", 0);
    const std::string path = testing::TempDir() + "pretokenizer_vocab_" + model + "_" + pre + ".gguf";
    w.write(path);
    Vocab v = Vocab::from_gguf(GgufFile::open(path));
    std::filesystem::remove(path);
    return v;
  };
  EXPECT_TRUE(write_vocab("gpt2", "falcon3").add_bos);
  EXPECT_TRUE(write_vocab("gpt2", "chameleon").add_bos);
  EXPECT_FALSE(write_vocab("gpt2", "gpt-2").add_bos);
  EXPECT_FALSE(write_vocab("gpt2", "no-such-pre").add_bos);  // the encoder reports the name, not the vocabulary
  EXPECT_TRUE(write_vocab("gpt2", "roberta-bpe").add_sep);
  EXPECT_FALSE(write_vocab("gpt2", "gpt-2").add_sep);
  // GLM-4 has no BOS unless the file names one; others keep llama.cpp's gpt2 default, id 11.
  EXPECT_EQ(write_vocab("gpt2", "glm4", false).bos, kNoToken);
  EXPECT_EQ(write_vocab("gpt2", "gpt-2", false).bos, 11);
  EXPECT_EQ(write_vocab("gpt2", "glm4").bos, 0);
  const Vocab gemma = write_vocab("gemma4", "");
  EXPECT_EQ(gemma.pre_name, "gemma4");
  EXPECT_EQ(gemma.kind, VocabKind::ByteLevelBpe);
  EXPECT_EQ(Tokenizer::from_vocab(gemma).encode("ab", false, false), (std::vector<int32_t>{2}));
}

}  // namespace
}  // namespace polykv
