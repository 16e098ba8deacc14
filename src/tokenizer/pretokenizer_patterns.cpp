#include "tokenizer/pretokenizer_patterns.h"

#include <initializer_list>
#include <string_view>

namespace polykv {

namespace {

std::string cat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (std::string_view p : parts) s += p;
  return s;
}

// The patterns are the split regexes of the models' tokenizer.json files (public facts), written for PCRE2
// (UTF + UCP): case-insensitive groups, possessive quantifiers and \p{Han} as the originals have them; class
// intersection (Kimi) as a negative lookahead; literal characters as \x{...}. Each is applied to the original
// text (never to the byte alphabet).

// English contractions, case-insensitive as in the originals (so 'S and the long s 'ſ count too).
constexpr std::string_view kContractions = R"((?i:'s|'t|'re|'ve|'m|'ll|'d))";

// GPT-2: contractions, letter runs, number runs, other runs (each with one optional leading space), spaces.
constexpr std::string_view kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The Llama 3 / Qwen 2 family after the contractions: a letter run may take one leading non-letter non-digit
// (not a newline); numbers in 1..3-digit pieces (Llama 3) or one digit each (Qwen 2); punctuation takes its
// trailing newlines; newline runs take the spaces before them; a space run leaves its last space to the next word.
constexpr std::string_view kLetterRun = R"([^\r\n\p{L}\p{N}]?\p{L}+)";
constexpr std::string_view kPunctNewlines = R"( ?[^\s\p{L}\p{N}]+[\r\n]*)";
constexpr std::string_view kSpaceTail = R"(\s*[\r\n]+|\s+(?!\S)|\s+)";

const std::string kLlama3 =
    cat({kContractions, "|", kLetterRun, R"(|\p{N}{1,3}|)", kPunctNewlines, "|", kSpaceTail});
const std::string kQwen2Tail = cat({kLetterRun, R"(|\p{N}|)", kPunctNewlines, "|", kSpaceTail});
const std::string kQwen2 = cat({kContractions, "|", kQwen2Tail});
// Jais 2: Llama 3 with whitespace runs cut into power-of-two lengths.
const std::string kJais2 = cat({kContractions, "|", kLetterRun, R"(|\p{N}{1,3}|)", kPunctNewlines,
                                R"(|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S))",
                                R"(|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s)"});
// Qwen 3.5: combining marks belong to the letter run.
const std::string kQwen35 = cat({kContractions, R"(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N})",
                                 R"(| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|)", kSpaceTail});
// Seed-Coder: punctuation runs stop before newlines.
const std::string kSeedCoder =
    cat({kContractions, "|", kLetterRun, R"(|\p{N}| ?[^\s\p{L}\p{N}\r\n]+|)", kSpaceTail});
// Ling / BailingMoE: possessive optional prefix and punctuation run; a newline piece holds one newline.
constexpr std::string_view kBailing =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
// MiniCPM 5: numbers first cut into 1..3 digits, then whole-number runs.
const std::string kMiniCpm5 = cat({kContractions, "|", kLetterRun, R"(|\p{N}+|)", kPunctNewlines, "|", kSpaceTail});
// EXAONE MoE: a piece may hold several words joined by single spaces.
const std::string kExaoneMoe =
    cat({kContractions, R"(|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N})",
         R"(| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)"});

// o200k (GPT-4o) family: a word is [upper-ish]*[lower-ish]+ or [upper-ish]+[lower-ish]* (so "CamelCase" and
// "HTMLParser" split at case changes), optionally with a contraction; `numbers` is the digit alternative.
std::string o200k(std::string_view numbers, bool contractions, std::string_view letter_guard = "") {
  const std::string upper = cat({letter_guard, R"([\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])"});
  const std::string lower = cat({letter_guard, R"([\p{Ll}\p{Lm}\p{Lo}\p{M}])"});
  const std::string c = contractions ? cat({kContractions, "?"}) : "";
  return cat({R"([^\r\n\p{L}\p{N}]?(?:)", upper, ")*(?:", lower, ")+", c,  //
              R"(|[^\r\n\p{L}\p{N}]?(?:)", upper, ")+(?:", lower, ")*", c,  //
              "|", numbers, R"(| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"});
}
const std::string kGpt4o = o200k(R"(\p{N}{1,3})", true);
const std::string kTekken = o200k(R"(\p{N})", false);
const std::string kYoutu = o200k(R"(\p{N})", true);
// Kimi K2: Han runs first; the o200k word classes without Han (tiktoken's class intersection). Han is the Script
// property (sc:), as in Oniguruma and tiktoken: PCRE2's bare \p{Han} also takes the CJK punctuation whose Script
// Extensions list Han (U+3001, U+3002, ...).
const std::string kKimiK2 = cat({R"(\p{sc:Han}+|)", o200k(R"(\p{N}{1,3})", true, R"((?!\p{sc:Han}))")});
// Tiny Aya: digit runs cut into threes counted from the right (\b: the run must end at a word boundary).
constexpr std::string_view kDigitsFromRight = R"(\d{1,3}(?=(?:\d{3})*\b))";

// Youtu: Hangul and jamo; CJK punctuation; bopomofo; Han and kana (each a run of its own).
constexpr std::string_view kYoutuScripts =
    R"([\x{AC00}-\x{D7A3}\x{3131}-\x{318E}]+)"
    R"(|[\x{FF01}\x{2026}\x{201C}\x{201D}\x{2018}\x{2019}\x{2014}\x{FF1A}\x{FF1B}\x{FF0C})"
    R"(\x{3001}-\x{303F}\x{FE30}-\x{FE4F}]+)"
    R"(|[\x{3105}-\x{312F}]+|[\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)";

// DeepSeek V3 family: 1..3-digit numbers, then Han / kana runs, then words (an ASCII punctuation mark may lead an
// ASCII word; letters keep their combining marks), punctuation-or-symbol runs, spaces.
constexpr std::string_view kHanKana = R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)";
constexpr std::string_view kAsciiPunct = R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])re";
const std::string kDeepseekV3 = cat({kAsciiPunct, R"([A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)",
                                     R"(| ?[\p{P}\p{S}]+[\r\n]*|)", kSpaceTail});
const std::string kSpark25 = cat({kAsciiPunct, R"([A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)",
                                  R"(| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)"});
// AFMoE: digit runs in threes from the right (a leading group of 1-2 when the length is not a multiple of 3).
constexpr std::string_view kAfmoeDigits = R"(\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})))";
// AFMoE: CJK ideographs (and extension A, compatibility), kana, halfwidth kana, Kangxi radicals, Thai (from U+0E40,
// as llama.cpp lists it), Lao, Khmer, Myanmar (and extensions), Hangul syllables and jamo.
constexpr std::string_view kAfmoeScripts =
    R"([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{F900}-\x{FAFF}\x{3040}-\x{309F}\x{30A0}-\x{30FF}\x{FF65}-\x{FF9F})"
    R"(\x{2F00}-\x{2FDF}\x{0E40}-\x{0E7F}\x{0E80}-\x{0EFF}\x{1780}-\x{17FF}\x{1000}-\x{109F}\x{AA60}-\x{AA7F})"
    R"(\x{A9E0}-\x{A9FF}\x{AC00}-\x{D7AF}\x{1100}-\x{11FF}]+)";

// DeepSeek LLM / Coder: Han (and everything from U+0800 up to it) and Hangul runs.
constexpr std::string_view kCjkRuns = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
// DeepSeek LLM: the cased letters its tokenizer.json lists range by range (not \p{L}: no Han, no Lo).
constexpr std::string_view kDeepseekLlmLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
    R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5})"
    R"(\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD})"
    R"(\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15})"
    R"(\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D})"
    R"(\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB})"
    R"(\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D})"
    R"(\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E})"
    R"(\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D})"
    R"(\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06})"
    R"(\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB})"
    R"(\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
constexpr std::string_view kDeepseekLlmPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";

// BLOOM: anything but whitespace and a few (also CJK / Indic / Arabic) punctuation marks ('(' '|' ')' are
// members of the class too, as in the original).
constexpr std::string_view kBloom = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)";

// Falcon / default: punctuation-and-symbol runs first (Falcon's HF Punctuation also takes the backtick).
constexpr std::string_view kFalconPunct = R"([\p{P}\$\+<=>\^~\|`]+)";
constexpr std::string_view kDefaultPunct = R"([\p{P}\$\+<=>\^~\|]+)";

// Chameleon: sentinel and image tokens, tabs / newlines / 4 or 2 spaces, single digits, single punctuation.
constexpr std::string_view kChameleonSentinel = "<sentinel:[0-9]+>";
constexpr std::string_view kChameleonImage = "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z";
constexpr std::string_view kChameleonSpaces = "([\\t\\n]|    |  )";
constexpr std::string_view kChameleonPunct = R"re([\p{P}!-/:-@\[-`{-~])re";

}  // namespace

const std::map<std::string, PreTokenizerRecipe>& pre_tokenizer_recipes() {
  static const std::map<std::string, PreTokenizerRecipe> table = [] {
    std::map<std::string, PreTokenizerRecipe> t;
    const auto add = [&t](const std::string& type, std::initializer_list<const char*> names,
                          std::vector<std::string> patterns, PreTokenizerTraits traits = {}) {
      for (const char* n : names) t[n] = PreTokenizerRecipe{type, patterns, traits};
    };
    const std::string gpt2(kGpt2), bloom(kBloom);
    const PreTokenizerTraits whole_tokens{.ignore_merges = true};
    const PreTokenizerTraits llama3_traits{.ignore_merges = true, .adds_bos = true};

    add("gpt-2",
        {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
         "modern-bert", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4"},
        {gpt2});
    add("gpt-2", {"jina-v1-en", "jina-v2-code", "roberta-bpe"}, {gpt2}, {.adds_sep = true});
    add("llama3", {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                   "jina-v5-nano"},
        {kLlama3}, llama3_traits);
    add("llama3", {"dbrx", "smaug-bpe"}, {kLlama3});  // the regex without the traits
    add("llama3", {"chatglm-bpe", "glm4"}, {kLlama3}, {.no_default_bos = true});
    add("jais-2", {"jais-2"}, {kJais2});
    add("qwen2", {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "hunyuan", "solar-open", "megrez",
                  "grok-2"},
        {kQwen2});
    add("qwen35", {"qwen35"}, {kQwen35});
    add("ufakzeka", {"ufakzeka"}, {kQwen2Tail});
    add("laguna", {"laguna"}, {R"([^\n]+|[\n]+)", kQwen2});
    add("seed-coder", {"seed-coder"}, {kSeedCoder});
    add("bailingmoe", {"bailingmoe", "bailingmoe2", "llada-moe"}, {std::string(kBailing)});
    add("minicpm5", {"minicpm5"}, {R"(\p{N}{1,3})", kMiniCpm5}, whole_tokens);
    add("exaone-moe", {"exaone-moe"}, {kExaoneMoe});
    add("gpt-4o", {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {kGpt4o});
    add("gpt-4o", {"granite-embed-multi-97m"}, {kGpt4o}, whole_tokens);
    add("tiny_aya", {"tiny_aya", "cohere2moe"}, {std::string(kDigitsFromRight), kGpt4o});
    add("tekken", {"tekken"}, {kTekken}, {.ignore_merges = true, .adds_bos = true});
    add("youtu", {"youtu"}, {std::string(kYoutuScripts), kYoutu}, whole_tokens);
    add("deepseek-v3", {"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
        {R"(\p{N}{1,3})", std::string(kHanKana), kDeepseekV3});
    add("spark2_5", {"spark2_5"}, {R"(\p{N}{1,3})", std::string(kHanKana), kSpark25, R"(\p{N})"});
    add("afmoe", {"afmoe"}, {std::string(kAfmoeDigits), std::string(kAfmoeScripts), kDeepseekV3});
    add("kimi-k2", {"kimi-k2"}, {kKimiK2});
    // SuperBPE: whole numbers, then a cut (an empty match) before every group of three digits from the right.
    add("superbpe", {"superbpe"}, {R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"});
    add("chameleon", {"chameleon"},
        {std::string(kChameleonSentinel), std::string(kChameleonImage), std::string(kChameleonSpaces), R"(\p{N})",
         std::string(kChameleonPunct), gpt2},
        {.adds_bos = true});
    add("deepseek-llm", {"deepseek-llm"},
        {R"([\r\n])", std::string(kDeepseekLlmLetters), std::string(kDeepseekLlmPunct), R"(\s+$)",
         std::string(kCjkRuns), R"(\p{N}+)"});
    add("deepseek-coder", {"deepseek-coder"},
        {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", std::string(kCjkRuns), R"(\p{N})"});
    add("falcon", {"falcon"}, {std::string(kFalconPunct), gpt2, "[0-9][0-9][0-9]"});
    add("starcoder",
        {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"},
        {R"(\p{N})", gpt2});
    add("bloom", {"bloom", "poro-chat", "gpt3-finnish"}, {bloom});
    add("viking", {"viking"}, {bloom, R"(\p{N})"});
    // SentencePiece-style BPE on raw UTF-8: spaces become U+2581, only newline runs are cut.
    const PreTokenizerTraits spm_bpe{.byte_level = false, .escape_whitespace = true};
    PreTokenizerTraits gemma4 = spm_bpe;
    gemma4.whole_newline_runs = true;
    gemma4.adds_bos = true;
    add("gemma4", {"gemma4", "granite-embed-multi-311m"}, {R"([^\n]+|[\n]+)"}, gemma4);
    add("gemma4", {"sarvam-moe"}, {R"([^\n]+|[\n]+)"}, spm_bpe);
    add("whitespace", {"whitespace"}, {R"(\S+)"}, {.byte_level = false});
    // Without tokenizer.ggml.pre (llama.cpp warns that quality will suffer).
    add("default", {"default", ""}, {std::string(kDefaultPunct), gpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"});
    return t;
  }();
  return table;
}

}  // namespace polykv
