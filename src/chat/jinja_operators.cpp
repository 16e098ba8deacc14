// Python semantics of + - * / // % ** ~, `in`, and slicing, for interpreter values.
#include <cmath>

#include "chat/jinja_interpreter.h"
#include "chat/jinja_text.h"
#include "core/error.h"

namespace polykv::jinja {
namespace {

[[noreturn]] void unsupported_operands(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail(a.str().empty() ? "value is undefined" : a.str());
  if (b.is_undefined()) fail(b.str().empty() ? "value is undefined" : b.str());
  if (op == "+" && a.is_string()) fail("can only concatenate str (not \"", b.type_name(), "\") to str");
  if (op == "+" && a.is_list() && !a.is_tuple())
    fail("can only concatenate list (not \"", b.type_name(), "\") to list");
  fail("unsupported operand type(s) for ", op, ": '", a.type_name(), "' and '", b.type_name(), "'");
}

using IntOp = bool (*)(int64_t, int64_t, int64_t*);
bool add_overflows(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool sub_overflows(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mul_overflows(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

// Python ints are unbounded; we use int64 and report overflow instead of wrapping.
int64_t checked(IntOp op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (op(a, b, &r)) fail("integer overflow");
  return r;
}

Value repeat(const Value& seq, int64_t times, Interpreter& in) {
  if (times < 0) times = 0;
  // Empty sequences repeat to themselves: no loop of `times` iterations (which may be 2^62).
  if (seq.is_string() && seq.str().empty()) return seq;
  if (!seq.is_string() && seq.items().empty()) return Value::list({}, seq.is_tuple());
  if (seq.is_string()) {
    if (times > 0 && seq.str().size() > in.limits().max_output_bytes / static_cast<size_t>(times))
      fail("string repetition too large");
    std::string out;
    for (int64_t k = 0; k < times; ++k) out += seq.str();
    return seq.is_markup() ? Value::markup(std::move(out)) : Value::string(std::move(out));
  }
  const auto& items = seq.items();
  if (times > 0 && items.size() > in.limits().max_output_bytes / 8 / static_cast<size_t>(times))
    fail("list repetition too large");
  std::vector<Value> out;
  for (int64_t k = 0; k < times; ++k) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.is_tuple());
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

double python_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b, Interpreter& in) {
  if (op == "~") {
    std::string s = a.to_str() + b.to_str();
    in.charge_output(0);
    if (s.size() > in.limits().max_output_bytes) fail("string too large");
    return Value::string(std::move(s));
  }
  const bool numbers = a.is_number() && b.is_number();
  const bool any_float = a.is_float() || b.is_float();
  if (op == "+") {
    if (numbers) {
      if (any_float) return Value::floating(a.as_double() + b.as_double());
      return Value::integer(checked(add_overflows, a.as_int(), b.as_int()));
    }
    if (a.is_string() && b.is_string()) {
      if (a.str().size() + b.str().size() > in.limits().max_output_bytes) fail("string too large");
      // Markup + str escapes the plain operand (markupsafe's __add__ / __radd__).
      if (a.is_markup() || b.is_markup())
        return Value::markup((a.is_markup() ? a.str() : html_escape(a.str())) +
                             (b.is_markup() ? b.str() : html_escape(b.str())));
      return Value::string(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && !a.is_generator() && !b.is_generator() && a.is_tuple() == b.is_tuple()) {
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(items), a.is_tuple());
    }
    unsupported_operands(op, a, b);
  }
  if (op == "-") {
    if (!numbers) unsupported_operands(op, a, b);
    if (any_float) return Value::floating(a.as_double() - b.as_double());
    return Value::integer(checked(sub_overflows, a.as_int(), b.as_int()));
  }
  if (op == "*") {
    if (numbers) {
      if (any_float) return Value::floating(a.as_double() * b.as_double());
      return Value::integer(checked(mul_overflows, a.as_int(), b.as_int()));
    }
    const bool a_seq = a.is_string() || (a.is_list() && !a.is_generator());
    const bool b_seq = b.is_string() || (b.is_list() && !b.is_generator());
    if (a_seq && (b.is_int() || b.is_bool())) return repeat(a, b.as_int(), in);
    if (b_seq && (a.is_int() || a.is_bool())) return repeat(b, a.as_int(), in);
    unsupported_operands(op, a, b);
  }
  if (op == "/") {
    if (!numbers) unsupported_operands(op, a, b);
    if (b.as_double() == 0) fail("division by zero");
    return Value::floating(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (!numbers) {
      if (op == "%" && a.is_string()) fail("unsupported: printf-style string formatting with '%'");
      unsupported_operands(op, a, b);
    }
    if (b.as_double() == 0) fail(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
    if (any_float) {
      const double x = a.as_double(), y = b.as_double();
      if (op == "%") return Value::floating(python_fmod(x, y));
      return Value::floating(std::floor((x - python_fmod(x, y)) / y + 0.5));  // exact like CPython's float_floor_div
    }
    if (a.as_int() == INT64_MIN && b.as_int() == -1) fail("integer overflow");
    if (op == "//") return Value::integer(floor_div(a.as_int(), b.as_int()));
    return Value::integer(a.as_int() - floor_div(a.as_int(), b.as_int()) * b.as_int());
  }
  if (op == "**") {
    if (!numbers) unsupported_operands(op, a, b);
    if (!any_float && b.as_int() >= 0) {
      int64_t result = 1, base = a.as_int(), e = b.as_int();
      while (e > 0) {
        if (e & 1) result = checked(mul_overflows, result, base);
        e >>= 1;
        if (e > 0) base = checked(mul_overflows, base, base);
      }
      return Value::integer(result);
    }
    if (a.as_double() == 0 && b.as_double() < 0) fail("0.0 cannot be raised to a negative power");
    return Value::floating(std::pow(a.as_double(), b.as_double()));
  }
  fail("unknown operator ", op);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::String:
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not ", item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::List:
      for (const Value& v : container.items())
        if (values_equal(v, item)) return true;
      return false;
    case Value::Kind::Dict: return container.dict_data()->find(item) != nullptr;
    case Value::Kind::Undefined: return false;
    default: fail("argument of type '", container.type_name(), "' is not iterable");
  }
}

Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  auto bound_ok = [](const Value& v) { return v.is_none() || v.is_int() || v.is_bool(); };
  if (!(obj.is_string() || (obj.is_list() && !obj.is_generator())) || !bound_ok(start) || !bound_ok(stop) ||
      !bound_ok(step))
    return Value::undefined("'" + obj.type_name() + " object' cannot be sliced that way");
  const int64_t st = step.is_none() ? 1 : step.as_int();
  if (st == 0) fail("slice step cannot be zero");
  std::vector<char32_t> cps;
  const bool is_str = obj.is_string();
  const bool ascii = is_str && is_ascii(obj.str());
  if (is_str && !ascii) cps = to_code_points(obj.str());
  const int64_t n = is_str ? (ascii ? static_cast<int64_t>(obj.str().size()) : static_cast<int64_t>(cps.size()))
                           : static_cast<int64_t>(obj.items().size());
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    int64_t k = v.as_int();
    if (k < 0) {
      k += n;
      if (k < 0) k = st < 0 ? -1 : 0;
    } else if (k >= n) {
      k = st < 0 ? n - 1 : n;
    }
    return k;
  };
  const int64_t b = adjust(start, st < 0 ? n - 1 : 0);
  const int64_t e = adjust(stop, st < 0 ? -1 : n);
  std::vector<int64_t> picks;
  if (st > 0) for (int64_t k = b; k < e; k += st) picks.push_back(k);
  else for (int64_t k = b; k > e; k += st) picks.push_back(k);
  if (is_str) {
    std::string out;
    for (int64_t k : picks) {
      if (ascii) out += obj.str()[static_cast<size_t>(k)];
      else append_utf8(out, cps[static_cast<size_t>(k)]);
    }
    return Value::string(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t k : picks) out.push_back(obj.items()[static_cast<size_t>(k)]);
  return Value::list(std::move(out), obj.is_tuple());
}

}  // namespace polykv::jinja
