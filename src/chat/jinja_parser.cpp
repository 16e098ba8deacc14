#include "chat/jinja_parser.h"

#include <algorithm>

#include "core/error.h"

namespace polykv::jinja {
namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : toks_(tokens) {}

  Body parse_all() {
    std::string found;
    Body body = parse_body({}, found);
    return body;
  }

 private:
  // RAII guard on recursion depth.
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxParseDepth) p.error("template nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t ahead = 1) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  void next() { if (pos_ + 1 < toks_.size()) ++pos_; }

  [[noreturn]] void error(const std::string& what) const { fail("template line ", cur().line, ": ", what); }

  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == TokenType::Name && cur().text == name; }
  void expect_op(const char* op) {
    if (!is_op(op)) error(std::string("expected '") + op + "', got " + describe(cur()));
    next();
  }
  void expect_block_end() {
    if (cur().type != TokenType::BlockEnd) error("expected end of statement block, got " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().type != TokenType::Name) error("expected a name, got " + describe(cur()));
    std::string n = cur().text;
    next();
    return n;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::End: return "end of template";
      case TokenType::BlockEnd: return "'%}'";
      case TokenType::VariableEnd: return "'}}'";
      case TokenType::Data: return "template text";
      default: return "'" + t.text + "'";
    }
  }

  ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // ---- statements -------------------------------------------------------------------------------

  // Parses until a block tag whose name is in end_tags (consumes `{%` and the name; sets found) or
  // the end of the template (only allowed when end_tags is empty).
  Body parse_body(const std::vector<std::string>& end_tags, std::string& found) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::End) {
        if (!end_tags.empty()) error("unexpected end of template, expected '" + end_tags.back() + "'");
        return body;
      }
      if (t.type == TokenType::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == TokenType::VariableBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Print;
        s->line = t.line;
        s->expr = parse_tuple(true, false, {});
        if (cur().type != TokenType::VariableEnd) error("expected '}}', got " + describe(cur()));
        next();
        body.push_back(std::move(s));
      } else if (t.type == TokenType::BlockBegin) {
        next();
        if (cur().type != TokenType::Name) error("expected a tag name, got " + describe(cur()));
        const std::string tag = cur().text;
        if (std::find(end_tags.begin(), end_tags.end(), tag) != end_tags.end()) {
          found = tag;
          next();
          return body;
        }
        body.push_back(parse_statement());
      } else {
        error("unexpected " + describe(t));
      }
    }
  }

  StmtPtr parse_statement() {
    const std::string tag = cur().text;
    const int line = cur().line;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    next();
    if (tag == "if") return parse_if(std::move(s));
    if (tag == "for") return parse_for(std::move(s));
    if (tag == "set") return parse_set(std::move(s));
    if (tag == "macro") return parse_macro(std::move(s));
    if (tag == "filter") return parse_filter_block(std::move(s));
    if (tag == "call") return parse_call_block(std::move(s));
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) error("'" + tag + "' outside of a loop");
      s->kind = tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      expect_block_end();
      return s;
    }
    static const char* const kUnsupported[] = {"raw", "include", "import", "from", "extends", "block", "with",
                                               "do", "autoescape", "trans", "generation"};
    for (const char* u : kUnsupported)
      if (tag == u) error("unsupported tag '" + tag + "'");
    error("unknown tag '" + tag + "'");
  }

  StmtPtr parse_if(StmtPtr s) {
    s->kind = Stmt::Kind::If;
    s->conditions.push_back(parse_expression(true));
    expect_block_end();
    while (true) {
      std::string found;
      s->bodies.push_back(parse_body({"elif", "else", "endif"}, found));
      if (found == "elif") {
        s->conditions.push_back(parse_expression(true));
        expect_block_end();
        continue;
      }
      if (found == "else") {
        expect_block_end();
        s->else_body = parse_body({"endif"}, found);
      }
      expect_block_end();
      return s;
    }
  }

  // Assignment targets: name | name, name, ... | (name, name)
  void parse_targets(Stmt& s) {
    const bool parens = is_op("(");
    if (parens) next();
    s.targets.push_back(expect_name());
    while (is_op(",")) {
      s.targets_tuple = true;
      next();
      if (cur().type != TokenType::Name || is_name("in")) break;
      s.targets.push_back(expect_name());
    }
    if (parens) {
      s.targets_tuple = true;
      expect_op(")");
    }
  }

  StmtPtr parse_for(StmtPtr s) {
    s->kind = Stmt::Kind::For;
    parse_targets(*s);
    if (!is_name("in")) error("expected 'in' in for loop, got " + describe(cur()));
    next();
    s->expr = parse_tuple(false, false, {"if", "recursive"});
    if (is_name("if")) {
      next();
      s->filter = parse_expression(true);
    }
    if (is_name("recursive")) error("unsupported: recursive for loops");
    expect_block_end();
    ++loop_depth_;
    std::string found;
    s->bodies.push_back(parse_body({"endfor", "else"}, found));
    --loop_depth_;
    if (found == "else") {
      expect_block_end();
      s->else_body = parse_body({"endfor"}, found);
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_set(StmtPtr s) {
    if (cur().type == TokenType::Name && peek().type == TokenType::Operator && peek().text == ".") {
      s->attr_object = expect_name();
      next();
      s->text = expect_name();
      s->kind = Stmt::Kind::Set;
      expect_op("=");
      s->expr = parse_tuple(true, false, {});
      expect_block_end();
      return s;
    }
    parse_targets(*s);
    if (is_op("=")) {
      next();
      s->kind = Stmt::Kind::Set;
      s->expr = parse_tuple(true, false, {});
      expect_block_end();
      return s;
    }
    if (s->targets_tuple) error("block set needs a single name");
    s->kind = Stmt::Kind::SetBlock;
    if (is_op("|")) s->filter = parse_filter_chain_on_placeholder();
    expect_block_end();
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    std::string found;
    s->bodies.push_back(parse_body({"endset"}, found));
    loop_depth_ = saved_loop_depth;
    expect_block_end();
    return s;
  }

  void parse_params(std::vector<MacroParam>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (is_op("=")) {
        next();
        p.default_value = parse_expression(true);
      } else if (!params.empty() && params.back().default_value) {
        error("non-default argument follows default argument");
      }
      params.push_back(std::move(p));
    }
    next();
  }

  StmtPtr parse_macro(StmtPtr s) {
    s->kind = Stmt::Kind::Macro;
    s->text = expect_name();
    parse_params(s->params);
    expect_block_end();
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    std::string found;
    s->bodies.push_back(parse_body({"endmacro"}, found));
    loop_depth_ = saved_loop_depth;
    if (cur().type == TokenType::Name) next();  // {% endmacro name %}
    expect_block_end();
    return s;
  }

  StmtPtr parse_call_block(StmtPtr s) {
    s->kind = Stmt::Kind::CallBlock;
    if (is_op("(")) parse_params(s->params);
    s->expr = parse_expression(true);
    if (s->expr->kind != Expr::Kind::Call) error("expected a call in {% call %}");
    expect_block_end();
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    std::string found;
    s->bodies.push_back(parse_body({"endcall"}, found));
    loop_depth_ = saved_loop_depth;
    expect_block_end();
    return s;
  }

  ExprPtr parse_filter_chain_on_placeholder() {
    auto input = make(Expr::Kind::Name, cur().line);
    input->name = kFilterBlockInput;
    return parse_filter_expr(std::move(input));
  }

  StmtPtr parse_filter_block(StmtPtr s) {
    s->kind = Stmt::Kind::FilterBlock;
    auto input = make(Expr::Kind::Name, cur().line);
    input->name = kFilterBlockInput;
    s->expr = parse_filter(std::move(input));
    s->expr = parse_filter_expr(std::move(s->expr));
    expect_block_end();
    std::string found;
    s->bodies.push_back(parse_body({"endfilter"}, found));
    expect_block_end();
    return s;
  }

  // ---- expressions ------------------------------------------------------------------------------

  // A comma-separated list becomes a tuple; a single expression stays as it is.
  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens, const std::vector<std::string>& end_names) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    auto at_end = [&] {
      if (cur().type == TokenType::VariableEnd || cur().type == TokenType::BlockEnd || is_op(")")) return true;
      for (const auto& n : end_names)
        if (is_name(n.c_str())) return true;
      return false;
    };
    while (true) {
      if (!items.empty()) expect_op(",");
      if (at_end()) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) error("expected an expression, got " + describe(cur()));
    }
    auto t = make(Expr::Kind::Tuple, line);
    t->args = std::move(items);
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_conditional() : parse_or();
  }

  ExprPtr parse_conditional() {
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      const int line = cur().line;
      next();
      auto cond = make(Expr::Kind::Conditional, line);
      cond->args.push_back(parse_or());
      cond->args.push_back(std::move(expr));
      if (is_name("else")) {
        next();
        cond->args.push_back(parse_conditional());
      } else {
        cond->args.push_back(nullptr);
      }
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr binary(Expr::Kind kind, ExprPtr left, ExprPtr right, int line, std::string op = {}) {
    auto e = make(kind, line);
    e->name = std::move(op);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const int line = cur().line;
      next();
      left = binary(Expr::Kind::Or, std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const int line = cur().line;
      next();
      left = binary(Expr::Kind::And, std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto e = make(Expr::Kind::Not, cur().line);
      next();
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      if (cur().type == TokenType::Operator &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        ops.push_back(cur().text);
        next();
      } else if (is_name("in")) {
        ops.push_back("in");
        next();
      } else if (is_name("not") && peek().type == TokenType::Name && peek().text == "in") {
        ops.push_back("notin");
        next();
        next();
      } else {
        break;
      }
      operands.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto e = make(Expr::Kind::Compare, line);
    e->ops = std::move(ops);
    e->args.push_back(std::move(first));
    for (auto& o : operands) e->args.push_back(std::move(o));
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = cur().text;
      const int line = cur().line;
      next();
      left = binary(Expr::Kind::Binary, std::move(left), parse_concat(), line, op);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const int line = cur().line;
      next();
      left = binary(Expr::Kind::Binary, std::move(left), parse_math2(), line, "~");
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = cur().text;
      const int line = cur().line;
      next();
      left = binary(Expr::Kind::Binary, std::move(left), parse_pow(), line, op);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const int line = cur().line;
      next();
      left = binary(Expr::Kind::Binary, std::move(left), parse_unary(true), line, "**");
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      node = make(is_op("-") ? Expr::Kind::Negate : Expr::Kind::Plus, cur().line);
      next();
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    const int line = t.line;
    if (t.type == TokenType::Name) {
      auto e = make(Expr::Kind::Literal, line);
      if (t.text == "true" || t.text == "True") e->value = Value::boolean(true);
      else if (t.text == "false" || t.text == "False") e->value = Value::boolean(false);
      else if (t.text == "none" || t.text == "None") e->value = Value::none();
      else { e->kind = Expr::Kind::Name; e->name = t.text; }
      next();
      return e;
    }
    if (t.type == TokenType::String) {
      std::string s;
      while (cur().type == TokenType::String) { s += cur().text; next(); }
      auto e = make(Expr::Kind::Literal, line);
      e->value = Value::string(std::move(s));
      return e;
    }
    if (t.type == TokenType::Integer) {
      auto e = make(Expr::Kind::Literal, line);
      try {
        e->value = Value::integer(std::stoll(t.text));
      } catch (const std::exception&) {
        error("integer literal out of range: " + t.text);
      }
      next();
      return e;
    }
    if (t.type == TokenType::Float) {
      auto e = make(Expr::Kind::Literal, line);
      e->value = Value::floating(std::strtod(t.text.c_str(), nullptr));
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(true, true, {});
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = make(Expr::Kind::List, line);
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expression(true));
      }
      next();
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = make(Expr::Kind::Dict, line);
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      next();
      return e;
    }
    error("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      const int line = cur().line;
      if (is_op(".")) {
        next();
        if (cur().type == TokenType::Name) {
          auto e = make(Expr::Kind::Attr, line);
          e->name = cur().text;
          e->args.push_back(std::move(node));
          node = std::move(e);
          next();
        } else if (cur().type == TokenType::Integer) {
          auto e = make(Expr::Kind::Item, line);
          auto index = make(Expr::Kind::Literal, line);
          try {
            index->value = Value::integer(std::stoll(cur().text));
          } catch (const std::exception&) {
            error("integer index out of range: " + cur().text);
          }
          e->args.push_back(std::move(node));
          e->args.push_back(std::move(index));
          node = std::move(e);
          next();
        } else {
          error("expected a name after '.', got " + describe(cur()));
        }
      } else if (is_op("[")) {
        next();
        node = parse_subscript(std::move(node), line);
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node, int line) {
    DepthGuard guard(*this);
    ExprPtr start, stop, step;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (is_op(",")) error("unsupported: tuple subscripts");
      if (!is_op(":")) {
        expect_op("]");
        auto e = make(Expr::Kind::Item, line);
        e->args.push_back(std::move(node));
        e->args.push_back(std::move(start));
        return e;
      }
    }
    next();  // ':'
    if (!is_op("]") && !is_op(":")) stop = parse_expression(true);
    if (is_op(":")) {
      next();
      if (!is_op("]")) step = parse_expression(true);
    }
    expect_op("]");
    auto e = make(Expr::Kind::Slice, line);
    e->args.push_back(std::move(node));
    e->args.push_back(std::move(start));
    e->args.push_back(std::move(stop));
    e->args.push_back(std::move(step));
    return e;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) error("unsupported: *args / **kwargs in calls");
      if (cur().type == TokenType::Name && peek().type == TokenType::Operator && peek().text == "=") {
        std::string key = cur().text;
        next();
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) error("positional argument follows keyword argument");
        e.args.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr callee) {
    DepthGuard guard(*this);
    auto e = make(Expr::Kind::Call, cur().line);
    e->args.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter(ExprPtr node) {
    DepthGuard guard(*this);
    auto e = make(Expr::Kind::Filter, cur().line);
    e->name = expect_name();
    while (is_op(".")) { next(); e->name += "." + expect_name(); }
    e->args.push_back(std::move(node));
    if (is_op("(")) parse_call_args(*e);
    return e;
  }

  ExprPtr parse_test(ExprPtr node) {
    DepthGuard guard(*this);
    auto e = make(Expr::Kind::Test, cur().line);
    next();  // 'is'
    if (is_name("not")) { e->negated = true; next(); }
    e->name = expect_name();
    while (is_op(".")) { next(); e->name += "." + expect_name(); }
    e->args.push_back(std::move(node));
    const Token& t = cur();
    const bool starts_primary = t.type == TokenType::Name || t.type == TokenType::String ||
                                t.type == TokenType::Integer || t.type == TokenType::Float ||
                                is_op("(") || is_op("[") || is_op("{");
    if (is_op("(")) {
      parse_call_args(*e);
    } else if (starts_primary && !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) error("you cannot chain multiple tests with 'is'");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        next();
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  const std::vector<Token>& toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(const std::vector<Token>& tokens) { return Parser(tokens).parse_all(); }

}  // namespace polykv::jinja
