#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <map>
#include <mutex>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace polykv {

// A compiled pattern (UTF + Unicode properties, JIT when available). Immutable after construction,
// so one instance serves all threads; match data is per call.
class CompiledRegex {
 public:
  explicit CompiledRegex(const std::string& pattern) {
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_offset, nullptr);
    if (!code_) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fail("pre-tokenizer pattern does not compile at offset ", err_offset, ": ",
           reinterpret_cast<const char*>(msg), " (", pattern, ")");
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // failure leaves the interpreter, still correct
  }
  ~CompiledRegex() { pcre2_code_free(code_); }
  CompiledRegex(const CompiledRegex&) = delete;
  CompiledRegex& operator=(const CompiledRegex&) = delete;

  // Cuts text[span] into matches and the runs between them; appends the pieces to `out`.
  void split_span(std::string_view text, PieceSpan span, pcre2_match_data* md, std::vector<PieceSpan>& out) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + span.offset);
    const size_t n = span.length;
    size_t gap_start = 0;  // start of the text not yet emitted
    size_t search = 0;
    while (search < n) {
      int rc = pcre2_match(code_, subject, n, search, 0, md, nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // very long match: retry with the heap-based interpreter
        rc = pcre2_match(code_, subject, n, search, PCRE2_NO_JIT, md, nullptr);
      if (rc < 0) break;  // no match (or a resource limit): the rest is one run
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const size_t begin = ov[0], end = ov[1];
      if (end <= begin) {  // empty match: move one character on, the run continues
        const size_t len = utf8::valid_sequence_length(std::string_view(text.data() + span.offset, n), begin);
        search = begin + (len ? len : 1);
        continue;
      }
      if (begin > gap_start) out.push_back({span.offset + gap_start, begin - gap_start});
      out.push_back({span.offset + begin, end - begin});
      gap_start = search = end;
    }
    if (gap_start < n) out.push_back({span.offset + gap_start, n - gap_start});
  }

  pcre2_code* code() const { return code_; }

 private:
  pcre2_code* code_ = nullptr;
};

namespace {

// The patterns (public facts from the models' tokenizer.json files, in the case-explicit form llama.cpp
// uses instead of (?i:...)).
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kContractions = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))";
const std::string kLlama3 = std::string(kContractions) +
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen2 = std::string(kContractions) +
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kUpperThenLower = R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)";
constexpr const char* kUpperRun = R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)";
const std::string kGpt4o = std::string(kUpperThenLower) + kContractions + "?|" + kUpperRun + kContractions +
    R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kTekken = std::string(kUpperThenLower) + "|" + kUpperRun +
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// BLOOM: anything but whitespace and a few (also CJK / Indic / Arabic) punctuation marks.
constexpr const char* kBloom = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)";

struct Recipe {
  std::vector<std::string> patterns;
  bool ignore_merges = false;
};

const std::map<std::string, Recipe>& recipes() {
  static const std::map<std::string, Recipe> table = [] {
    std::map<std::string, Recipe> t;
    const Recipe gpt2{{kGpt2}};
    const Recipe llama3{{kLlama3}, true};
    const Recipe qwen2{{kQwen2}};
    const Recipe starcoder{{R"(\p{N})", kGpt2}};
    for (const char* n : {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "mpt",
                          "olmo", "jais", "exaone4", "roberta-bpe", "jina-v1-en", "jina-v2-code", "mellum",
                          "modern-bert", "a.x-4.0", "trillion", "granite-docling"})
      t[n] = gpt2;
    for (const char* n : {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"})
      t[n] = llama3;
    for (const char* n : {"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}) t[n] = Recipe{{kLlama3}};
    for (const char* n : {"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan"}) t[n] = qwen2;
    for (const char* n : {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})
      t[n] = starcoder;
    t["deepseek-coder"] = Recipe{{R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)",
                                  R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)", R"(\p{N})"}};
    t["falcon"] = Recipe{{R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}};
    t["default"] = Recipe{{R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}};
    for (const char* n : {"gpt-4o", "llama4"}) t[n] = Recipe{{kGpt4o}};
    t["tekken"] = Recipe{{kTekken}, true};
    for (const char* n : {"bloom", "poro-chat", "gpt3-finnish"}) t[n] = Recipe{{kBloom}};
    t["viking"] = Recipe{{kBloom, R"(\p{N})"}};
    return t;
  }();
  return table;
}

}  // namespace

std::vector<std::string> PreTokenizer::supported_names() {
  std::vector<std::string> names;
  for (const auto& [name, recipe] : recipes()) names.push_back(name);
  return names;
}

PreTokenizer PreTokenizer::for_name(const std::string& name) {
  // Compiled patterns are shared between tokenizers that use the same text.
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const CompiledRegex>> compiled;

  const auto& table = recipes();
  const auto it = table.find(name.empty() ? std::string("default") : name);
  if (it == table.end()) {
    std::string list;
    for (const auto& [n, r] : table) list += (list.empty() ? "" : ", ") + n;
    fail("unknown pre-tokenizer '", name, "' (tokenizer.ggml.pre); supported: ", list);
  }
  PreTokenizer p;
  p.ignore_merges_ = it->second.ignore_merges;
  std::lock_guard<std::mutex> lock(mutex);
  for (const std::string& pattern : it->second.patterns) {
    auto& slot = compiled[pattern];
    if (!slot) slot = std::make_shared<const CompiledRegex>(pattern);
    p.patterns_.push_back(slot);
  }
  return p;
}

std::vector<PieceSpan> PreTokenizer::split(std::string_view text) const {
  std::vector<PieceSpan> pieces;
  if (text.empty()) return pieces;
  pieces.push_back({0, text.size()});
  std::vector<PieceSpan> next;
  for (const auto& pattern : patterns_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(pattern->code(), nullptr);
    check(md != nullptr, "out of memory creating regex match data");
    next.clear();
    next.reserve(pieces.size() * 2);
    for (const PieceSpan& span : pieces) pattern->split_span(text, span, md, next);
    pcre2_match_data_free(md);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace polykv
