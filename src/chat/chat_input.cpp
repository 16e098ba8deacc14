#include "chat/chat_input.h"

#include "core/error.h"
#include "core/json_limits.h"

namespace polykv {

ChatInput parse_chat_input(std::string_view json_text) {
  nlohmann::ordered_json doc = parse_json_limited<nlohmann::ordered_json>(json_text, kMaxJsonDepth, "messages");
  ChatInput in;
  if (doc.is_object()) {
    const auto messages = doc.find("messages");
    check(messages != doc.end(), "the object has no \"messages\" array");
    in.messages = std::move(*messages);
    if (const auto tools = doc.find("tools"); tools != doc.end()) in.tools = std::move(*tools);
  } else {
    in.messages = std::move(doc);
  }
  check(in.messages.is_array(), "messages must be a JSON array of {role, content} objects, not ",
        json_excerpt(in.messages));
  return in;
}

}  // namespace polykv
