// Render options the chat-template fuzz targets share: a fixed date, and limits that keep one input
// well under a millisecond of rendering (output, loop iterations, range() length).
#pragma once
#include <ctime>

#include "chat/chat_template.h"

namespace polykv::fuzz {

inline ChatTemplateOptions fuzz_chat_options() {
  ChatTemplateOptions opts;
  opts.add_generation_prompt = true;
  opts.bos_token = "<s>";
  opts.eos_token = "</s>";
  opts.now = std::tm{};
  opts.limits.max_output_bytes = 1 << 20;
  opts.limits.max_loop_iterations = 100000;
  opts.limits.max_range = 10000;
  return opts;
}

}  // namespace polykv::fuzz
