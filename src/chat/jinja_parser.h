// Recursive-descent parser from tokens to the syntax tree, following jinja2.parser's grammar and
// operator precedence (or < and < not < comparisons < + - < ~ < * / // % < ** < unary < filters/tests
// and postfix). Unsupported tags (include, extends, raw, ...) throw polykv::Error naming the tag.
#pragma once
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace polykv::jinja {

// Deepest nesting of expressions or blocks the parser accepts (guards the C++ stack).
inline constexpr int kMaxParseDepth = 200;

Body parse_template(const std::vector<Token>& tokens);

}  // namespace polykv::jinja
