#include "server/openai_response.h"

#include <cmath>

namespace polykv::server {

namespace {

double finite_logprob(float lp) { return std::isfinite(lp) ? double(lp) : -9999.0; }

Json bytes_of(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

Json object_head(const ResponseMeta& meta, const char* object) {
  Json j;
  j["id"] = meta.id;
  j["object"] = object;
  j["created"] = meta.created;
  j["model"] = meta.model;
  return j;
}

Json logprobs_or_null(Api api, const std::vector<LogprobEntry>* logprobs) {
  return logprobs ? logprobs_json(api, *logprobs) : Json(nullptr);
}

}  // namespace

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Length:
    case FinishReason::ContextFull:
      return "length";
    default:
      return "stop";
  }
}

Json usage_json(const FinishInfo& fi) {
  Json u;
  u["prompt_tokens"] = fi.prompt_tokens;
  u["completion_tokens"] = fi.completion_tokens;
  u["total_tokens"] = fi.prompt_tokens + fi.completion_tokens;
  u["prompt_tokens_details"] = {{"cached_tokens", fi.cached_tokens}};
  return u;
}

Json logprobs_json(Api api, const std::vector<LogprobEntry>& entries) {
  if (api == Api::Chat) {
    Json content = Json::array();
    for (const LogprobEntry& e : entries) {
      Json top = Json::array();
      for (const auto& [tok, lp] : e.top)
        top.push_back({{"token", tok}, {"logprob", finite_logprob(lp)}, {"bytes", bytes_of(tok)}});
      content.push_back({{"token", e.token},
                         {"logprob", finite_logprob(e.logprob)},
                         {"bytes", bytes_of(e.token)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(), offsets = Json::array();
  for (const LogprobEntry& e : entries) {
    tokens.push_back(e.token);
    token_logprobs.push_back(finite_logprob(e.logprob));
    Json top = Json::object();
    for (const auto& [tok, lp] : e.top)
      if (!top.contains(tok)) top[tok] = finite_logprob(lp);  // distinct ids may share a text
    top_logprobs.push_back(std::move(top));
    offsets.push_back(e.text_offset);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

Json final_response(const ResponseMeta& meta, const std::string& text, const char* finish_reason, const FinishInfo& fi,
                    const std::vector<LogprobEntry>* logprobs) {
  Json j = object_head(meta, meta.api == Api::Chat ? "chat.completion" : "text_completion");
  Json choice;
  choice["index"] = 0;
  if (meta.api == Api::Chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs_or_null(meta.api, logprobs);
  choice["finish_reason"] = finish_reason;
  j["choices"] = Json::array({std::move(choice)});
  j["usage"] = usage_json(fi);
  return j;
}

Json stream_chunk(const ResponseMeta& meta, const std::string& text, bool first, const char* finish_reason,
                  const std::vector<LogprobEntry>* logprobs) {
  Json j = object_head(meta, meta.api == Api::Chat ? "chat.completion.chunk" : "text_completion");
  Json choice;
  choice["index"] = 0;
  if (meta.api == Api::Chat) {
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && !finish_reason)) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs_or_null(meta.api, logprobs);
  choice["finish_reason"] = finish_reason ? Json(finish_reason) : Json(nullptr);
  j["choices"] = Json::array({std::move(choice)});
  return j;
}

Json usage_chunk(const ResponseMeta& meta, const FinishInfo& fi) {
  Json j = object_head(meta, meta.api == Api::Chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = Json::array();
  j["usage"] = usage_json(fi);
  return j;
}

}  // namespace polykv::server
