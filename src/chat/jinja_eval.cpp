// Expression evaluation: names, literals, attribute/item access with Jinja's sandboxed getattr /
// getitem fallbacks, calls, filters, tests and the boolean / comparison operators.
#include "chat/jinja_interpreter.h"
#include "core/error.h"

namespace polykv::jinja {
namespace {

// Jinja's default Undefined raises on attribute/item access, calls and arithmetic.
[[noreturn]] void fail_undefined(const Value& u, int line) {
  fail("template line ", line, ": ", u.str().empty() ? std::string("value is undefined") : u.str());
}

std::string describe_for_undefined(const Value& obj) {
  if (obj.is_none()) return "None";
  return "'" + obj.type_name() + " object'";
}

}  // namespace

Value Interpreter::get_attr(const Value& obj, const std::string& name, int line) {
  if (obj.is_undefined()) fail_undefined(obj, line);
  if (is_known_method(obj, name)) {
    if (is_mutating_method(obj, name))
      return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.");
    return Value::method(obj, name);
  }
  if (obj.is_dict() || obj.is_namespace()) {
    if (const Value* v = obj.dict_data()->find(name)) return *v;
  }
  return Value::undefined(describe_for_undefined(obj) + " has no attribute '" + name + "'");
}

Value Interpreter::get_item(const Value& obj, const Value& key, int line) {
  if (obj.is_undefined()) fail_undefined(obj, line);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict_data()->find(key)) return *v;
  } else if ((obj.is_list() && !obj.is_generator()) || obj.is_string()) {
    if (key.is_int() || key.is_bool()) {
      int64_t n = value_length(obj);
      int64_t k = key.as_int();
      if (k < 0) k += n;
      if (k >= 0 && k < n) {
        if (obj.is_list()) return obj.items()[static_cast<size_t>(k)];
        return slice_value(obj, Value::integer(k), Value::integer(k + 1), Value::none());
      }
      return Value::undefined(describe_for_undefined(obj) + " has no element " + key.repr());
    }
  }
  if (key.is_string() && !obj.is_dict()) return get_attr(obj, key.str(), line);
  if (key.is_string() && is_known_method(obj, key.str())) return get_attr(obj, key.str(), line);
  if (obj.is_none()) return Value::undefined("None has no element " + key.repr());
  return Value::undefined(describe_for_undefined(obj) + " has no element " + key.repr());
}

Value Interpreter::call(const Value& callee, CallArgs& args, int line) {
  switch (callee.kind()) {
    case Value::Kind::Callable: return callee.callable_data()->invoke(*this, args);
    case Value::Kind::Method: return call_method(callee.receiver(), callee.str(), args, *this);
    case Value::Kind::Undefined: fail_undefined(callee, line);
    default: fail("template line ", line, ": '", callee.type_name(), "' object is not callable");
  }
}

void Interpreter::eval_args(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope, CallArgs& args) {
  for (size_t k = first; k < e.args.size(); ++k) args.positional.push_back(eval(*e.args[k], scope));
  for (const auto& [key, value] : e.kwargs) args.keyword.emplace_back(key, eval(*value, scope));
}

Value Interpreter::eval_call(const Expr& e, const std::shared_ptr<Scope>& scope, const Value* caller) {
  const Value callee = eval(*e.args[0], scope);
  CallArgs args;
  eval_args(e, 1, scope, args);
  if (caller) args.keyword.emplace_back("caller", *caller);
  try {
    return call(callee, args, e.line);
  } catch (const Error& err) {
    const std::string what = err.what();
    if (what.rfind("template line ", 0) == 0) throw;
    fail("template line ", e.line, ": ", what);
  }
}

Value Interpreter::eval_compare(const Expr& e, const std::shared_ptr<Scope>& scope) {
  Value left = eval(*e.args[0], scope);
  for (size_t k = 0; k < e.ops.size(); ++k) {
    Value right = eval(*e.args[k + 1], scope);
    const std::string& op = e.ops[k];
    bool ok;
    try {
      if (op == "==") ok = values_equal(left, right);
      else if (op == "!=") ok = !values_equal(left, right);
      else if (op == "<") ok = value_less(left, right);
      else if (op == ">") ok = value_less(right, left);
      else if (op == "<=") ok = value_less(left, right) || values_equal(left, right);
      else if (op == ">=") ok = value_less(right, left) || values_equal(left, right);
      else if (op == "in") ok = contains(right, left);
      else ok = !contains(right, left);
    } catch (const Error& err) {
      fail("template line ", e.line, ": ", err.what());
    }
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  DepthGuard guard(*this, e.line);
  switch (e.kind) {
    case Expr::Kind::Literal: return e.value;
    case Expr::Kind::Name: {
      if (const Value* v = scope->lookup(e.name)) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
      std::vector<Value> items;
      for (const auto& a : e.args) items.push_back(eval(*a, scope));
      return Value::list(std::move(items), e.kind == Expr::Kind::Tuple);
    }
    case Expr::Kind::Dict: {
      auto data = std::make_shared<DictData>();
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        const Value key = eval(*e.args[k], scope);
        if (key.is_list() && !key.is_tuple()) fail("template line ", e.line, ": unhashable type: 'list'");
        if (key.is_dict() || key.is_undefined())
          fail("template line ", e.line, ": unhashable type: '", key.type_name(), "'");
        data->set(key, eval(*e.args[k + 1], scope));
      }
      return Value::dict(data);
    }
    case Expr::Kind::Attr: return get_attr(eval(*e.args[0], scope), e.name, e.line);
    case Expr::Kind::Item: {
      const Value obj = eval(*e.args[0], scope);
      return get_item(obj, eval(*e.args[1], scope), e.line);
    }
    case Expr::Kind::Slice: {
      const Value obj = eval(*e.args[0], scope);
      if (obj.is_undefined()) fail_undefined(obj, e.line);
      Value bounds[3];
      for (int k = 0; k < 3; ++k) bounds[k] = e.args[k + 1] ? eval(*e.args[k + 1], scope) : Value::none();
      try {
        return slice_value(obj, bounds[0], bounds[1], bounds[2]);
      } catch (const Error& err) {
        fail("template line ", e.line, ": ", err.what());
      }
    }
    case Expr::Kind::Call: return eval_call(e, scope, nullptr);
    case Expr::Kind::Filter: {
      const Value input = eval(*e.args[0], scope);
      CallArgs args;
      eval_args(e, 1, scope, args);
      return apply_filter(e.name, input, args, e.line);
    }
    case Expr::Kind::Test: {
      const Value input = eval(*e.args[0], scope);
      CallArgs args;
      eval_args(e, 1, scope, args);
      return Value::boolean(apply_test(e.name, input, args, e.line) != e.negated);
    }
    case Expr::Kind::Not: return Value::boolean(!eval(*e.args[0], scope).truthy());
    case Expr::Kind::Negate:
    case Expr::Kind::Plus: {
      const Value v = eval(*e.args[0], scope);
      if (v.is_undefined()) fail_undefined(v, e.line);
      if (!v.is_number()) fail("template line ", e.line, ": bad operand type for unary ", e.kind == Expr::Kind::Negate ? "-" : "+", ": '", v.type_name(), "'");
      if (e.kind == Expr::Kind::Plus) return v.is_bool() ? Value::integer(v.as_int()) : v;
      if (v.is_float()) return Value::floating(-v.as_double());
      if (v.as_int() == INT64_MIN) fail("template line ", e.line, ": integer overflow");
      return Value::integer(-v.as_int());
    }
    case Expr::Kind::Binary: {
      const Value a = eval(*e.args[0], scope);
      const Value b = eval(*e.args[1], scope);
      try {
        return binary_op(e.name, a, b, *this);
      } catch (const Error& err) {
        fail("template line ", e.line, ": ", err.what());
      }
    }
    case Expr::Kind::Compare: return eval_compare(e, scope);
    case Expr::Kind::And: {
      Value a = eval(*e.args[0], scope);
      return a.truthy() ? eval(*e.args[1], scope) : a;
    }
    case Expr::Kind::Or: {
      Value a = eval(*e.args[0], scope);
      return a.truthy() ? a : eval(*e.args[1], scope);
    }
    case Expr::Kind::Conditional: {
      if (eval(*e.args[0], scope).truthy()) return eval(*e.args[1], scope);
      if (e.args[2]) return eval(*e.args[2], scope);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
    }
  }
  return Value::undefined();
}

}  // namespace polykv::jinja
