// libFuzzer target: parses and renders arbitrary template text against a fixed conversation.
// Any polykv::Error is an accepted outcome; crashes, sanitizer reports, hangs or other exceptions
// are bugs. Resource limits are lowered so hostile templates finish quickly.
//   clang++-14 -std=c++20 -O1 -g -fsanitize=fuzzer,address -Isrc fuzz/chat_template_fuzz_target.cpp \
//     src/chat/*.cpp -o chat_template_fuzz
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_chat_options.h"
#include "chat/chat_template.h"
#include "core/error.h"

namespace {

const nlohmann::ordered_json& fixed_messages() {
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hi 👋 <b>&</b>"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call1", "type": "function",
      "function": {"name": "f", "arguments": {"x": 1, "y": [1.5, null, true]}}}]},
    {"role": "tool", "tool_call_id": "call1", "content": "{\"ok\": true}"},
    {"role": "user", "content": [{"type": "text", "text": "part"}]}
  ])");
  return messages;
}

const nlohmann::ordered_json& fixed_tools() {
  static const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "f", "description": "d",
      "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}
  ])");
  return tools;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string source(reinterpret_cast<const char*>(data), size);
  const polykv::ChatTemplateOptions opts = polykv::fuzz::fuzz_chat_options();
  try {
    polykv::render_chat_template(source, fixed_messages(), fixed_tools(), opts);
  } catch (const polykv::Error&) {
  }
  return 0;
}
