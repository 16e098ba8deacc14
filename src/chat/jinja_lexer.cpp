#include "chat/jinja_lexer.h"

#include <cstring>

#include "core/error.h"

namespace polykv::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// jinja2.lexer: lines = newline_re.split(source)[::2]; drop one trailing ""; join with "\n".
std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(const std::string& source, const LexerOptions& options) : src_(normalize_newlines(source)), opt_(options) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) lex_text_and_tag();
    tokens_.push_back({TokenType::End, "", line_});
    return std::move(tokens_);
  }

 private:
  enum class TagKind { Variable, Block, Comment };

  void advance_to(size_t new_pos) {
    for (size_t k = pos_; k < new_pos && k < src_.size(); ++k)
      if (src_[k] == '\n') ++line_;
    pos_ = new_pos;
  }

  void emit_data(std::string text, int line) {
    if (!text.empty()) tokens_.push_back({TokenType::Data, std::move(text), line});
  }

  // Handles the text up to the next tag start, then the tag itself.
  void lex_text_and_tag() {
    size_t tag = std::string::npos;
    TagKind kind = TagKind::Variable;
    for (size_t k = src_.find('{', pos_); k != std::string::npos; k = src_.find('{', k + 1)) {
      if (k + 1 >= src_.size()) break;
      const char c = src_[k + 1];
      if (c == '{') { kind = TagKind::Variable; tag = k; break; }
      if (c == '%') { kind = TagKind::Block; tag = k; break; }
      if (c == '#') { kind = TagKind::Comment; tag = k; break; }
    }
    const int text_line = line_;
    if (tag == std::string::npos) {
      emit_data(src_.substr(pos_), text_line);
      advance_to(src_.size());
      return;
    }
    std::string text = src_.substr(pos_, tag - pos_);
    size_t after = tag + 2;
    char sign = 0;
    if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
    if (sign == '-') {
      size_t e = text.size();
      while (e > 0 && is_space(text[e - 1])) --e;
      text.resize(e);
    } else if (sign != '+' && opt_.lstrip_blocks && kind != TagKind::Variable) {
      // Strip spaces/tabs between the last newline (or a line start) and the tag.
      const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if (l_pos > 0 || line_starting_) {
        bool only_space = l_pos < text.size();
        for (size_t k = l_pos; k < text.size(); ++k)
          if (!is_space(text[k])) { only_space = false; break; }
        if (only_space) text.resize(l_pos);
      }
    }
    emit_data(std::move(text), text_line);
    advance_to(after);
    line_starting_ = false;
    if (kind == TagKind::Comment) lex_comment();
    else lex_tag_body(kind);
  }

  // After the end of a tag: `-` strips all following whitespace; otherwise trim_blocks drops one "\n"
  // (blocks and comments only, and not after `+`).
  void finish_tag(size_t end_pos, char end_sign, bool trimmable) {
    size_t p = end_pos;
    if (end_sign == '-') {
      while (p < src_.size() && is_space(src_[p])) ++p;
    } else if (end_sign != '+' && trimmable && opt_.trim_blocks && p < src_.size() && src_[p] == '\n') {
      ++p;
    }
    line_starting_ = p > 0 && src_[p - 1] == '\n' && p > end_pos;
    advance_to(p);
  }

  void lex_comment() {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) fail("template line ", line_, ": unterminated comment");
    char sign = 0;
    if (close > pos_ && (src_[close - 1] == '-' || src_[close - 1] == '+')) sign = src_[close - 1];
    advance_to(close);
    finish_tag(close + 2, sign, true);
  }

  void lex_tag_body(TagKind kind) {
    tokens_.push_back({kind == TagKind::Block ? TokenType::BlockBegin : TokenType::VariableBegin, "", line_});
    const char closer = kind == TagKind::Block ? '%' : '}';
    std::vector<char> brackets;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size()) fail("template line ", line_, ": unexpected end of template inside a tag");
      const char c = src_[pos_];
      if (brackets.empty()) {  // the end tag counts only outside brackets (as in Jinja)
        char sign = 0;
        size_t p = pos_;
        if ((c == '-' || (c == '+' && kind == TagKind::Block)) && p + 1 < src_.size()) sign = src_[p++];
        if (p + 1 < src_.size() && src_[p] == closer && src_[p + 1] == '}') {
          tokens_.push_back({kind == TagKind::Block ? TokenType::BlockEnd : TokenType::VariableEnd, "", line_});
          finish_tag(p + 2, sign, kind == TagKind::Block);
          return;
        }
      }
      if (is_name_start(c)) { lex_name(); continue; }
      if (is_digit(c)) { lex_number(); continue; }
      if (c == '\'' || c == '"') { lex_string(c); continue; }
      lex_operator(brackets);
    }
  }

  void lex_name() {
    size_t e = pos_;
    while (e < src_.size() && is_name_char(src_[e])) ++e;
    tokens_.push_back({TokenType::Name, src_.substr(pos_, e - pos_), line_});
    advance_to(e);
  }

  // Digits with optional underscores between them: (\d+_)*\d+
  size_t scan_digits(size_t p) const {
    size_t e = p;
    while (e < src_.size() && is_digit(src_[e])) {
      ++e;
      if (e + 1 < src_.size() && src_[e] == '_' && is_digit(src_[e + 1])) ++e;
    }
    return e;
  }

  void lex_number() {
    size_t e = scan_digits(pos_);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      e = scan_digits(e + 1);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t p = e + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) { e = scan_digits(p); is_float = true; }
    }
    std::string text;
    for (size_t k = pos_; k < e; ++k)
      if (src_[k] != '_') text += src_[k];
    tokens_.push_back({is_float ? TokenType::Float : TokenType::Integer, text, line_});
    advance_to(e);
  }

  static void append_code_point(std::string& out, uint32_t cp);

  // Python "unicode-escape" decoding of the literal body; unknown escapes keep their backslash.
  void lex_string(char quote) {
    std::string value;
    size_t p = pos_ + 1;
    const int start_line = line_;
    while (true) {
      if (p >= src_.size()) fail("template line ", start_line, ": unterminated string literal");
      const char c = src_[p];
      if (c == quote) break;
      if (c != '\\') { value += c; ++p; continue; }
      if (p + 1 >= src_.size()) fail("template line ", start_line, ": unterminated string literal");
      const char e = src_[p + 1];
      p += 2;
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case '\n': break;
        case 'x': case 'u': case 'U': {
          const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int k = 0; k < digits; ++k, ++p) {
            const char h = p < src_.size() ? src_[p] : 0;
            int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) fail("template line ", start_line, ": truncated \\", e, " escape in string literal");
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          if (cp > 0x10FFFF) fail("template line ", start_line, ": illegal Unicode character in string literal");
          append_code_point(value, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++k, ++p)
              cp = cp * 8 + static_cast<uint32_t>(src_[p] - '0');
            append_code_point(value, cp);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    tokens_.push_back({TokenType::String, std::move(value), start_line});
    advance_to(p + 1);
  }

  void lex_operator(std::vector<char>& brackets) {
    static const char* const kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwoChar) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back({TokenType::Operator, op, line_});
        advance_to(pos_ + 2);
        return;
      }
    }
    const char c = src_[pos_];
    if (!std::strchr("+-*/%~()[]{}.,:|=<>;", c))
      fail("template line ", line_, ": unexpected character '", c, "' in tag");
    if (c == '(' || c == '[' || c == '{') {
      check(brackets.size() < 1000, "template line ", line_, ": brackets nested too deeply");
      brackets.push_back(c);
    } else if (c == ')' || c == ']' || c == '}') {
      const char open = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (brackets.empty() || brackets.back() != open)
        fail("template line ", line_, ": unexpected '", c, "'");
      brackets.pop_back();
    }
    tokens_.push_back({TokenType::Operator, std::string(1, c), line_});
    advance_to(pos_ + 1);
  }

  std::string src_;
  LexerOptions opt_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;  // the previous tag's text ended with "\n" (jinja2's line_starting)
  std::vector<Token> tokens_;
};

void Lexer::append_code_point(std::string& out, uint32_t cp) {
  if (cp < 0x80) { out += static_cast<char>(cp); return; }
  if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  }
  out += static_cast<char>(0x80 | (cp & 0x3F));
}

}  // namespace

std::vector<Token> tokenize(const std::string& source, const LexerOptions& options) {
  return Lexer(source, options).run();
}

}  // namespace polykv::jinja
