#include "chat/jinja_interpreter.h"

#include "core/error.h"

namespace polykv::jinja {

const Value* Scope::lookup(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

Interpreter::DepthGuard::DepthGuard(Interpreter& i, int line) : in(i) {
  if (++in.depth_ > in.limits_.max_eval_depth) {
    --in.depth_;
    fail("template line ", line, ": evaluation nested too deeply (recursion limit)");
  }
}

Interpreter::~Interpreter() {
  // Move contents out first so destruction runs after the containers are detached.
  for (auto& scope : cleanup_scopes_) {
    auto vars = std::move(scope->vars);
    scope->vars.clear();
  }
  for (auto& ns : cleanup_namespaces_) {
    auto entries = std::move(ns->entries);
    ns->entries.clear();
  }
}

void Interpreter::charge_output(size_t bytes) {
  output_bytes_ += bytes;
  if (output_bytes_ > limits_.max_output_bytes)
    fail("template output exceeds the limit of ", limits_.max_output_bytes, " bytes");
}

void Interpreter::charge_iterations(int64_t n) {
  iterations_ += n;
  if (iterations_ > limits_.max_loop_iterations)
    fail("template exceeds the limit of ", limits_.max_loop_iterations, " loop iterations");
}

std::vector<Value> bind_args(const std::string& what, CallArgs& args, const std::vector<std::string>& names,
                             const std::vector<Value>& defaults) {
  if (args.positional.size() > names.size())
    fail(what, " takes at most ", names.size(), " argument(s), got ", args.positional.size());
  std::vector<Value> bound(names.size());
  std::vector<bool> given(names.size(), false);
  for (size_t k = 0; k < args.positional.size(); ++k) { bound[k] = args.positional[k]; given[k] = true; }
  for (auto& [key, value] : args.keyword) {
    size_t k = 0;
    while (k < names.size() && names[k] != key) ++k;
    if (k == names.size()) fail(what, " got an unexpected keyword argument '", key, "'");
    if (given[k]) fail(what, " got multiple values for argument '", key, "'");
    bound[k] = value;
    given[k] = true;
  }
  for (size_t k = 0; k < names.size(); ++k)
    if (!given[k] && k < defaults.size()) bound[k] = defaults[k];
  return bound;
}

std::string Interpreter::render(const Body& body, const std::shared_ptr<Scope>& root) {
  std::string out;
  exec_body(body, root, out);
  return out;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out) {
  for (const auto& s : body) {
    const Flow f = exec(*s, scope, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

namespace {

// Assigns `value` to one or several names (tuple unpacking like Python).
void assign_targets(Scope& scope, const std::vector<std::string>& targets, bool unpack, const Value& value,
                    int line) {
  if (!unpack) {
    scope.vars[targets[0]] = value;
    return;
  }
  const std::vector<Value> parts = iterate(value);
  if (parts.size() != targets.size())
    fail("template line ", line, ": ", parts.size() < targets.size() ? "not enough" : "too many",
         " values to unpack (expected ", targets.size(), ", got ", parts.size(), ")");
  for (size_t k = 0; k < targets.size(); ++k) scope.vars[targets[k]] = parts[k];
}

}  // namespace

Interpreter::Flow Interpreter::exec(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  DepthGuard guard(*this, s.line);
  switch (s.kind) {
    case Stmt::Kind::Text:
      charge_output(s.text.size());
      out += s.text;
      return Flow::Normal;
    case Stmt::Kind::Print: {
      const std::string text = eval(*s.expr, scope).to_str();
      charge_output(text.size());
      out += text;
      return Flow::Normal;
    }
    case Stmt::Kind::If:
      for (size_t k = 0; k < s.conditions.size(); ++k)
        if (eval(*s.conditions[k], scope).truthy()) return exec_body(s.bodies[k], scope, out);
      return exec_body(s.else_body, scope, out);
    case Stmt::Kind::For: return exec_for(s, scope, out);
    case Stmt::Kind::Set: exec_set(s, scope); return Flow::Normal;
    case Stmt::Kind::SetBlock: {
      auto inner = std::make_shared<Scope>(scope);
      std::string text;
      exec_body(s.bodies[0], inner, text);
      Value v = Value::string(std::move(text));
      if (s.filter) {
        auto filter_scope = std::make_shared<Scope>(scope);
        filter_scope->vars[kFilterBlockInput] = v;
        v = eval(*s.filter, filter_scope);
      }
      scope->vars[s.targets[0]] = v;
      return Flow::Normal;
    }
    case Stmt::Kind::Macro: scope->vars[s.text] = make_macro(s, scope); return Flow::Normal;
    case Stmt::Kind::CallBlock: {
      const Value caller = make_macro(s, scope);
      const std::string text = eval_call(*s.expr, scope, &caller).to_str();
      charge_output(text.size());
      out += text;
      return Flow::Normal;
    }
    case Stmt::Kind::FilterBlock: {
      auto inner = std::make_shared<Scope>(scope);
      std::string text;
      exec_body(s.bodies[0], inner, text);
      inner->vars[kFilterBlockInput] = Value::string(std::move(text));
      const std::string filtered = eval(*s.expr, inner).to_str();
      charge_output(filtered.size());
      out += filtered;
      return Flow::Normal;
    }
    case Stmt::Kind::Break: return Flow::Break;
    case Stmt::Kind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  const Value iterable = eval(*s.expr, scope);
  std::vector<Value> items;
  try {
    items = iterate(iterable);
  } catch (const Error& e) {
    fail("template line ", s.line, ": ", e.what());
  }
  charge_iterations(static_cast<int64_t>(items.size()));
  if (s.filter) {  // {% for x in xs if cond %}: filter first, so loop.length counts kept items
    std::vector<Value> kept;
    for (const Value& item : items) {
      auto probe = std::make_shared<Scope>(scope);
      assign_targets(*probe, s.targets, s.targets_tuple, item, s.line);
      if (eval(*s.filter, probe).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_body(s.else_body, scope, out);
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t k = 0; k < n; ++k) {
    auto inner = std::make_shared<Scope>(scope);  // fresh per iteration, as in Jinja
    assign_targets(*inner, s.targets, s.targets_tuple, items[k], s.line);
    auto loop = std::make_shared<DictData>();
    loop->set(Value::string("index"), Value::integer(k + 1));
    loop->set(Value::string("index0"), Value::integer(k));
    loop->set(Value::string("revindex"), Value::integer(n - k));
    loop->set(Value::string("revindex0"), Value::integer(n - k - 1));
    loop->set(Value::string("first"), Value::boolean(k == 0));
    loop->set(Value::string("last"), Value::boolean(k == n - 1));
    loop->set(Value::string("length"), Value::integer(n));
    loop->set(Value::string("depth"), Value::integer(1));
    loop->set(Value::string("depth0"), Value::integer(0));
    if (k > 0) loop->set(Value::string("previtem"), items[k - 1]);
    if (k + 1 < n) loop->set(Value::string("nextitem"), items[k + 1]);
    loop->set(Value::string("cycle"), Value::callable("cycle", [k](Interpreter&, CallArgs& args) {
      if (args.positional.empty()) fail("no items for cycling given");
      return args.positional[static_cast<size_t>(k) % args.positional.size()];
    }));
    inner->vars["loop"] = Value::dict(loop);
    const Flow f = exec_body(s.bodies[0], inner, out);
    if (f == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::exec_set(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  const Value v = eval(*s.expr, scope);
  if (!s.attr_object.empty()) {
    const Value* target = scope->lookup(s.attr_object);
    if (!target || !target->is_namespace())
      fail("template line ", s.line, ": cannot assign attribute on non-namespace object '", s.attr_object, "'");
    target->dict_data()->set(Value::string(s.text), v);
    return;
  }
  assign_targets(*scope, s.targets, s.targets_tuple, v, s.line);
}

Value Interpreter::make_macro(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  register_for_cleanup(scope);  // the macro value may end up stored in `scope` itself
  const Stmt* macro = &s;
  const std::string name = s.kind == Stmt::Kind::Macro ? s.text : "caller";
  return Value::callable(name, [macro, scope, name](Interpreter& in, CallArgs& args) -> Value {
    DepthGuard guard(in, macro->line);
    auto frame = std::make_shared<Scope>(scope);
    const auto& params = macro->params;
    if (args.positional.size() > params.size() && !macro->uses_varargs)
      fail("macro '", name, "' takes not more than ", params.size(), " argument(s)");
    std::vector<bool> given(params.size(), false);
    for (size_t k = 0; k < params.size() && k < args.positional.size(); ++k) {
      frame->vars[params[k].name] = args.positional[k];
      given[k] = true;
    }
    auto extra_kwargs = std::make_shared<DictData>();
    for (auto& [key, value] : args.keyword) {
      size_t k = 0;
      while (k < params.size() && params[k].name != key) ++k;
      if (k < params.size()) {
        if (given[k]) fail("macro '", name, "' got multiple values for argument '", key, "'");
        frame->vars[key] = value;
        given[k] = true;
      } else if (key == "caller" && macro->uses_caller) {
        frame->vars["caller"] = value;
      } else if (macro->uses_kwargs) {
        extra_kwargs->set(Value::string(key), value);
      } else {
        fail("macro '", name, "' takes no keyword argument '", key, "'");
      }
    }
    for (size_t k = 0; k < params.size(); ++k) {
      if (given[k]) continue;
      frame->vars[params[k].name] = params[k].default_value
                                        ? in.eval(*params[k].default_value, frame)
                                        : Value::undefined("parameter '" + params[k].name + "' was not provided");
    }
    if (macro->uses_varargs) {
      std::vector<Value> rest;
      for (size_t k = params.size(); k < args.positional.size(); ++k) rest.push_back(args.positional[k]);
      frame->vars["varargs"] = Value::list(std::move(rest), true);
    }
    if (macro->uses_kwargs) frame->vars["kwargs"] = Value::dict(extra_kwargs);
    std::string text;
    in.exec_body(macro->bodies[0], frame, text);
    return Value::string(std::move(text));
  });
}

}  // namespace polykv::jinja
