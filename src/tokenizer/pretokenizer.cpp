#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <map>
#include <mutex>

#include "core/error.h"
#include "tokenizer/pretokenizer_patterns.h"
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
      if (end <= begin) {  // empty match: a cut at `begin` (Hugging Face's Split), then one character on
        if (begin > gap_start) {
          out.push_back({span.offset + gap_start, begin - gap_start});
          gap_start = begin;
        }
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

std::vector<std::string> PreTokenizer::supported_names() {
  std::vector<std::string> names;
  for (const auto& [name, recipe] : pre_tokenizer_recipes())
    if (!name.empty()) names.push_back(name);
  return names;
}

const PreTokenizerTraits* PreTokenizer::traits_for(const std::string& name) {
  const auto& table = pre_tokenizer_recipes();
  const auto it = table.find(name);
  return it == table.end() ? nullptr : &it->second.traits;
}

PreTokenizer PreTokenizer::for_name(const std::string& name) {
  // Compiled patterns are shared between tokenizers that use the same text.
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const CompiledRegex>> compiled;

  const auto& table = pre_tokenizer_recipes();
  const auto it = table.find(name);
  if (it == table.end()) {
    std::string list;
    for (const std::string& n : supported_names()) list += (list.empty() ? "" : ", ") + n;
    fail("unknown pre-tokenizer '", name, "' (tokenizer.ggml.pre); supported: ", list);
  }
  PreTokenizer p;
  p.traits_ = it->second.traits;
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
