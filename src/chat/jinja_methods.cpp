// Methods callable on values from templates: str methods ("x".strip()), dict.get/items/keys/values,
// list.index/count. Mutating methods (list.append, dict.pop, ...) exist but are unsafe in
// transformers' ImmutableSandboxedEnvironment: get_attr turns them into an Undefined that raises.
#include <algorithm>
#include <cctype>

#include "chat/jinja_interpreter.h"
#include "chat/jinja_text.h"
#include "core/error.h"

namespace polykv::jinja {
namespace {

const std::vector<std::string> kStringMethods = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "upper", "lower",
    "title", "capitalize", "replace", "find", "rfind", "index", "rindex", "count", "join", "isdigit", "isalpha",
    "isalnum", "isspace", "islower", "isupper", "format", "swapcase", "casefold", "zfill", "center", "ljust",
    "rjust", "partition", "rpartition", "encode", "expandtabs", "isdecimal", "isnumeric", "istitle",
    "isidentifier", "isprintable", "isascii", "removeprefix", "removesuffix", "translate", "maketrans",
    "format_map"};
const std::vector<std::string> kDictMethods = {"get", "items", "keys", "values", "copy", "fromkeys",
                                               "pop", "popitem", "update", "setdefault", "clear"};
const std::vector<std::string> kDictMutating = {"pop", "popitem", "update", "setdefault", "clear"};
const std::vector<std::string> kListMethods = {"index", "count", "copy", "append", "extend", "insert",
                                               "pop", "remove", "sort", "reverse", "clear"};
const std::vector<std::string> kListMutating = {"append", "extend", "insert", "pop", "remove", "sort",
                                                "reverse", "clear"};

bool in(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::optional<std::string> optional_string(const Value& v, const char* what) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_string()) fail(what, " arg must be None or str");
  return v.str();
}

int64_t int_arg(const Value& v, int64_t dflt) {
  if (v.is_undefined() || v.is_none()) return dflt;
  if (!v.is_int() && !v.is_bool()) fail("'", v.type_name(), "' object cannot be interpreted as an integer");
  return v.as_int();
}

std::vector<Value> strings_to_values(const std::vector<std::string>& parts) {
  std::vector<Value> out;
  for (const auto& p : parts) out.push_back(Value::string(p));
  return out;
}

// Python converts code-unit offsets; we report code-point offsets like Python does.
int64_t code_point_offset(const std::string& s, size_t byte_offset) {
  return static_cast<int64_t>(code_point_count(std::string_view(s).substr(0, byte_offset)));
}

bool all_chars(const std::string& s, int (*pred)(int)) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (c >= 0x80 || !pred(c)) return false;
  return true;
}

bool affix_match(const Value& self, const Value& affix, bool at_start) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) fail(at_start ? "startswith" : "endswith", " first arg must be str or a tuple of str");
    const std::string &s = self.str(), &x = a.str();
    if (x.size() > s.size()) return false;
    return at_start ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_tuple()) {
    for (const Value& a : affix.items())
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

Value string_method(const Value& self, const std::string& name, CallArgs& args, Interpreter& in) {
  const std::string& s = self.str();
  auto bind = [&](const std::vector<std::string>& names, const std::vector<Value>& defaults = {}) {
    return bind_args("str." + name + "()", args, names, defaults);
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const auto a = bind({"chars"});
    return Value::string(python_strip(s, optional_string(a[0], name.c_str()), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const auto a = bind({"sep", "maxsplit"});
    const auto sep = optional_string(a[0], name.c_str());
    if (sep && sep->empty()) fail("empty separator");
    return Value::list(strings_to_values(python_split(s, sep, int_arg(a[1], -1), name == "rsplit")));
  }
  if (name == "splitlines") {
    const auto a = bind({"keepends"});
    if (a[0].truthy()) fail("unsupported: str.splitlines(keepends=True)");
    return Value::list(strings_to_values(python_splitlines(s)));
  }
  if (name == "startswith" || name == "endswith") {
    const auto a = bind({"prefix", "start", "end"});
    if (!a[1].is_undefined() || !a[2].is_undefined()) fail("unsupported: str.", name, " with start/end");
    return Value::boolean(affix_match(self, a[0], name == "startswith"));
  }
  if (name == "upper") { bind({}); return Value::string(ascii_upper(s)); }
  if (name == "lower" || name == "casefold") { bind({}); return Value::string(ascii_lower(s)); }
  if (name == "title") { bind({}); return Value::string(python_str_title(s)); }
  if (name == "capitalize") { bind({}); return Value::string(python_capitalize(s)); }
  if (name == "replace") {
    const auto a = bind({"old", "new", "count"});
    if (!a[0].is_string() || !a[1].is_string()) fail("replace() arguments must be str");
    std::string r = python_replace(s, a[0].str(), a[1].str(), int_arg(a[2], -1));
    if (r.size() > in.limits().max_output_bytes) fail("string too large");
    return Value::string(std::move(r));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const auto a = bind({"sub", "start", "end"});
    if (!a[0].is_string()) fail("must be str, not ", a[0].type_name());
    if (!a[1].is_undefined() || !a[2].is_undefined()) fail("unsupported: str.", name, " with start/end");
    const size_t k = (name[0] == 'r') ? s.rfind(a[0].str()) : s.find(a[0].str());
    if (k == std::string::npos) {
      if (name.find("index") != std::string::npos) fail("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(code_point_offset(s, k));
  }
  if (name == "count") {
    const auto a = bind({"sub"});
    if (!a[0].is_string()) fail("must be str, not ", a[0].type_name());
    return Value::integer(python_count(s, a[0].str()));
  }
  if (name == "join") {
    const auto a = bind({"iterable"});
    std::string out;
    bool first = true;
    for (const Value& v : iterate(a[0])) {
      if (!v.is_string()) fail("sequence item: expected str instance, ", v.type_name(), " found");
      if (!first) out += s;
      first = false;
      out += v.str();
      if (out.size() > in.limits().max_output_bytes) fail("string too large");
    }
    return Value::string(std::move(out));
  }
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") { bind({}); return Value::boolean(all_chars(s, isdigit)); }
  if (name == "isalpha") { bind({}); return Value::boolean(all_chars(s, isalpha)); }
  if (name == "isalnum") { bind({}); return Value::boolean(all_chars(s, isalnum)); }
  if (name == "isspace") {
    bind({});
    const auto cps = to_code_points(s);
    return Value::boolean(!cps.empty() && std::all_of(cps.begin(), cps.end(), is_python_space));
  }
  if (name == "islower" || name == "isupper") {
    bind({});
    bool cased = false;
    for (char c : s) {
      if (name == "islower" && c >= 'A' && c <= 'Z') return Value::boolean(false);
      if (name == "isupper" && c >= 'a' && c <= 'z') return Value::boolean(false);
      cased = cased || std::isalpha(static_cast<unsigned char>(c));
    }
    return Value::boolean(cased);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const auto a = bind({"affix"});
    if (!a[0].is_string()) fail(name, "() argument must be str");
    const bool prefix = name == "removeprefix";
    if (!affix_match(self, a[0], prefix)) return self;
    const size_t n = a[0].str().size();
    return Value::string(prefix ? s.substr(n) : s.substr(0, s.size() - n));
  }
  fail("unsupported string method '", name, "'");
}

Value dict_method(const Value& self, const std::string& name, CallArgs& args) {
  const auto& entries = self.dict_data()->entries;
  auto bind = [&](const std::vector<std::string>& names) { return bind_args("dict." + name + "()", args, names, {}); };
  if (name == "get") {
    const auto a = bind({"key", "default"});
    if (args.positional.empty()) fail("get expected at least 1 argument, got 0");
    if (const Value* v = self.dict_data()->find(a[0])) return *v;
    return a[1].is_undefined() ? Value::none() : a[1];
  }
  if (name == "items" || name == "keys" || name == "values") {
    bind({});
    std::vector<Value> out;
    for (const auto& [k, v] : entries) {
      if (name == "items") out.push_back(Value::list({k, v}, true));
      else out.push_back(name == "keys" ? k : v);
    }
    return Value::list(std::move(out));
  }
  if (name == "copy") {
    bind({});
    auto data = std::make_shared<DictData>(*self.dict_data());
    return Value::dict(data);
  }
  fail("unsupported dict method '", name, "'");
}

Value list_method(const Value& self, const std::string& name, CallArgs& args) {
  auto bind = [&](const std::vector<std::string>& names) { return bind_args("list." + name + "()", args, names, {}); };
  if (name == "index") {
    const auto a = bind({"value"});
    const auto& items = self.items();
    for (size_t k = 0; k < items.size(); ++k)
      if (values_equal(items[k], a[0])) return Value::integer(static_cast<int64_t>(k));
    fail(a[0].repr(), " is not in list");
  }
  if (name == "count") {
    const auto a = bind({"value"});
    int64_t n = 0;
    for (const Value& v : self.items()) n += values_equal(v, a[0]);
    return Value::integer(n);
  }
  if (name == "copy") { bind({}); return Value::list(self.items(), self.is_tuple()); }
  fail("unsupported list method '", name, "'");
}

}  // namespace

bool is_known_method(const Value& receiver, const std::string& name) {
  if (receiver.is_string()) return in(kStringMethods, name);
  if (receiver.is_dict()) return in(kDictMethods, name);
  if (receiver.is_list() && !receiver.is_generator()) {
    if (receiver.is_tuple()) return name == "index" || name == "count";
    return in(kListMethods, name);
  }
  return false;
}

bool is_mutating_method(const Value& receiver, const std::string& name) {
  if (receiver.is_dict()) return in(kDictMutating, name);
  if (receiver.is_list()) return in(kListMutating, name);
  return false;
}

Value call_method(const Value& receiver, const std::string& name, CallArgs& args, Interpreter& in) {
  if (receiver.is_string()) return string_method(receiver, name, args, in);
  if (receiver.is_dict()) return dict_method(receiver, name, args);
  if (receiver.is_list()) return list_method(receiver, name, args);
  fail("'", receiver.type_name(), "' object has no method '", name, "'");
}

}  // namespace polykv::jinja
