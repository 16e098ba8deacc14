// Rewriting a parsed template's literal text: used to mark the control tokens a template writes itself
// (chat/chat_prompt.h), so that only they, and never text from messages, become control tokens.
#pragma once
#include <functional>
#include <string>

#include "chat/jinja_ast.h"

namespace polykv::jinja {

using LiteralRewriter = std::function<std::string(const std::string&)>;

// Applies `rewrite` to the text between tags and to every string literal in an output position: a
// literal whose characters may reach the rendered output (printed, concatenated, assigned, passed to a
// macro, a filter's input, a default value, the separator of join, the replacement of replace).
// Literals in probe positions are left alone, so the template's logic sees the strings it was written
// with: comparison operands (==, in), test arguments, method arguments (content.split('</think>'),
// startswith(...)) and filter arguments other than the ones above, subscripts and dict keys, and
// conditions of if / if-expressions / loop filters.
void rewrite_output_literals(Body& body, const LiteralRewriter& rewrite);

}  // namespace polykv::jinja
