#include "server/chat_prompt.h"

#include <algorithm>

#include "chat/jinja_json.h"
#include "server/api_error.h"

namespace polykv::server {

const char* const kFallbackChatTemplate =
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

ChatPrompt::ChatPrompt(const Tokenizer& tok, const std::string& template_source)
    : tok_(tok), template_(template_source) {
  bos_ = tok.bos() >= 0 ? tok.piece(tok.bos()) : "";
  eos_ = tok.eos() >= 0 ? tok.piece(tok.eos()) : "";
}

std::vector<int32_t> ChatPrompt::tokenize(const Json& messages, const Json& tools, const Json& kwargs,
                                          bool add_generation_prompt) const {
  ChatTemplateOptions opts;
  opts.add_generation_prompt = add_generation_prompt;
  opts.bos_token = bos_;
  opts.eos_token = eos_;
  if (kwargs.is_object()) opts.extra = nlohmann::json(kwargs);
  const std::string text = template_.render(jinja::value_from_json(messages), jinja::value_from_json(tools), opts);
  // The template writes BOS itself when the model wants one; add it only when it did not.
  const bool add_bos = !(tok_.bos() >= 0 && !bos_.empty() && text.rfind(bos_, 0) == 0);
  return tok_.encode(text, add_bos, /*parse_special=*/true);
}

std::vector<int32_t> tokens_after_pool(const std::string& pool, const std::vector<int32_t>& prefix,
                                       const std::vector<int32_t>& full) {
  if (full.size() < prefix.size() || !std::equal(prefix.begin(), prefix.end(), full.begin())) {
    size_t at = 0;
    while (at < prefix.size() && at < full.size() && prefix[at] == full[at]) ++at;
    bad_request("the conversation does not continue pool '" + pool + "': its rendering differs from the pool's " +
                    "rendered messages at token " + std::to_string(at) + " of " + std::to_string(prefix.size()) +
                    " (send only the messages that follow the pool's)",
                "messages", "pool_prefix_mismatch");
  }
  return std::vector<int32_t>(full.begin() + ptrdiff_t(prefix.size()), full.end());
}

}  // namespace polykv::server
