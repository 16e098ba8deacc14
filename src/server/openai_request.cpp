#include "server/openai_request.h"

#include <cctype>
#include <cmath>

#include "core/error.h"
#include "engine/spec/spec_kinds.h"
#include "server/api_error.h"

namespace polykv::server {

namespace {

constexpr int64_t kMaxTokensLimit = int64_t(1) << 30;

// Members both endpoints take: sampling, limits, streaming, stop, pool.
void parse_generation_params(const Fields& f, GenerationParams& p) {
  p.model = f.string("model", 1024).value_or("");
  p.stream = f.boolean("stream").value_or(false);
  if (const Json* so = f.object("stream_options"))
    p.include_usage = Fields(*so, "stream_options.").boolean("include_usage").value_or(false);

  SamplingParams& s = p.sampling;
  if (auto v = f.number("temperature", 0, 100)) s.temperature = float(*v);
  if (auto v = f.number("top_p", 0, 1)) s.top_p = float(*v);
  if (auto v = f.integer("top_k", -1, int64_t(1) << 31))
    s.top_k = int(std::min<int64_t>(std::max<int64_t>(*v, 0), INT32_MAX));
  if (auto v = f.number("min_p", 0, 1)) s.min_p = float(*v);
  if (auto v = f.number("repeat_penalty", 1e-3, 100)) s.repeat_penalty = float(*v);
  if (auto v = f.integer("repeat_last_n", -1, INT32_MAX)) s.repeat_last_n = int(*v);
  if (const Json* seed = f.get("seed")) {
    // Any JSON integer, negative ones included (two's complement), like the OpenAI API's int64 seed.
    if (seed->is_number_unsigned()) {
      s.seed = seed->get<uint64_t>();
    } else {
      s.seed = uint64_t(integer_element(*seed, SIZE_MAX, INT64_MIN, INT64_MAX, "seed"));
    }
    p.seed_given = true;
  }
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (auto v = f.number(key, -2, 2); v && *v != 0)
      bad_request(std::string("'") + key + "' is not supported (use repeat_penalty)", key, "unsupported");
  if (const Json* lb = f.object("logit_bias"); lb && !lb->empty())
    bad_request("'logit_bias' is not supported", "logit_bias", "unsupported");
  if (auto n = f.integer("n", 1, 128); n && *n != 1) bad_request("only n = 1 is supported", "n", "unsupported");
  if (const Json* rf = f.object("response_format")) {
    const auto type = Fields(*rf, "response_format.").string("type", 64);
    if (type && *type != "text")
      bad_request("response_format '" + *type + "' is not supported (only 'text')", "response_format", "unsupported");
  }

  // max_completion_tokens (the current name) over max_tokens over n_predict (llama-server's).
  if (auto v = f.integer("n_predict", -1, kMaxTokensLimit); v && *v != 0) p.max_tokens = int(*v);
  if (auto v = f.integer("max_tokens", 1, kMaxTokensLimit)) p.max_tokens = int(*v);
  if (auto v = f.integer("max_completion_tokens", 1, kMaxTokensLimit)) p.max_tokens = int(*v);

  if (const Json* stop = f.get("stop")) {
    if (stop->is_string()) {
      p.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (stop->size() > kMaxStopStrings)
        bad_request("'stop' has more than " + std::to_string(kMaxStopStrings) + " strings", "stop");
      for (size_t i = 0; i < stop->size(); ++i) {
        if (!(*stop)[i].is_string())
          bad_request("'stop[" + std::to_string(i) + "]' must be a string", "stop", "wrong_type");
        p.stop.push_back((*stop)[i].get<std::string>());
      }
    } else {
      bad_request("'stop' must be a string or an array of strings", "stop", "wrong_type");
    }
    for (const std::string& s : p.stop)
      if (s.empty() || s.size() > kMaxStopBytes)
        bad_request("stop strings must be 1 to " + std::to_string(kMaxStopBytes) + " bytes long", "stop");
  }

  if (auto pool = f.string("pool", 256)) {
    if (!valid_pool_name(*pool)) bad_request("'pool' is not a valid pool name", "pool");
    p.pool = *pool;
  }
  p.cache_salt = f.string("cache_salt", 1024).value_or("");
  p.ignore_eos = f.boolean("ignore_eos").value_or(false);
  if (auto v = f.string("spec", 64)) {
    if (v->empty() || !valid_spec_kind(*v)) bad_request(std::string("'spec' must be one of ") + kSpecKindsText, "spec");
    p.spec = *v;
  }
  if (auto v = f.integer("spec_n_max", 1, 16)) p.spec_n_max = int(*v);
  if (auto v = f.string("spec_policy", 64)) {
    if (*v != "adaptive" && *v != "fixed") bad_request("'spec_policy' must be \"adaptive\" or \"fixed\"", "spec_policy");
    p.spec_policy = *v;
  }
  validate_sampling(s);
}

}  // namespace

bool valid_pool_name(const std::string& name) {
  if (name.empty() || name.size() > size_t(kMaxPoolNameBytes)) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

void validate_sampling(const SamplingParams& s) {
  try {
    validate(s);
  } catch (const Error& e) {
    // Its messages start with the JSON field name: "top_p must be in [0, 1], got 1.5".
    const std::string msg = e.what();
    bad_request(msg, msg.substr(0, msg.find(' ')));
  }
}

Json parse_messages(const Json& messages, const std::string& param) {
  if (!messages.is_array()) bad_request("'" + param + "' must be an array of messages", param, "wrong_type");
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string at = param + "[" + std::to_string(i) + "]";
    const Json& m = messages[i];
    if (!m.is_object()) bad_request("'" + at + "' must be an object", at, "wrong_type");
    Fields f(m, at + ".");
    auto role = f.string("role", 64);
    if (!role) bad_request("'" + at + ".role' is missing", at + ".role");
    if (*role == "developer") role = "system";
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool")
      bad_request("'" + at + ".role' must be system, developer, user, assistant or tool", at + ".role");
    Json nm = m;  // other members (name, tool_calls, tool_call_id, ...) reach the template as they are
    nm["role"] = *role;
    const Json* content = f.get("content");
    if (!content) {
      nm["content"] = "";
    } else if (content->is_array()) {
      // Text parts joined with newlines (as vLLM does for templates that expect a string).
      std::string text;
      for (size_t k = 0; k < content->size(); ++k) {
        const std::string pk = at + ".content[" + std::to_string(k) + "]";
        const Json& part = (*content)[k];
        if (!part.is_object()) bad_request("'" + pk + "' must be an object", pk, "wrong_type");
        Fields pf(part, pk + ".");
        const auto type = pf.string("type", 64);
        if (!type || *type != "text")
          bad_request("'" + pk + ".type' must be 'text' (only text content is supported)", pk, "unsupported");
        const auto t = pf.string("text");
        if (!t) bad_request("'" + pk + ".text' is missing", pk);
        if (k) text += "\n";
        text += *t;
      }
      nm["content"] = text;
    } else if (!content->is_string()) {
      bad_request("'" + at + ".content' must be a string or an array of text parts", at + ".content", "wrong_type");
    }
    out.push_back(std::move(nm));
  }
  return out;
}

ChatRequest parse_chat_request(const Json& body) {
  ChatRequest r;
  Fields f(body);
  parse_generation_params(f, r);
  const Json* messages = f.array("messages");
  if (!messages) bad_request("'messages' is missing", "messages");
  if (messages->empty() && r.pool.empty()) bad_request("'messages' is empty", "messages");
  r.messages = parse_messages(*messages, "messages");
  if (const Json* tools = f.array("tools")) r.tools = *tools;
  if (auto choice = f.get("tool_choice")) {
    if (!choice->is_string() || (*choice != "none" && *choice != "auto"))
      bad_request("only tool_choice 'auto' and 'none' are supported", "tool_choice", "unsupported");
  }
  r.template_kwargs = Json::object();
  if (const Json* kw = f.object("chat_template_kwargs")) r.template_kwargs = *kw;
  const bool logprobs = f.boolean("logprobs").value_or(false);
  if (auto top = f.integer("top_logprobs", 0, kMaxTopLogprobs)) {
    if (!logprobs) bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    r.top_logprobs = int(*top);
  } else if (logprobs) {
    r.top_logprobs = 0;
  }
  return r;
}

namespace {

// prompt: a string, [string], [int...] or [[int...]] (one prompt: n > 1 prompts are refused).
void parse_prompt(const Json& prompt, CompletionRequest& r) {
  const Json* p = &prompt;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    r.prompt = p->get<std::string>();
    return;
  }
  if (!p->is_array()) bad_request("'prompt' must be a string or an array of token ids", "prompt", "wrong_type");
  if (!p->empty() && ((*p)[0].is_string() || (*p)[0].is_array()))
    bad_request("only one prompt per request is supported", "prompt", "unsupported");
  r.prompt_is_ids = true;
  for (size_t i = 0; i < p->size(); ++i) r.prompt_ids.push_back(integer_element(*p, i, 0, INT32_MAX, "prompt"));
}

}  // namespace

CompletionRequest parse_completion_request(const Json& body) {
  CompletionRequest r;
  Fields f(body);
  parse_generation_params(f, r);
  const Json* prompt = f.get("prompt");
  if (!prompt) bad_request("'prompt' is missing", "prompt");
  parse_prompt(*prompt, r);
  if (auto lp = f.integer("logprobs", 0, kMaxTopLogprobs)) r.top_logprobs = int(*lp);
  if (f.boolean("echo").value_or(false)) bad_request("'echo' is not supported", "echo", "unsupported");
  if (auto s = f.string("suffix"); s && !s->empty()) bad_request("'suffix' is not supported", "suffix", "unsupported");
  if (auto b = f.integer("best_of", 1, 128); b && *b != 1)
    bad_request("only best_of = 1 is supported", "best_of", "unsupported");
  return r;
}

PoolRequest parse_pool_request(const Json& body) {
  PoolRequest r;
  Fields f(body);
  auto name = f.string("name", 256);
  if (!name) bad_request("'name' is missing", "name");
  if (!valid_pool_name(*name)) bad_request("'name' must be 1 to 64 characters of A-Z a-z 0-9 . _ -", "name");
  r.name = *name;
  const Json* prompt = f.get("prompt");
  const Json* messages = f.get("messages");
  if (!prompt == !messages) bad_request("give exactly one of 'prompt' and 'messages'", prompt ? "messages" : "prompt");
  if (messages) {
    r.from_messages = true;
    r.messages = parse_messages(*messages, "messages");
    if (r.messages.empty()) bad_request("'messages' is empty", "messages");
  } else {
    parse_prompt(*prompt, r.prompt);
  }
  r.k_type = f.string("cache_type_k", 64).value_or("");
  r.v_type = f.string("cache_type_v", 64).value_or("");
  return r;
}

TokenizeRequest parse_tokenize_request(const Json& body) {
  TokenizeRequest r;
  Fields f(body);
  auto content = f.string("content");
  if (!content) bad_request("'content' is missing", "content");
  r.content = *content;
  r.add_special = f.boolean("add_special").value_or(false);
  r.parse_special = f.boolean("parse_special").value_or(true);
  r.with_pieces = f.boolean("with_pieces").value_or(false);
  return r;
}

std::vector<int64_t> parse_detokenize_request(const Json& body) {
  Fields f(body);
  const Json* tokens = f.array("tokens");
  if (!tokens) bad_request("'tokens' is missing", "tokens");
  std::vector<int64_t> ids;
  for (size_t i = 0; i < tokens->size(); ++i) ids.push_back(integer_element(*tokens, i, 0, INT32_MAX, "tokens"));
  return ids;
}

}  // namespace polykv::server
