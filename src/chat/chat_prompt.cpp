#include "chat/chat_prompt.h"

#include "chat/jinja_json.h"
#include "core/error.h"

namespace polykv {
namespace {

constexpr char kMarker = '\0';  // a marker is kMarker, the token id in decimal, kMarker

// Throws unless no string or object key in j contains U+0000. `what` names j in the message.
template <typename Json>
void check_no_nul(const Json& j, const char* what) {
  if (j.is_string()) {
    check(j.template get_ref<const std::string&>().find(kMarker) == std::string::npos, what,
          " contain U+0000 (NUL), which chat prompts reserve");
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      check(it.key().find(kMarker) == std::string::npos, what, " contain U+0000 (NUL), which chat prompts reserve");
      check_no_nul(it.value(), what);
    }
  } else if (j.is_array()) {
    for (const auto& item : j) check_no_nul(item, what);
  }
}

}  // namespace

ChatPromptBuilder::ChatPromptBuilder(const std::string& template_source, const Tokenizer& tok)
    : tok_(tok), template_(template_source, [this](const std::string& s) { return mark(s); }) {
  check(template_source.find(kMarker) == std::string::npos, "the chat template contains a NUL byte");
}

std::string ChatPromptBuilder::mark(const std::string& literal) const {
  // A NUL here can only come from an escape in a string literal ('\x00'); it would read as a marker.
  check(literal.find(kMarker) == std::string::npos, "the chat template has a string literal with a NUL");
  std::string out;
  out.reserve(literal.size());
  for (const TextFragment& f : tok_.split_special(literal, true)) {
    if (f.token != kNoToken && tok_.needs_parse_special(f.token)) {
      out += kMarker;
      out += std::to_string(f.token);
      out += kMarker;
    } else {
      out += f.text;  // plain text, or a user-defined token: recognised again when tokenized
    }
  }
  return out;
}

ChatTemplateOptions ChatPromptBuilder::defaults_for(const Tokenizer& tok, ChatTemplateOptions opts) {
  opts.bos_token = tok.bos() >= 0 ? tok.piece(tok.bos()) : "";
  opts.eos_token = tok.eos() >= 0 ? tok.piece(tok.eos()) : "";
  return opts;
}

ChatPrompt ChatPromptBuilder::build(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                    const ChatTemplateOptions& opts) const {
  check_no_nul(messages, "chat messages");
  check_no_nul(tools, "tool definitions");
  check_no_nul(opts.extra, "chat template variables");
  ChatTemplateOptions marked = opts;
  marked.bos_token = mark(opts.bos_token);
  marked.eos_token = mark(opts.eos_token);
  const std::string rendered =
      template_.render(jinja::value_from_json(messages), jinja::value_from_json(tools), marked);

  // Cut at the markers. Text fragments view `rendered`; token fragments view the vocabulary.
  std::vector<TextFragment> fragments;
  ChatPrompt prompt;
  prompt.text.reserve(rendered.size());
  size_t pos = 0;
  while (pos < rendered.size()) {
    const size_t open = rendered.find(kMarker, pos);
    if (open == std::string::npos) break;
    const size_t close = rendered.find(kMarker, open + 1);
    check(close != std::string::npos, "the chat template cut a control-token marker apart");
    const std::string digits = rendered.substr(open + 1, close - open - 1);
    check(!digits.empty() && digits.size() <= 9 && digits.find_first_not_of("0123456789") == std::string::npos,
          "the chat template altered a control-token marker");
    const int32_t id = std::stoi(digits);
    check(tok_.needs_parse_special(id), "the chat template altered a control-token marker");
    if (open > pos) fragments.push_back({std::string_view(rendered).substr(pos, open - pos), kNoToken});
    fragments.push_back({std::string_view(tok_.piece(id)), id});
    pos = close + 1;
  }
  if (pos < rendered.size()) fragments.push_back({std::string_view(rendered).substr(pos), kNoToken});
  for (const TextFragment& f : fragments) prompt.text += f.text;
  prompt.ids = tok_.encode_fragments(fragments, false);
  return prompt;
}

}  // namespace polykv
