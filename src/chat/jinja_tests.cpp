// Jinja tests (`x is defined`, `x is string`, ...) with the semantics of jinja2.tests on the Python
// objects transformers passes in (note: bool counts as a number; Undefined is iterable and a sequence).
#include <functional>
#include <map>

#include "chat/jinja_interpreter.h"
#include "core/error.h"

namespace polykv::jinja {
namespace {

using TestFn = std::function<bool(Interpreter&, const Value&, const std::vector<Value>&)>;

const Value& arg(const std::vector<Value>& a, size_t k, const char* test) {
  if (k >= a.size()) fail("test '", test, "' expects ", k + 1, " argument(s)");
  return a[k];
}

bool identical(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::List: return a.list_data() == b.list_data();
    case Value::Kind::Dict:
    case Value::Kind::Namespace: return a.dict_data() == b.dict_data();
    case Value::Kind::Callable: return a.callable_data() == b.callable_data();
    default: return values_equal(a, b);
  }
}

bool ordered(const Value& a, const Value& b, bool less, bool or_equal) {
  const bool strictly = less ? value_less(a, b) : value_less(b, a);
  return strictly || (or_equal && values_equal(a, b));
}

int64_t integer_arg(const Value& v, const char* test) {
  if (!v.is_int() && !v.is_bool()) fail("test '", test, "' needs an integer, got ", v.type_name());
  return v.as_int();
}

const std::map<std::string, TestFn>& registry() {
  static const std::map<std::string, TestFn> tests = [] {
    std::map<std::string, TestFn> t;
    t["defined"] = [](Interpreter&, const Value& v, const auto&) { return !v.is_undefined(); };
    t["undefined"] = [](Interpreter&, const Value& v, const auto&) { return v.is_undefined(); };
    t["none"] = [](Interpreter&, const Value& v, const auto&) { return v.is_none(); };
    t["boolean"] = [](Interpreter&, const Value& v, const auto&) { return v.is_bool(); };
    t["true"] = [](Interpreter&, const Value& v, const auto&) { return v.is_bool() && v.as_bool(); };
    t["false"] = [](Interpreter&, const Value& v, const auto&) { return v.is_bool() && !v.as_bool(); };
    t["integer"] = [](Interpreter&, const Value& v, const auto&) { return v.is_int(); };
    t["float"] = [](Interpreter&, const Value& v, const auto&) { return v.is_float(); };
    t["number"] = [](Interpreter&, const Value& v, const auto&) { return v.is_number(); };
    t["string"] = [](Interpreter&, const Value& v, const auto&) { return v.is_string(); };
    t["mapping"] = [](Interpreter&, const Value& v, const auto&) { return v.is_dict(); };
    t["iterable"] = [](Interpreter&, const Value& v, const auto&) {
      return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
    };
    t["sequence"] = [](Interpreter&, const Value& v, const auto&) {
      return v.is_undefined() || v.is_string() || (v.is_list() && !v.is_generator()) || v.is_dict();
    };
    t["callable"] = [](Interpreter&, const Value& v, const auto&) { return v.is_callable(); };
    t["sameas"] = [](Interpreter&, const Value& v, const auto& a) { return identical(v, arg(a, 0, "sameas")); };
    t["escaped"] = [](Interpreter&, const Value&, const auto&) { return false; };
    t["in"] = [](Interpreter&, const Value& v, const auto& a) { return contains(arg(a, 0, "in"), v); };
    const TestFn eq = [](Interpreter&, const Value& v, const auto& a) { return values_equal(v, arg(a, 0, "eq")); };
    const TestFn ne = [](Interpreter&, const Value& v, const auto& a) { return !values_equal(v, arg(a, 0, "ne")); };
    const TestFn lt = [](Interpreter&, const Value& v, const auto& a) { return ordered(v, arg(a, 0, "lt"), true, false); };
    const TestFn le = [](Interpreter&, const Value& v, const auto& a) { return ordered(v, arg(a, 0, "le"), true, true); };
    const TestFn gt = [](Interpreter&, const Value& v, const auto& a) { return ordered(v, arg(a, 0, "gt"), false, false); };
    const TestFn ge = [](Interpreter&, const Value& v, const auto& a) { return ordered(v, arg(a, 0, "ge"), false, true); };
    t["eq"] = t["equalto"] = t["=="] = eq;
    t["ne"] = t["!="] = ne;
    t["lt"] = t["lessthan"] = t["<"] = lt;
    t["le"] = t["<="] = le;
    t["gt"] = t["greaterthan"] = t[">"] = gt;
    t["ge"] = t[">="] = ge;
    t["odd"] = [](Interpreter&, const Value& v, const auto&) { return integer_arg(v, "odd") % 2 != 0; };
    t["even"] = [](Interpreter&, const Value& v, const auto&) { return integer_arg(v, "even") % 2 == 0; };
    t["divisibleby"] = [](Interpreter&, const Value& v, const auto& a) {
      const int64_t d = integer_arg(arg(a, 0, "divisibleby"), "divisibleby");
      if (d == 0) fail("integer division or modulo by zero");
      return integer_arg(v, "divisibleby") % d == 0;
    };
    t["lower"] = [](Interpreter&, const Value& v, const auto&) {
      const std::string s = v.to_str();
      bool cased = false;
      for (char c : s) {
        if (c >= 'A' && c <= 'Z') return false;
        cased = cased || (c >= 'a' && c <= 'z');
      }
      return cased;
    };
    t["upper"] = [](Interpreter&, const Value& v, const auto&) {
      const std::string s = v.to_str();
      bool cased = false;
      for (char c : s) {
        if (c >= 'a' && c <= 'z') return false;
        cased = cased || (c >= 'A' && c <= 'Z');
      }
      return cased;
    };
    t["filter"] = [](Interpreter&, const Value& v, const auto&) { return v.is_string() && has_filter(v.str()); };
    t["test"] = [](Interpreter&, const Value& v, const auto&) { return v.is_string() && has_test(v.str()); };
    return t;
  }();
  return tests;
}

}  // namespace

bool has_test(const std::string& name) { return registry().count(name) > 0; }

bool Interpreter::apply_test(const std::string& name, const Value& input, CallArgs& args, int line) {
  const auto& tests = registry();
  auto it = tests.find(name);
  if (it == tests.end()) fail("template line ", line, ": No test named '", name, "' found.");
  if (!args.keyword.empty()) fail("template line ", line, ": test '", name, "' takes no keyword arguments");
  try {
    return it->second(*this, input, args.positional);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind("template line ", 0) == 0) throw;
    fail("template line ", line, ": ", what);
  }
}

}  // namespace polykv::jinja
