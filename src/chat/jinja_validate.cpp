// Compile-time checks that Jinja2 performs before rendering, so that a template Python rejects is
// rejected here too: an unknown filter or test is an error unless it sits directly under an `if`
// or inside a conditional expression (Jinja's "soft" frames defer it to run time). Also records
// whether macro bodies read varargs/kwargs/caller.
#include "chat/jinja_interpreter.h"
#include "core/error.h"

namespace polykv::jinja {
namespace {

struct Validator {
  // Names read in the current macro body (for varargs/kwargs/caller detection).
  std::vector<std::vector<std::string>*> name_sinks;

  void expr(const Expr* e, bool soft) {
    if (!e) return;
    if (e->kind == Expr::Kind::Name)
      for (auto* sink : name_sinks) sink->push_back(e->name);
    if (e->kind == Expr::Kind::Filter && !soft && !has_filter(e->name))
      fail("template line ", e->line, ": No filter named '", e->name, "'.");
    if (e->kind == Expr::Kind::Test && !soft && !has_test(e->name))
      fail("template line ", e->line, ": No test named '", e->name, "'.");
    const bool child_soft = soft || e->kind == Expr::Kind::Conditional;
    for (const auto& a : e->args) expr(a.get(), child_soft);
    for (const auto& [k, v] : e->kwargs) expr(v.get(), child_soft);
  }

  void body(Body& b, bool soft) {
    for (auto& s : b) stmt(*s, soft);
  }

  void callable_body(Stmt& s) {
    std::vector<std::string> names;
    name_sinks.push_back(&names);
    for (auto& p : s.params) expr(p.default_value.get(), false);
    body(s.bodies[0], false);
    name_sinks.pop_back();
    for (const auto& n : names) {
      s.uses_varargs = s.uses_varargs || n == "varargs";
      s.uses_kwargs = s.uses_kwargs || n == "kwargs";
      s.uses_caller = s.uses_caller || n == "caller";
    }
  }

  void stmt(Stmt& s, bool soft) {
    switch (s.kind) {
      case Stmt::Kind::If:
        for (auto& c : s.conditions) expr(c.get(), true);
        for (auto& b : s.bodies) body(b, true);
        body(s.else_body, true);
        return;
      case Stmt::Kind::For:
        expr(s.expr.get(), soft);
        expr(s.filter.get(), false);
        body(s.bodies[0], false);
        body(s.else_body, false);
        return;
      case Stmt::Kind::Macro:
        callable_body(s);
        return;
      case Stmt::Kind::CallBlock:
        expr(s.expr.get(), soft);
        callable_body(s);
        return;
      case Stmt::Kind::SetBlock:
        expr(s.filter.get(), soft);
        body(s.bodies[0], false);
        return;
      case Stmt::Kind::FilterBlock:
        expr(s.expr.get(), soft);
        body(s.bodies[0], false);
        return;
      default:
        expr(s.expr.get(), soft);
        for (auto& b : s.bodies) body(b, soft);
    }
  }
};

}  // namespace

void validate_template(Body& b) {
  Validator v;
  v.body(b, false);
}

}  // namespace polykv::jinja
