#include "eval/needle_case.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_limits.h"

namespace polykv {
namespace {

using nlohmann::json;

const json* find(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string get_string(const json& j, const char* key, int line_no, bool required) {
  const json* v = find(j, key);
  if (!v) {
    check(!required, "line ", line_no, ": missing field \"", key, "\"");
    return {};
  }
  check(v->is_string(), "line ", line_no, ": field \"", key, "\" must be a string");
  return v->get<std::string>();
}

}  // namespace

NeedleCase parse_needle_case(std::string_view json_line, int line_no) {
  check(json_line.find_first_not_of(" \t\r") != std::string_view::npos, "line ", line_no,
        ": empty line (one JSON object per line expected)");
  json j;
  try {
    j = parse_json_limited<json>(json_line, kMaxJsonDepth, "needle case");
  } catch (const Error& e) {
    fail("line ", line_no, ": ", e.what());
  }
  check(j.is_object(), "line ", line_no, ": expected a JSON object");
  NeedleCase c;
  c.line = line_no;
  c.expected = get_string(j, "expected", line_no, true);
  c.variant = get_string(j, "variant", line_no, false);
  c.prompt = get_string(j, "prompt", line_no, false);
  if (const json* ids = find(j, "prompt_ids")) {
    check(ids->is_array() && !ids->empty(), "line ", line_no, ": \"prompt_ids\" must be a non-empty array");
    c.prompt_ids.reserve(ids->size());
    for (const json& id : *ids) {
      // The message is built only for a bad id, and describes it briefly (it may be a huge value).
      if (!(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() <= INT32_MAX))
        fail("line ", line_no, ": \"prompt_ids\" holds ", json_excerpt(id), ", not a token id");
      c.prompt_ids.push_back(int32_t(id.get<int64_t>()));
    }
  }
  check(!c.prompt_ids.empty() || !c.prompt.empty(), "line ", line_no, ": the case has neither \"prompt_ids\" nor \"prompt\"");
  if (const json* d = find(j, "depth")) {
    check(d->is_number(), "line ", line_no, ": field \"depth\" must be a number");
    c.depth = d->get<double>();
  }
  if (find(j, "ref_answer")) c.ref_answer = get_string(j, "ref_answer", line_no, true);
  if (const json* rc = find(j, "ref_correct")) {
    check(rc->is_boolean(), "line ", line_no, ": field \"ref_correct\" must be true or false");
    c.ref_correct = rc->get<bool>();
  }
  return c;
}

std::vector<NeedleCase> read_needle_cases(const std::string& path) {
  std::error_code ec;
  check(!std::filesystem::is_directory(path, ec), "'", path, "' is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot open '", path, "'");
  std::vector<NeedleCase> cases;
  std::string line;
  int line_no = 0;
  try {
    while (std::getline(in, line)) cases.push_back(parse_needle_case(line, ++line_no));
  } catch (const Error& e) {
    fail(path, " ", e.what());
  }
  check(!in.bad(), "read from '", path, "' failed");
  check(!cases.empty(), "'", path, "' holds no cases");
  return cases;
}

}  // namespace polykv
