#include "chat/jinja_value.h"

#include <algorithm>

#include "chat/jinja_text.h"
#include "core/error.h"

namespace polykv::jinja {

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, v] : entries)
    if (values_equal(k, key)) return &v;
  return nullptr;
}

const Value* DictData::find(const std::string& key) const {
  for (const auto& [k, v] : entries)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void check_nesting(uint32_t depth) {
  if (depth > kMaxValueNesting) fail("lists/dicts nested deeper than ", kMaxValueNesting, " levels");
}

uint32_t Value::nesting() const {
  if (kind_ == Kind::List) return list_->depth;
  if (kind_ == Kind::Dict || kind_ == Kind::Namespace) return dict_->depth;
  return 0;
}

void DictData::set(const Value& key, const Value& value) {
  const uint32_t needed = 1 + std::max(key.nesting(), value.nesting());
  check_nesting(needed);
  depth = std::max(depth, needed);
  for (auto& [k, v] : entries)
    if (values_equal(k, key)) { v = value; return; }
  entries.emplace_back(key, value);
}

Value Value::undefined(std::string description) {
  Value v;
  v.s_ = std::move(description);
  return v;
}
Value Value::none() { Value v; v.kind_ = Kind::None; return v; }
Value Value::boolean(bool b) { Value v; v.kind_ = Kind::Bool; v.b_ = b; return v; }
Value Value::integer(int64_t i) { Value v; v.kind_ = Kind::Int; v.i_ = i; return v; }
Value Value::floating(double d) { Value v; v.kind_ = Kind::Float; v.d_ = d; return v; }
Value Value::string(std::string s) { Value v; v.kind_ = Kind::String; v.s_ = std::move(s); return v; }
Value Value::markup(std::string s) { Value v = string(std::move(s)); v.markup_ = true; return v; }

Value Value::list(std::vector<Value> items, bool is_tuple, bool is_generator) {
  Value v;
  v.kind_ = Kind::List;
  v.list_ = std::make_shared<ListData>();
  v.list_->items = std::move(items);
  v.list_->is_tuple = is_tuple;
  v.list_->is_generator = is_generator;
  uint32_t deepest = 0;
  for (const Value& item : v.list_->items) deepest = std::max(deepest, item.nesting());
  check_nesting(deepest + 1);
  v.list_->depth = deepest + 1;
  return v;
}

Value Value::dict(std::shared_ptr<DictData> data) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = data ? std::move(data) : std::make_shared<DictData>();
  uint32_t deepest = 0;
  for (const auto& [k, val] : v.dict_->entries) deepest = std::max({deepest, k.nesting(), val.nesting()});
  check_nesting(deepest + 1);
  v.dict_->depth = std::max(v.dict_->depth, deepest + 1);
  return v;
}

Value Value::name_space(std::shared_ptr<DictData> data) {
  Value v = dict(std::move(data));
  v.kind_ = Kind::Namespace;
  return v;
}

Value Value::callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::Callable;
  v.callable_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

Value Value::method(const Value& receiver, std::string name) {
  Value v;
  v.kind_ = Kind::Method;
  v.s_ = std::move(name);
  v.receiver_ = std::make_shared<Value>(receiver);
  return v;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return list_->is_generator ? "generator" : list_->is_tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return "function";
    case Kind::Method: return "builtin_function_or_method";
  }
  return "object";
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b_;
    case Kind::Int: return i_ != 0;
    case Kind::Float: return d_ != 0;
    case Kind::String: return !s_.empty();
    case Kind::List: return list_->is_generator || !list_->items.empty();
    case Kind::Dict: return !dict_->entries.empty();
    default: return true;
  }
}

std::string Value::to_str() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::String: return s_;
    default: return repr();
  }
}

namespace {
thread_local int repr_depth = 0;  // namespaces can form cycles (ns.x = ns); stop instead of recursing forever
struct ReprGuard {
  ReprGuard() {
    if (++repr_depth > static_cast<int>(kMaxValueNesting) + 8) {
      repr_depth = 0;
      fail("cannot print a self-referencing value");
    }
  }
  ~ReprGuard() { if (repr_depth > 0) --repr_depth; }
};
}  // namespace

std::string Value::repr() const {
  ReprGuard guard;
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "None";
    case Kind::Bool: return b_ ? "True" : "False";
    case Kind::Int: return std::to_string(i_);
    case Kind::Float: return python_float_repr(d_);
    case Kind::String: return python_string_repr(s_);
    case Kind::List: {
      if (list_->is_generator) fail("cannot print a generator object (add |list)");
      std::string out = list_->is_tuple ? "(" : "[";
      for (size_t k = 0; k < list_->items.size(); ++k) {
        if (k) out += ", ";
        out += list_->items[k].repr();
      }
      if (list_->is_tuple && list_->items.size() == 1) out += ",";
      return out + (list_->is_tuple ? ")" : "]");
    }
    case Kind::Dict:
    case Kind::Namespace: {
      std::string out = kind_ == Kind::Namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict_->entries) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + (kind_ == Kind::Namespace ? "}>" : "}");
    }
    case Kind::Callable: return "<function " + callable_->name + ">";
    case Kind::Method: return "<built-in method " + s_ + ">";
  }
  return "";
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.str() == b.str();
    case Value::Kind::List: {
      if (a.list_data() == b.list_data()) return true;
      if (a.is_generator() || b.is_generator() || a.is_tuple() != b.is_tuple()) return false;
      const auto &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t k = 0; k < x.size(); ++k)
        if (!values_equal(x[k], y[k])) return false;
      return true;
    }
    case Value::Kind::Dict: {
      const auto &x = a.dict_data()->entries, &y = b.dict_data()->entries;
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = b.dict_data()->find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::Namespace: return a.dict_data() == b.dict_data();
    case Value::Kind::Callable: return a.callable_data() == b.callable_data();
    default: return false;
  }
}

bool value_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order == code point order
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_generator() && !b.is_generator()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (values_equal(x[k], y[k])) continue;
      return value_less(x[k], y[k]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined()) fail("value is undefined (comparison)");
  fail("'<' not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.items();
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      for (const auto& [k, _] : v.dict_data()->entries) keys.push_back(k);
      return keys;
    }
    case Value::Kind::String: {
      std::vector<Value> chars;
      const std::string& s = v.str();
      for (size_t i = 0; i < s.size();) {
        const size_t start = i;
        decode_utf8(s, i);
        chars.push_back(Value::string(s.substr(start, i - start)));
      }
      return chars;
    }
    default: fail("'", v.type_name(), "' object is not iterable");
  }
}

int64_t value_length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return static_cast<int64_t>(code_point_count(v.str()));
    case Value::Kind::List:
      if (v.is_generator()) fail("object of type 'generator' has no len()");
      return static_cast<int64_t>(v.items().size());
    case Value::Kind::Dict: return static_cast<int64_t>(v.dict_data()->entries.size());
    default: fail("object of type '", v.type_name(), "' has no len()");
  }
}

}  // namespace polykv::jinja
