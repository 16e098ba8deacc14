// Needle-in-a-haystack retrieval cases, one JSON object per line (the fixtures' needle_dev.jsonl):
//   "prompt" (text) and/or "prompt_ids" (token ids, BOS included), "expected" (the value to
//   retrieve), "variant" (a group name for per-variant accuracy), optional "depth", and optionally
//   the reference implementation's greedy result "ref_answer" / "ref_correct".
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace polykv {

struct NeedleCase {
  int line = 0;                    // 1-based line in the file
  std::string variant;             // "" when the case has none
  std::string expected;
  std::string prompt;              // used only when prompt_ids is empty
  std::vector<int32_t> prompt_ids;
  double depth = -1;               // -1 when absent
  std::optional<std::string> ref_answer;
  std::optional<bool> ref_correct;
};

// Parses one line; throws Error "line N: ..." for malformed JSON (or JSON nested deeper than
// kMaxJsonDepth), a missing/mistyped field, or a case with neither prompt_ids nor prompt.
NeedleCase parse_needle_case(std::string_view json_line, int line_no);

// Reads every line of the file (a blank line is an error, except the file's final newline).
// Throws Error "<path> line N: ..." on the first bad line, or if the file is missing or has no case.
std::vector<NeedleCase> read_needle_cases(const std::string& path);

}  // namespace polykv
