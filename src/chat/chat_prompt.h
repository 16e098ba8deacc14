// Chat prompts as token ids, where only the chat template can produce control tokens.
//
// The problem: rendering a conversation to text and tokenizing the whole text with special-token
// parsing (what HF transformers, vLLM and llama.cpp do) turns a user's typed "<|im_end|>" or "</s><s>"
// into real control tokens: the user closes their turn and writes a fake system or assistant turn.
//
// The approach (trust by origin, without changing what the template's logic sees):
//   1. The template's own literal text is marked when the template is parsed: every control-token text
//      (tokens recognised only with parse_special: control and unknown-type tokens) in the text between
//      tags and in string literals that can reach the output becomes a marker "\0<id>\0"; so do
//      bos_token and eos_token. Literals the template only tests content with (content.split('</think>'),
//      '<tool_call>' in content, ...) stay as written (chat/template_literals.h).
//   2. Message contents, tools and extra variables are passed to the template unchanged, so templates
//      that strip, trim, split, slice or test the content render exactly as before. They must not
//      contain U+0000 (Error otherwise); no template operation makes a NUL from other characters
//      (tojson writes it as \u0000), so every NUL in the output belongs to a marker.
//   3. The output is cut at the markers: each marker becomes its token id, the text between markers is
//      tokenized without parsing control tokens (user-defined tokens such as Qwen's <think> are still
//      recognised, as Hugging Face does). A control-token text that reaches the output any other way —
//      typed in a message, assembled from several content parts, made by a replace() — is plain text.
// Why not sentinel characters around each content: a template that strips, trims, splits or tests the
// content (`content.strip()`, `content.startswith('<tool_response>')`, `if content`) would see them and
// render differently; tracking where each byte comes from through every string operation would need a
// second string type in the interpreter.
//
// For any conversation without NUL, `text` equals render_chat_template's output, except in templates
// that compare a marked literal or bos/eos with content, or print one through repr/tojson (none of the
// 46 templates in shared/fixtures does for the test conversations, chat_prompt_test.cpp). Without
// control-token text in the messages, `ids` equal tokenizing that text with parse_special, except for a
// control token a template assembles from pieces ('<|im_' ~ 'end|>') or prints from a probe position.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace polykv {

struct ChatPrompt {
  std::vector<int32_t> ids;  // what the model sees; no BOS added beyond what the template writes
  std::string text;          // the rendering, control tokens as their text (see above)
};

class ChatPromptBuilder {
 public:
  // Parses and marks the template once (for many conversations). Throws Error on a syntax error or a
  // NUL in the template. The tokenizer is copied (cheap: it shares its tables). build() is const and
  // safe to call from several threads at once.
  ChatPromptBuilder(const std::string& template_source, const Tokenizer& tok);

  // messages: JSON array of {role, content, ...}; tools: array or null; opts.extra: object or null.
  // These are untrusted: they never yield control tokens. opts.bos_token / eos_token are trusted
  // (defaults_for() fills them from the vocabulary). Throws Error when untrusted text contains U+0000
  // or the template raises.
  ChatPrompt build(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                   const ChatTemplateOptions& opts) const;

  // opts with bos_token / eos_token set to the vocabulary's pieces ("" when it has none).
  static ChatTemplateOptions defaults_for(const Tokenizer& tok, ChatTemplateOptions opts = {});

 private:
  std::string mark(const std::string& literal) const;  // control-token texts -> markers

  Tokenizer tok_;
  ChatTemplate template_;  // parsed with its output literals marked; built after tok_
};

}  // namespace polykv
