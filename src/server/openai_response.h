// The OpenAI-compatible response bodies: chat.completion, chat.completion.chunk, text_completion
// (also its stream chunks), usage, and logprobs in the chat and the legacy completions formats.
// Pure functions of their arguments: unit-tested without sockets.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/service.h"
#include "server/request_json.h"

namespace polykv::server {

enum class Api { Chat, Completion };

// What every response object of one request repeats.
struct ResponseMeta {
  Api api = Api::Chat;
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};

// One generated token's logprob entry: its text (raw bytes, may be part of a UTF-8 character) and
// the most likely alternatives, descending.
struct LogprobEntry {
  std::string token;
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
  size_t text_offset = 0;  // completions format: byte offset of the token's text in the completion
};

// "stop" (an end-of-generation token or a stop string), "length" (max_tokens or the context limit),
// else "stop" (a cancelled request has no client left to read it).
const char* finish_reason_name(FinishReason reason);

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}
Json usage_json(const FinishInfo& fi);

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}.
// Completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}.
// Non-finite logprobs become -9999 (JSON has no -inf; OpenAI uses the same floor).
Json logprobs_json(Api api, const std::vector<LogprobEntry>& entries);

// The whole response of a non-streamed request.
Json final_response(const ResponseMeta& meta, const std::string& text, const char* finish_reason, const FinishInfo& fi,
                    const std::vector<LogprobEntry>* logprobs);

// One stream chunk. Chat: the first chunk carries {"role": "assistant"}; text goes in delta.content.
// finish_reason is null until the last chunk of the choice.
Json stream_chunk(const ResponseMeta& meta, const std::string& text, bool first, const char* finish_reason,
                  const std::vector<LogprobEntry>* logprobs);

// The extra last chunk of stream_options.include_usage: "choices": [] and the usage.
Json usage_chunk(const ResponseMeta& meta, const FinishInfo& fi);

}  // namespace polykv::server
