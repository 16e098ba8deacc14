// libFuzzer target: arbitrary bytes as a `polykv template --messages` file. They go the CLI's way
// (parse_chat_input: depth-limited JSON, array or {messages, tools}), are converted to template
// values once and rendered with two real chat templates from the fixtures, parsed once:
// Qwen2.5-7B-Instruct (tools through tojson) and Llama-3.1-8B-Instruct (tool calls, system
// message handling, raise_exception on bad roles).
// Any polykv::Error is an accepted outcome; crashes, sanitizer reports, hangs or other exceptions
// are bugs. Invariant checked (abort on violation): a document that parsed survives
// dump() -> parse_json_limited unchanged.
// Templates: $POLYKV_FIXTURES/chat-templates (default ../shared/fixtures); scripts/fuzz.sh sets it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "chat/chat_input.h"
#include "chat/chat_template.h"
#include "chat/jinja_json.h"
#include "fuzz_chat_options.h"
#include "core/error.h"
#include "core/json_limits.h"

namespace {

const std::vector<polykv::ChatTemplate>& templates() {
  static const std::vector<polykv::ChatTemplate> loaded = [] {
    const char* fixtures = std::getenv("POLYKV_FIXTURES");
    const std::string dir = std::string(fixtures ? fixtures : "../shared/fixtures") + "/chat-templates/";
    std::vector<polykv::ChatTemplate> t;
    for (const char* name : {"Qwen-Qwen2.5-7B-Instruct.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja"}) {
      std::ifstream in(dir + name, std::ios::binary);
      if (!in) std::abort();  // fixtures missing: nothing to fuzz
      t.emplace_back(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
    }
    return t;
  }();
  return loaded;
}


}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  static const polykv::ChatTemplateOptions opts = polykv::fuzz::fuzz_chat_options();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  polykv::ChatInput input;
  try {
    input = polykv::parse_chat_input(text);
  } catch (const polykv::Error&) {
    return 0;
  }
  // dump() recurses: safe only because the parser held the document to kMaxJsonDepth.
  if (polykv::parse_json_limited(input.messages.dump(), polykv::kMaxJsonDepth, "round trip") != input.messages)
    std::abort();
  try {
    const polykv::jinja::Value messages = polykv::jinja::value_from_json(input.messages);
    const polykv::jinja::Value tools = polykv::jinja::value_from_json(input.tools);
    for (const polykv::ChatTemplate& t : templates()) {
      try {
        t.render(messages, tools, opts);
      } catch (const polykv::Error&) {
      }
    }
  } catch (const polykv::Error&) {
  }
  return 0;
}
