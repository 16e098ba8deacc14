// The OpenAI-compatible request schemas (and polykv's pool, tokenize and detokenize bodies), parsed
// from JSON into validated structs. Pure functions: no model, no sockets; anything a client could get
// wrong throws ApiError 400 naming the parameter. Unknown members are ignored (as vLLM and
// llama-server do); known features polykv does not implement (n > 1, logit_bias, penalties other than
// repeat_penalty, structured output, echo, suffix) are refused rather than silently ignored.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "server/request_json.h"

namespace polykv::server {

inline constexpr int kMaxTopLogprobs = 20;
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopBytes = 1024;
inline constexpr int kMaxPoolNameBytes = 64;

// What /v1/completions and /v1/chat/completions share.
struct GenerationParams {
  std::string model;  // echoed back; any value is accepted (one model is served)
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage: a last chunk with usage
  SamplingParams sampling;        // client values over SamplingParams' defaults (llama-server's)
  bool seed_given = false;        // false: the server draws a random seed
  int max_tokens = -1;            // max_completion_tokens / max_tokens / n_predict; -1: to the context limit
  std::vector<std::string> stop;  // non-empty strings; the text ends before the first one found
  int top_logprobs = -1;          // -1: no logprobs; 0..20: the sampled token's and that many more
  std::string pool;               // named pool the request continues; empty: none
  std::string cache_salt;
  bool ignore_eos = false;           // llama-server's: end-of-generation tokens do not end it (benchmarks)
  // polykv extensions (docs/SPECULATIVE.md): "spec": "none" | "ngram" | "draft" | "mtp" | "ngram+draft" |
  // "ngram+mtp" (absent: the server's default), "spec_n_max": 1..16 (absent: the server's default), "spec_policy":
  // "adaptive" | "fixed" (absent: the server's default).
  std::string spec;
  int spec_n_max = 0;
  std::string spec_policy;
};

struct ChatRequest : GenerationParams {
  Json messages;         // array of {role, content: string, ...}: content parts joined
  Json tools;            // null or an array, passed to the chat template
  Json template_kwargs;  // object: chat_template_kwargs, extra template variables
};

struct CompletionRequest : GenerationParams {
  bool prompt_is_ids = false;
  std::string prompt;               // when !prompt_is_ids
  std::vector<int64_t> prompt_ids;  // when prompt_is_ids (range-checked against the vocabulary later)
};

ChatRequest parse_chat_request(const Json& body);
CompletionRequest parse_completion_request(const Json& body);

// The messages of a conversation, validated and normalized: roles system/developer(-> system)/user/
// assistant/tool; content a string, null (-> ""), or an array of text parts (joined with "\n").
// param names the member in messages ("messages").
Json parse_messages(const Json& messages, const std::string& param);

// POST /v1/pools {"name", "prompt" (string or token ids) | "messages", "cache_type_k"?, "cache_type_v"?}
struct PoolRequest {
  std::string name;  // [A-Za-z0-9._-]{1,64}
  bool from_messages = false;
  Json messages;               // when from_messages
  CompletionRequest prompt;    // its prompt / prompt_ids when !from_messages
  std::string k_type, v_type;  // empty: the server's defaults
};
PoolRequest parse_pool_request(const Json& body);
bool valid_pool_name(const std::string& name);

// POST /tokenize (llama-server): {"content", "add_special"? (false), "parse_special"? (true), "with_pieces"? (false)}
struct TokenizeRequest {
  std::string content;
  bool add_special = false, parse_special = true, with_pieces = false;
};
TokenizeRequest parse_tokenize_request(const Json& body);

// POST /detokenize (llama-server): {"tokens": [ids]}
std::vector<int64_t> parse_detokenize_request(const Json& body);

// validate(SamplingParams) (engine/sampler.h) as a 400 naming the parameter.
void validate_sampling(const SamplingParams& s);

}  // namespace polykv::server
