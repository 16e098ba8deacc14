// Server-sent events as OpenAI streams them: every event is one `data: <JSON>` line and a blank line;
// the stream ends with `data: [DONE]`.
#pragma once
#include <string>

#include "server/request_json.h"

namespace polykv::server {

inline std::string sse_event(const Json& j) { return "data: " + dump_json(j) + "\n\n"; }
inline std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace polykv::server
