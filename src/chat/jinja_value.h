// Runtime values of the Jinja interpreter, modelled on the Python objects Jinja2 would see when
// transformers renders a chat template: None, bool, int, float, str, list/tuple, dict, Jinja's
// Undefined, namespace objects, callables (macros, globals) and bound methods ("abc".strip).
// Invariants: lists and dicts are shared by pointer (like Python references); the sandbox forbids
// mutating them, so only Namespace values are ever modified after construction.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace polykv::jinja {

class Value;
class Interpreter;

// Deepest nesting of lists/dicts a value may have: keeps recursive destruction, repr and json
// within the C++ stack (Value::list / Value::dict / DictData::set throw beyond it).
inline constexpr uint32_t kMaxValueNesting = 512;

struct ListData {
  std::vector<Value> items;
  uint32_t depth = 1;  // 1 + deepest nesting among items
  bool is_tuple = false;
  // Results of map/select/items...: Python generators. They iterate, but len() and json fail
  // and they are always truthy.
  bool is_generator = false;
};

// Insertion-ordered mapping (Python dict); also the attribute store of namespace objects.
struct DictData {
  std::vector<std::pair<Value, Value>> entries;
  uint32_t depth = 1;  // 1 + deepest nesting among keys and values (grows as namespaces are assigned)
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(const Value& key, const Value& value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> invoke;
};

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable, Method };

  Value() = default;  // Undefined
  static Value undefined(std::string description = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double d);
  static Value string(std::string s);
  // markupsafe.Markup (made by |safe and |escape): adding a plain str to it HTML-escapes the str.
  static Value markup(std::string s);
  static Value list(std::vector<Value> items, bool is_tuple = false, bool is_generator = false);
  static Value dict(std::shared_ptr<DictData> data = nullptr);
  static Value name_space(std::shared_ptr<DictData> data = nullptr);
  static Value callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn);
  static Value method(const Value& receiver, std::string name);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_markup() const { return kind_ == Kind::String && markup_; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_tuple() const { return kind_ == Kind::List && list_->is_tuple; }
  bool is_generator() const { return kind_ == Kind::List && list_->is_generator; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_namespace() const { return kind_ == Kind::Namespace; }
  bool is_callable() const { return kind_ == Kind::Callable || kind_ == Kind::Method; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }  // bool is an int in Python
  double as_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(as_int()); }
  const std::string& str() const { return s_; }  // String text; Undefined description; Method name
  const std::vector<Value>& items() const { return list_->items; }
  const std::shared_ptr<ListData>& list_data() const { return list_; }
  const std::shared_ptr<DictData>& dict_data() const { return dict_; }
  const std::shared_ptr<Callable>& callable_data() const { return callable_; }
  const Value& receiver() const { return *receiver_; }

  std::string type_name() const;  // Python type name: 'str', 'int', 'NoneType', 'dict', ...
  bool truthy() const;
  std::string to_str() const;   // Python str(x); Undefined prints as ""
  std::string repr() const;     // Python repr(x)
  uint32_t nesting() const;     // 0 for scalars, else the container depth

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  bool markup_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  std::shared_ptr<ListData> list_;
  std::shared_ptr<DictData> dict_;
  std::shared_ptr<Callable> callable_;
  std::shared_ptr<Value> receiver_;
};

// Fails with polykv::Error when containers nest deeper than kMaxValueNesting.
void check_nesting(uint32_t depth);

// Python ==, with 1 == 1.0 == True; Undefined equals only Undefined.
bool values_equal(const Value& a, const Value& b);
// Python <, throwing polykv::Error ("'<' not supported between ...") for unorderable types.
bool value_less(const Value& a, const Value& b);
// Iterates like Python iter(): list items, dict keys, string code points; Undefined is empty.
// Throws for None, numbers and other non-iterables ("'int' object is not iterable").
std::vector<Value> iterate(const Value& v);
// Python len(); throws for values without a length.
int64_t value_length(const Value& v);

}  // namespace polykv::jinja
