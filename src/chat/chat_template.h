// Renders a model's Jinja chat template for a conversation the way Hugging Face transformers does
// (jinja2 ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols; globals
// raise_exception and strftime_now; tojson = json.dumps(ensure_ascii=False)). Output is meant to
// be byte-identical to transformers' apply_chat_template(..., tokenize=False).
//
// Jinja subset (src/chat/jinja_*): {{ }}, {% %}, {# #}, -/+ whitespace control, trim_blocks and
// lstrip_blocks; if/elif/else, for (loop.*, else, `if` filter, unpacking, break/continue), set (also
// block set, tuple targets, namespace attributes), macro (defaults, varargs, kwargs), call blocks,
// filter blocks; the usual filters/tests/str-dict-list methods; default Undefined semantics;
// Markup escaping of |safe strings; Python repr()/json.dumps formatting.
// Not supported (polykv::Error naming the construct): include/import/extends/block/raw/with/do,
// recursive loops, *args/**kwargs call syntax, '%' and str.format() string formatting, tuple
// subscripts. Known differences: ints are int64 (overflow is an error); upper/lower/title map ASCII
// letters only; printing a generator or a self-referencing namespace is an error; dict.items()
// prints as a list; lists/dicts nest at most 512 deep.
#pragma once
#include <ctime>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/jinja_interpreter.h"

namespace polykv {

struct ChatTemplateOptions {
  bool add_generation_prompt = false;
  std::string bos_token, eos_token;
  nlohmann::json extra = nlohmann::json::object();  // further template variables (enable_thinking, ...)
  // Broken-down local time strftime_now() formats; nullopt = the current local time. Tests inject a
  // fixed date so outputs are reproducible.
  std::optional<std::tm> now;
  jinja::Limits limits;
};

// messages: JSON array of {role, content, tool_calls?, ...}; tools: JSON array or null.
// Throws polykv::Error for malformed or unsupported templates and when the template raises
// (raise_exception, undefined access, type errors ... wherever Python would raise).
// nlohmann::json stores object keys sorted, so key order (visible through tojson or dict loops) is
// alphabetical; pass nlohmann::ordered_json to keep the caller's order exactly as Python would.
std::string render_chat_template(const std::string& template_source, const nlohmann::json& messages,
                                 const nlohmann::json& tools, const ChatTemplateOptions& opts);
std::string render_chat_template(const std::string& template_source, const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools, const ChatTemplateOptions& opts);

// A parsed template, reusable for many renders (parsing once per model).
class ChatTemplate {
 public:
  explicit ChatTemplate(const std::string& source);  // throws polykv::Error on syntax errors
  // The same, then rewrite_output_literals(rewrite) on the parsed template (chat/template_literals.h).
  ChatTemplate(const std::string& source, const std::function<std::string(const std::string&)>& rewrite);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Renders with the variables transformers passes (messages, tools, documents=None,
  // add_generation_prompt, bos_token, eos_token, then opts.extra).
  std::string render(const jinja::Value& messages, const jinja::Value& tools, const ChatTemplateOptions& opts) const;
  // Renders with exactly `variables` (a JSON object) plus the globals; opts gives now and limits.
  std::string render_variables(const nlohmann::ordered_json& variables, const ChatTemplateOptions& opts) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace polykv
