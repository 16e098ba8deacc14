#include "chat/chat_template.h"

#include "chat/jinja_globals.h"
#include "chat/jinja_json.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_parser.h"
#include "chat/template_literals.h"
#include "core/error.h"

namespace polykv {

struct ChatTemplate::Impl {
  jinja::Body body;
};

ChatTemplate::ChatTemplate(const std::string& source) : impl_(std::make_unique<Impl>()) {
  impl_->body = jinja::parse_template(jinja::tokenize(source));
  jinja::validate_template(impl_->body);
}

ChatTemplate::ChatTemplate(const std::string& source, const std::function<std::string(const std::string&)>& rewrite)
    : ChatTemplate(source) {
  jinja::rewrite_output_literals(impl_->body, rewrite);
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const jinja::Value& messages, const jinja::Value& tools,
                                 const ChatTemplateOptions& opts) const {
  using jinja::Value;
  auto globals = std::make_shared<jinja::Scope>();
  jinja::install_globals(*globals, opts.now);
  // Context variables as transformers passes them: render(messages=..., tools=..., documents=None,
  // add_generation_prompt=..., **special_tokens, **kwargs).
  auto context = std::make_shared<jinja::Scope>(globals);
  context->vars["messages"] = messages;
  context->vars["tools"] = tools;
  context->vars["documents"] = Value::none();
  context->vars["add_generation_prompt"] = Value::boolean(opts.add_generation_prompt);
  context->vars["bos_token"] = Value::string(opts.bos_token);
  context->vars["eos_token"] = Value::string(opts.eos_token);
  if (!opts.extra.is_null()) {
    check(opts.extra.is_object(), "chat template extra variables must be a JSON object");
    for (auto it = opts.extra.begin(); it != opts.extra.end(); ++it)
      context->vars[it.key()] = jinja::value_from_json(it.value());
  }
  jinja::Interpreter interpreter(opts.limits);
  return interpreter.render(impl_->body, context);
}

std::string ChatTemplate::render_variables(const nlohmann::ordered_json& variables,
                                           const ChatTemplateOptions& opts) const {
  check(variables.is_object(), "template variables must be a JSON object");
  auto globals = std::make_shared<jinja::Scope>();
  jinja::install_globals(*globals, opts.now);
  auto context = std::make_shared<jinja::Scope>(globals);
  for (auto it = variables.begin(); it != variables.end(); ++it)
    context->vars[it.key()] = jinja::value_from_json(it.value());
  jinja::Interpreter interpreter(opts.limits);
  return interpreter.render(impl_->body, context);
}

std::string render_chat_template(const std::string& template_source, const nlohmann::json& messages,
                                 const nlohmann::json& tools, const ChatTemplateOptions& opts) {
  return ChatTemplate(template_source).render(jinja::value_from_json(messages), jinja::value_from_json(tools), opts);
}

std::string render_chat_template(const std::string& template_source, const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools, const ChatTemplateOptions& opts) {
  return ChatTemplate(template_source).render(jinja::value_from_json(messages), jinja::value_from_json(tools), opts);
}

}  // namespace polykv
