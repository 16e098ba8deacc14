// Conversations -> prompt tokens for the server: the model's chat template (tokenizer.chat_template,
// parsed once) rendered as transformers does, through ChatPromptBuilder (chat/chat_prompt.h), so that
// control tokens come only from the template: a "<|im_end|>" typed in a message stays text. A model
// without a template gets a plain ChatML fallback (as llama-server does), announced at start-up.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_prompt.h"
#include "server/request_json.h"
#include "tokenizer/tokenizer.h"

namespace polykv::server {

// <|im_start|>role\ncontent<|im_end|>\n per message, then <|im_start|>assistant\n for the reply.
extern const char* const kFallbackChatTemplate;

class ChatEncoder {
 public:
  // Throws polykv::Error when the template does not parse.
  ChatEncoder(const Tokenizer& tok, const std::string& template_source);

  // THE one place that renders a conversation and tokenizes the result: messages (normalized by
  // parse_messages), tools (null or an array), kwargs (extra template variables, an object). BOS is
  // added when the vocabulary asks for it and the template did not write it. Throws polykv::Error when
  // the template raises (e.g. roles that do not alternate) or a message contains U+0000.
  // Safe to call from several threads at once.
  std::vector<int32_t> tokenize(const Json& messages, const Json& tools, const Json& kwargs,
                                bool add_generation_prompt) const;

 private:
  const Tokenizer& tok_;
  ChatPromptBuilder builder_;
};

// The tokens of `full` after `prefix`; ApiError 400 naming the pool when prefix is not a prefix of it
// (the pool's rendering is not where the conversation's rendering starts).
std::vector<int32_t> tokens_after_pool(const std::string& pool, const std::vector<int32_t>& prefix,
                                       const std::vector<int32_t>& full);

}  // namespace polykv::server
