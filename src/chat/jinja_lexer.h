// Tokenizer for Jinja templates with the whitespace rules transformers uses: trim_blocks (a newline
// right after a block or comment tag is dropped), lstrip_blocks (spaces/tabs before a block or
// comment tag at the start of a line are dropped), and the manual `-` / `+` modifiers.
// Mirrors jinja2.lexer: newlines are normalized to "\n" and one trailing newline is removed first.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace polykv::jinja {

enum class TokenType : uint8_t {
  Data,           // literal template text (already whitespace-adjusted)
  VariableBegin,  // {{
  VariableEnd,    // }}
  BlockBegin,     // {%
  BlockEnd,       // %}
  Name,
  String,         // text holds the unescaped value
  Integer,
  Float,
  Operator,       // text holds the operator: + - * / // % ** ~ ( ) [ ] { } . , : | = == != < <= > >=
  End,
};

struct Token {
  TokenType type;
  std::string text;
  int line;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws polykv::Error (with the line) for unterminated tags/strings and unknown characters.
std::vector<Token> tokenize(const std::string& source, const LexerOptions& options = {});

}  // namespace polykv::jinja
