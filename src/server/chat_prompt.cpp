#include "server/chat_prompt.h"

#include <algorithm>

#include "server/api_error.h"

namespace polykv::server {

const char* const kFallbackChatTemplate =
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

ChatEncoder::ChatEncoder(const Tokenizer& tok, const std::string& template_source)
    : tok_(tok), builder_(template_source, tok) {}

std::vector<int32_t> ChatEncoder::tokenize(const Json& messages, const Json& tools, const Json& kwargs,
                                           bool add_generation_prompt) const {
  ChatTemplateOptions opts = ChatPromptBuilder::defaults_for(tok_);
  opts.add_generation_prompt = add_generation_prompt;
  if (kwargs.is_object() && !kwargs.empty()) opts.extra = nlohmann::json(kwargs);
  std::vector<int32_t> ids = builder_.build(messages, tools, opts).ids;
  // The template writes BOS itself when the model wants one; add it only when it did not.
  if (tok_.vocab().add_bos && tok_.bos() >= 0 && (ids.empty() || ids.front() != tok_.bos()))
    ids.insert(ids.begin(), tok_.bos());
  return ids;
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
