#include "chat/template_literals.h"

namespace polykv::jinja {
namespace {

enum class Ctx { Output, Probe };

// Positional argument i (0-based, after the receiver / filter input) of a method or filter whose
// characters can reach the output.
bool method_arg_is_output(const std::string& method, size_t i) {
  return (method == "replace" && i == 1) || (method == "get" && i == 1);
}
bool filter_arg_is_output(const std::string& filter, size_t i) {
  return ((filter == "default" || filter == "d") && i == 0) || (filter == "join" && i == 0) ||
         (filter == "replace" && i == 1);
}

class Rewriter {
 public:
  explicit Rewriter(const LiteralRewriter& rewrite) : rewrite_(rewrite) {}

  void body(Body& b) {
    for (StmtPtr& s : b)
      if (s) stmt(*s);
  }

 private:
  void stmt(Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::Text: s.text = rewrite_(s.text); break;
      case Stmt::Kind::If:
        for (ExprPtr& c : s.conditions) expr(c, Ctx::Probe);
        break;
      case Stmt::Kind::For:
        expr(s.expr, Ctx::Output);
        expr(s.filter, Ctx::Probe);
        break;
      case Stmt::Kind::SetBlock:
        expr(s.filter, Ctx::Output);  // applied to the block's text
        break;
      case Stmt::Kind::Print:
      case Stmt::Kind::Set:
      case Stmt::Kind::CallBlock:
      case Stmt::Kind::FilterBlock: expr(s.expr, Ctx::Output); break;
      case Stmt::Kind::Macro:
      case Stmt::Kind::Break:
      case Stmt::Kind::Continue: break;
    }
    for (MacroParam& p : s.params) expr(p.default_value, Ctx::Output);
    for (Body& b : s.bodies) body(b);
    body(s.else_body);
  }

  void expr(ExprPtr& p, Ctx ctx) {
    if (!p) return;
    Expr& e = *p;
    switch (e.kind) {
      case Expr::Kind::Literal:
        if (ctx == Ctx::Output && e.value.is_string() && !e.value.is_markup())
          e.value = Value::string(rewrite_(e.value.str()));
        return;
      case Expr::Kind::Name: return;
      case Expr::Kind::Dict:
        for (size_t i = 0; i < e.args.size(); ++i) expr(e.args[i], i % 2 == 0 ? Ctx::Probe : ctx);
        return;
      case Expr::Kind::Item:
      case Expr::Kind::Slice:
        for (size_t i = 0; i < e.args.size(); ++i) expr(e.args[i], i == 0 ? ctx : Ctx::Probe);
        return;
      case Expr::Kind::Call: {
        Expr* callee = e.args.empty() ? nullptr : e.args[0].get();
        const bool method = callee && callee->kind == Expr::Kind::Attr;
        if (!e.args.empty()) expr(e.args[0], ctx);  // a method's receiver keeps ctx ('sep'.join(...))
        for (size_t i = 1; i < e.args.size(); ++i)
          expr(e.args[i], !method || method_arg_is_output(callee->name, i - 1) ? ctx : Ctx::Probe);
        for (auto& kw : e.kwargs) expr(kw.second, method ? Ctx::Probe : ctx);
        return;
      }
      case Expr::Kind::Filter:
        for (size_t i = 0; i < e.args.size(); ++i)
          expr(e.args[i], i == 0 || filter_arg_is_output(e.name, i - 1) ? ctx : Ctx::Probe);
        for (auto& kw : e.kwargs) expr(kw.second, Ctx::Probe);
        return;
      case Expr::Kind::Conditional:
        for (size_t i = 0; i < e.args.size(); ++i) expr(e.args[i], i == 0 ? Ctx::Probe : ctx);
        return;
      case Expr::Kind::Test:
      case Expr::Kind::Compare:
      case Expr::Kind::Not:
      case Expr::Kind::Negate:
      case Expr::Kind::Plus:
        for (ExprPtr& a : e.args) expr(a, Ctx::Probe);
        for (auto& kw : e.kwargs) expr(kw.second, Ctx::Probe);
        return;
      case Expr::Kind::List:
      case Expr::Kind::Tuple:
      case Expr::Kind::Attr:
      case Expr::Kind::Binary:
      case Expr::Kind::And:
      case Expr::Kind::Or:
        for (ExprPtr& a : e.args) expr(a, ctx);
        return;
    }
  }

  const LiteralRewriter& rewrite_;
};

}  // namespace

void rewrite_output_literals(Body& body, const LiteralRewriter& rewrite) { Rewriter(rewrite).body(body); }

}  // namespace polykv::jinja
