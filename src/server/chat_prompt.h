// Conversations -> prompt tokens: the model's chat template (tokenizer.chat_template, parsed once),
// rendered as transformers does, then tokenized. A model without a template gets a plain ChatML
// fallback (as llama-server does), announced on stderr by the server at start-up.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "server/request_json.h"
#include "tokenizer/tokenizer.h"

namespace polykv::server {

// <|im_start|>role\ncontent<|im_end|>\n per message, then <|im_start|>assistant\n for the reply.
extern const char* const kFallbackChatTemplate;

class ChatPrompt {
 public:
  // Throws polykv::Error when the template does not parse.
  ChatPrompt(const Tokenizer& tok, const std::string& template_source);

  // THE one place that renders a conversation and tokenizes the result: messages (normalized by
  // parse_messages), tools (null or an array), kwargs (extra template variables, an object).
  // Throws polykv::Error when the template raises (e.g. roles that do not alternate).
  // TODO(#7): tokenize with the facility that parses special tokens only in the template's own text,
  // never in message content; for now special tokens typed in content become control tokens.
  std::vector<int32_t> tokenize(const Json& messages, const Json& tools, const Json& kwargs,
                                bool add_generation_prompt) const;

 private:
  const Tokenizer& tok_;
  ChatTemplate template_;
  std::string bos_, eos_;
};

// The tokens of `full` after `prefix`; ApiError 400 naming the pool when prefix is not a prefix of it
// (the pool's rendering is not where the conversation's rendering starts).
std::vector<int32_t> tokens_after_pool(const std::string& pool, const std::vector<int32_t>& prefix,
                                       const std::vector<int32_t>& full);

}  // namespace polykv::server
