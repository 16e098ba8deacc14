// A conversation given as JSON text, as `polykv template --messages FILE` reads it (and as a chat
// request body carries it): a JSON array of messages, or an object {"messages": [...],
// "tools": [...]} whose other members are ignored.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

namespace polykv {

struct ChatInput {
  nlohmann::ordered_json messages;  // a JSON array (its elements are not checked here: templates do)
  nlohmann::ordered_json tools;     // null when absent
};

// Parses with parse_json_limited (kMaxJsonDepth, key order kept). Throws polykv::Error for invalid
// or too deeply nested JSON ("messages JSON nested deeper than 512 levels"), an object without a
// "messages" member, or messages that are not an array.
ChatInput parse_chat_input(std::string_view json_text);

}  // namespace polykv
