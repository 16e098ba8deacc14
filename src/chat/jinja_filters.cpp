// Jinja filters with jinja2.filters semantics, plus transformers' tojson (json.dumps). Filters that
// yield in Python (map, select*, reject*, unique, items, batch, reverse of a list) return generator
// values so that len()/tojson on them fail exactly as they do in Python.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>

#include "chat/jinja_interpreter.h"
#include "chat/jinja_json.h"
#include "chat/jinja_text.h"
#include "core/error.h"

namespace polykv::jinja {
namespace {

using FilterFn = std::function<Value(Interpreter&, const Value&, CallArgs&)>;

std::vector<Value> bind(const char* filter, CallArgs& args, const std::vector<std::string>& names,
                        const std::vector<Value>& defaults = {}) {
  return bind_args(std::string("filter '") + filter + "'", args, names, defaults);
}

Value generator(std::vector<Value> items) { return Value::list(std::move(items), false, true); }

// Iteration used by filters: like Python iter(), but a falsy input (None, Undefined) yields nothing
// where the filter starts with `if value:`.
std::vector<Value> iterate_if_truthy(const Value& v) { return v.truthy() ? iterate(v) : std::vector<Value>{}; }

// jinja2.filters.make_attrgetter: "a.b.0" walks items with environment.getitem.
Value lookup_attribute(Interpreter& in, const Value& item, const Value& attribute, const Value& dflt = Value()) {
  Value cur = item;
  if (attribute.is_int()) {
    cur = in.get_item(cur, attribute, 0);
  } else {
    const std::string path = attribute.to_str();
    size_t start = 0;
    while (true) {
      const size_t dot = path.find('.', start);
      const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
      int64_t index = 0;
      const bool fits = digits && std::from_chars(part.data(), part.data() + part.size(), index).ec == std::errc();
      // A digit run past int64 indexes nothing that can exist: Python's getitem fails, giving undefined.
      if (digits && !fits) return dflt.is_undefined() ? Value() : dflt;
      cur = in.get_item(cur, digits ? Value::integer(index) : Value::string(part), 0);
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  }
  if (cur.is_undefined() && !dflt.is_undefined()) return dflt;
  return cur;
}

// Sort key: lower-cased strings unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(ascii_lower(v.str()));
  return v;
}

std::vector<Value> sorted_values(std::vector<Value> items, const std::function<Value(const Value&)>& key,
                                 bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& v : items) keyed.emplace_back(key(v), v);
  // Python's sort is stable; reverse=True keeps equal elements in original order too.
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& a, const auto& b) {
    return reverse ? value_less(b.first, a.first) : value_less(a.first, b.first);
  });
  std::vector<Value> out;
  for (auto& [k, v] : keyed) out.push_back(v);
  return out;
}

Value select_or_reject(Interpreter& in, const Value& input, CallArgs& args, bool select, bool by_attribute) {
  if (!args.keyword.empty()) fail("unsupported: keyword arguments to select/reject filters");
  size_t off = 0;
  Value attribute;
  if (by_attribute) {
    if (args.positional.empty()) fail("missing attribute for selectattr/rejectattr");
    attribute = args.positional[0];
    off = 1;
  }
  std::string test_name;
  CallArgs test_args;
  const bool has_test_name = args.positional.size() > off;
  if (has_test_name) {
    test_name = args.positional[off].to_str();
    test_args.positional.assign(args.positional.begin() + static_cast<long>(off) + 1, args.positional.end());
  }
  std::vector<Value> out;
  for (const Value& item : iterate_if_truthy(input)) {
    const Value probe = by_attribute ? lookup_attribute(in, item, attribute) : item;
    CallArgs a = test_args;
    const bool passed = has_test_name ? in.apply_test(test_name, probe, a, 0) : probe.truthy();
    if (passed == select) out.push_back(item);
  }
  return generator(std::move(out));
}

std::string do_indent(const std::string& s_in, const Value& width, bool first, bool blank) {
  const std::string indention = width.is_string() ? width.str() : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  const std::string s = s_in + "\n";  // jinja2's quirk for splitlines
  std::vector<std::string> lines = python_splitlines(s);
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + indention : "") + lines[k];
  } else {
    rv = lines.empty() ? "" : lines[0];
    if (lines.size() > 1) {
      rv += "\n";
      for (size_t k = 1; k < lines.size(); ++k) {
        if (k > 1) rv += "\n";
        rv += lines[k].empty() ? lines[k] : indention + lines[k];
      }
    }
  }
  return first ? indention + rv : rv;
}

double to_double_arg(const Value& v, const char* filter) {
  if (!v.is_number()) fail("filter '", filter, "' needs a number, got ", v.type_name());
  return v.as_double();
}

// Python int(str): optional sign, digits with single underscores, surrounding whitespace.
bool parse_python_int(const std::string& text, int64_t& out) {
  const std::string t = python_strip(text, std::nullopt, true, true);
  size_t k = 0;
  bool negative = false;
  if (k < t.size() && (t[k] == '+' || t[k] == '-')) negative = t[k++] == '-';
  if (k >= t.size()) return false;
  int64_t v = 0;
  bool last_underscore = true;
  for (; k < t.size(); ++k) {
    if (t[k] == '_' && !last_underscore) { last_underscore = true; continue; }
    if (t[k] < '0' || t[k] > '9') return false;
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, t[k] - '0', &v)) return false;
    last_underscore = false;
  }
  if (last_underscore) return false;
  out = negative ? -v : v;
  return true;
}

bool parse_python_float(const std::string& text, double& out) {
  const std::string t = python_strip(text, std::nullopt, true, true);
  if (t.empty()) return false;
  std::string lower = ascii_lower(t);
  if (lower == "nan" || lower == "+nan" || lower == "-nan") { out = NAN; return true; }
  if (lower == "inf" || lower == "+inf" || lower == "infinity" || lower == "+infinity") { out = INFINITY; return true; }
  if (lower == "-inf" || lower == "-infinity") { out = -INFINITY; return true; }
  for (char c : t)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      return false;
  char* end = nullptr;
  out = std::strtod(t.c_str(), &end);
  return end && *end == '\0';
}

Value filter_tojson(Interpreter&, const Value& input, CallArgs& args) {
  const auto a = bind("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"},
                      {Value::boolean(false), Value::none(), Value::none(), Value::boolean(false)});
  JsonDumpOptions opt;
  opt.ensure_ascii = a[0].truthy();
  if (a[1].is_string()) opt.indent = a[1].str();
  else if (a[1].is_int() || a[1].is_bool()) opt.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, a[1].as_int())), ' ');
  else if (!a[1].is_none()) fail("tojson: indent must be an int or a string");
  if (!a[2].is_none()) {
    const auto seps = iterate(a[2]);
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string())
      fail("tojson: separators must be a pair of strings");
    opt.item_separator = seps[0].str();
    opt.key_separator = seps[1].str();
  }
  opt.sort_keys = a[3].truthy();
  return Value::string(python_json_dumps(input, opt));
}

std::map<std::string, FilterFn> build_registry() {
  std::map<std::string, FilterFn> f;
  f["tojson"] = filter_tojson;
  f["safe"] = [](Interpreter&, const Value& v, CallArgs& a) { bind("safe", a, {}); return Value::markup(v.to_str()); };
  f["string"] = [](Interpreter&, const Value& v, CallArgs& a) { bind("string", a, {}); return v.is_string() ? v : Value::string(v.to_str()); };
  f["escape"] = f["e"] = [](Interpreter&, const Value& v, CallArgs& a) {
    bind("escape", a, {});
    return v.is_markup() ? v : Value::markup(html_escape(v.to_str()));
  };
  f["forceescape"] = [](Interpreter&, const Value& v, CallArgs& a) {
    bind("forceescape", a, {});
    return Value::markup(html_escape(v.to_str()));
  };
  const FilterFn length = [](Interpreter&, const Value& v, CallArgs& a) {
    bind("length", a, {});
    return Value::integer(value_length(v));
  };
  f["length"] = f["count"] = length;
  f["trim"] = [](Interpreter&, const Value& v, CallArgs& a) {
    const auto p = bind("trim", a, {"chars"});
    std::optional<std::string> chars;
    if (p[0].is_string()) chars = p[0].str();
    return Value::string(python_strip(v.to_str(), chars, true, true));
  };
  f["upper"] = [](Interpreter&, const Value& v, CallArgs& a) { bind("upper", a, {}); return Value::string(ascii_upper(v.to_str())); };
  f["lower"] = [](Interpreter&, const Value& v, CallArgs& a) { bind("lower", a, {}); return Value::string(ascii_lower(v.to_str())); };
  f["capitalize"] = [](Interpreter&, const Value& v, CallArgs& a) { bind("capitalize", a, {}); return Value::string(python_capitalize(v.to_str())); };
  f["title"] = [](Interpreter&, const Value& v, CallArgs& a) { bind("title", a, {}); return Value::string(jinja_title(v.to_str())); };
  f["replace"] = [](Interpreter& in, const Value& v, CallArgs& a) {
    const auto p = bind("replace", a, {"old", "new", "count"}, {Value(), Value(), Value::none()});
    if (p[0].is_undefined() || p[1].is_undefined()) fail("filter 'replace' needs old and new");
    const int64_t count = p[2].is_none() ? -1 : p[2].as_int();
    std::string r = python_replace(v.to_str(), p[0].to_str(), p[1].to_str(), count);
    if (r.size() > in.limits().max_output_bytes) fail("string too large");
    return Value::string(std::move(r));
  };
  const FilterFn dflt = [](Interpreter&, const Value& v, CallArgs& a) {
    const auto p = bind("default", a, {"default_value", "boolean"}, {Value::string(""), Value::boolean(false)});
    if (v.is_undefined() || (p[1].truthy() && !v.truthy())) return p[0];
    return v;
  };
  f["default"] = f["d"] = dflt;
  f["list"] = [](Interpreter&, const Value& v, CallArgs& a) { bind("list", a, {}); return Value::list(iterate(v)); };
  f["first"] = [](Interpreter&, const Value& v, CallArgs& a) {
    bind("first", a, {});
    const auto items = iterate(v);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  };
  f["last"] = [](Interpreter&, const Value& v, CallArgs& a) {
    bind("last", a, {});
    if (v.is_generator()) fail("'generator' object is not reversible");
    const auto items = iterate(v);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  };
  f["items"] = [](Interpreter&, const Value& v, CallArgs& a) {
    bind("items", a, {});
    if (v.is_undefined()) return generator({});
    if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
    std::vector<Value> out;
    for (const auto& [k, val] : v.dict_data()->entries) out.push_back(Value::list({k, val}, true));
    return generator(std::move(out));
  };
  f["dictsort"] = [](Interpreter&, const Value& v, CallArgs& a) {
    const auto p = bind("dictsort", a, {"case_sensitive", "by", "reverse"},
                        {Value::boolean(false), Value::string("key"), Value::boolean(false)});
    if (!v.is_dict()) fail("dictsort: expected a mapping, got ", v.type_name());
    const bool by_value = p[1].to_str() == "value";
    if (!by_value && p[1].to_str() != "key") fail("You can only sort by either \"key\" or \"value\"");
    std::vector<Value> pairs;
    for (const auto& [k, val] : v.dict_data()->entries) pairs.push_back(Value::list({k, val}, true));
    const bool cs = p[0].truthy();
    return Value::list(sorted_values(pairs, [&](const Value& pair) { return sort_key(pair.items()[by_value ? 1 : 0], cs); },
                                     p[2].truthy()));
  };
  f["sort"] = [](Interpreter& in, const Value& v, CallArgs& a) {
    const auto p = bind("sort", a, {"reverse", "case_sensitive", "attribute"},
                        {Value::boolean(false), Value::boolean(false), Value::none()});
    const bool cs = p[1].truthy();
    const Value attribute = p[2];
    return Value::list(sorted_values(iterate(v), [&](const Value& item) {
      return sort_key(attribute.is_none() ? item : lookup_attribute(in, item, attribute), cs);
    }, p[0].truthy()));
  };
  f["unique"] = [](Interpreter& in, const Value& v, CallArgs& a) {
    const auto p = bind("unique", a, {"case_sensitive", "attribute"}, {Value::boolean(false), Value::none()});
    std::vector<Value> seen, out;
    for (const Value& item : iterate(v)) {
      const Value key = sort_key(p[1].is_none() ? item : lookup_attribute(in, item, p[1]), p[0].truthy());
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, key); })) {
        seen.push_back(key);
        out.push_back(item);
      }
    }
    return generator(std::move(out));
  };
  f["reverse"] = [](Interpreter&, const Value& v, CallArgs& a) {
    bind("reverse", a, {});
    if (v.is_string()) return slice_value(v, Value::none(), Value::none(), Value::integer(-1));
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    return generator(std::move(items));
  };
  f["join"] = [](Interpreter& in, const Value& v, CallArgs& a) {
    const auto p = bind("join", a, {"d", "attribute"}, {Value::string(""), Value::none()});
    const std::string sep = p[0].to_str();
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v)) {
      if (!first) out += sep;
      first = false;
      out += (p[1].is_none() ? item : lookup_attribute(in, item, p[1])).to_str();
      if (out.size() > in.limits().max_output_bytes) fail("string too large");
    }
    return Value::string(std::move(out));
  };
  f["map"] = [](Interpreter& in, const Value& v, CallArgs& a) {
    std::vector<Value> out;
    const Value* attribute = nullptr;
    Value dflt;
    for (const auto& [k, val] : a.keyword) {
      if (k == "attribute") attribute = &val;
      else if (k == "default") dflt = val;
      else if (attribute == nullptr) fail("filter 'map' got an unexpected keyword argument '", k, "'");
    }
    if (attribute) {
      for (const Value& item : iterate_if_truthy(v)) out.push_back(lookup_attribute(in, item, *attribute, dflt));
      return generator(std::move(out));
    }
    if (a.positional.empty()) fail("map requires a filter argument");
    const std::string filter = a.positional[0].to_str();
    for (const Value& item : iterate_if_truthy(v)) {
      CallArgs fa;
      fa.positional.assign(a.positional.begin() + 1, a.positional.end());
      fa.keyword = a.keyword;
      out.push_back(in.apply_filter(filter, item, fa, 0));
    }
    return generator(std::move(out));
  };
  f["select"] = [](Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, true, false); };
  f["reject"] = [](Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, false, false); };
  f["selectattr"] = [](Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, true, true); };
  f["rejectattr"] = [](Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, false, true); };
  f["attr"] = [](Interpreter& in, const Value& v, CallArgs& a) {
    const auto p = bind("attr", a, {"name"});
    return in.get_attr(v, p[0].to_str(), 0);
  };
  f["int"] = [](Interpreter&, const Value& v, CallArgs& a) {
    const auto p = bind("int", a, {"default", "base"}, {Value::integer(0), Value::integer(10)});
    if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
    if (v.is_float()) {
      if (!std::isfinite(v.as_double()) || std::fabs(v.as_double()) > 9.2e18) return p[0];
      return Value::integer(static_cast<int64_t>(v.as_double()));
    }
    if (v.is_string()) {
      int64_t i;
      if (p[1].as_int() == 10 && parse_python_int(v.str(), i)) return Value::integer(i);
      double d;
      if (parse_python_float(v.str(), d) && std::isfinite(d) && std::fabs(d) < 9.2e18)
        return Value::integer(static_cast<int64_t>(d));
    }
    return p[0];
  };
  f["float"] = [](Interpreter&, const Value& v, CallArgs& a) {
    const auto p = bind("float", a, {"default"}, {Value::floating(0.0)});
    if (v.is_number()) return Value::floating(v.as_double());
    double d;
    if (v.is_string() && parse_python_float(v.str(), d)) return Value::floating(d);
    return p[0];
  };
  f["abs"] = [](Interpreter&, const Value& v, CallArgs& a) {
    bind("abs", a, {});
    if (v.is_float()) return Value::floating(std::fabs(v.as_double()));
    if (v.is_int() || v.is_bool()) {
      if (v.as_int() == INT64_MIN) fail("integer overflow");
      return Value::integer(std::llabs(v.as_int()));
    }
    fail("bad operand type for abs(): '", v.type_name(), "'");
  };
  f["round"] = [](Interpreter&, const Value& v, CallArgs& a) {
    const auto p = bind("round", a, {"precision", "method"}, {Value::integer(0), Value::string("common")});
    const double x = to_double_arg(v, "round");
    const int64_t precision = p[0].as_int();
    const std::string method = p[1].to_str();
    const double scale = std::pow(10.0, static_cast<double>(precision));
    double r;
    if (method == "common") r = std::nearbyint(x * scale) / scale;  // Python round(): half to even
    else if (method == "ceil") r = std::ceil(x * scale) / scale;
    else if (method == "floor") r = std::floor(x * scale) / scale;
    else fail("method must be common, ceil or floor");
    return Value::floating(r);
  };
  f["indent"] = [](Interpreter&, const Value& v, CallArgs& a) {
    const auto p = bind("indent", a, {"width", "first", "blank"},
                        {Value::integer(4), Value::boolean(false), Value::boolean(false)});
    if (!p[0].is_string() && !p[0].is_int() && !p[0].is_bool()) fail("indent: width must be an int or a string");
    return Value::string(do_indent(v.to_str(), p[0], p[1].truthy(), p[2].truthy()));
  };
  f["wordcount"] = [](Interpreter&, const Value& v, CallArgs& a) {
    bind("wordcount", a, {});
    int64_t n = 0;
    bool in_word = false;
    const std::string s = v.to_str();
    for (size_t i = 0; i < s.size();) {
      const char32_t c = decode_utf8(s, i);
      const bool word = c >= 0x80 ? !is_python_space(c) : (std::isalnum(static_cast<int>(c)) || c == '_');
      if (word && !in_word) ++n;
      in_word = word;
    }
    return Value::integer(n);
  };
  f["batch"] = [](Interpreter&, const Value& v, CallArgs& a) {
    const auto p = bind("batch", a, {"linecount", "fill_with"}, {Value(), Value::none()});
    if (!p[0].is_int() || p[0].as_int() <= 0) fail("batch: linecount must be a positive integer");
    const size_t n = static_cast<size_t>(p[0].as_int());
    std::vector<Value> out, cur;
    for (const Value& item : iterate(v)) {
      cur.push_back(item);
      if (cur.size() == n) { out.push_back(Value::list(std::move(cur))); cur.clear(); }
    }
    if (!cur.empty()) {
      if (!p[1].is_none()) while (cur.size() < n) cur.push_back(p[1]);
      out.push_back(Value::list(std::move(cur)));
    }
    return generator(std::move(out));
  };
  f["sum"] = [](Interpreter& in, const Value& v, CallArgs& a) {
    const auto p = bind("sum", a, {"attribute", "start"}, {Value::none(), Value::integer(0)});
    Value total = p[1];
    for (const Value& item : iterate(v))
      total = binary_op("+", total, p[0].is_none() ? item : lookup_attribute(in, item, p[0]), in);
    return total;
  };
  const auto min_max = [](bool want_max) {
    return [want_max](Interpreter& in, const Value& v, CallArgs& a) {
      const auto p = bind(want_max ? "max" : "min", a, {"case_sensitive", "attribute"},
                          {Value::boolean(false), Value::none()});
      const auto items = iterate(v);
      if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
      auto key = [&](const Value& item) {
        return sort_key(p[1].is_none() ? item : lookup_attribute(in, item, p[1]), p[0].truthy());
      };
      Value best = items[0];
      for (size_t k = 1; k < items.size(); ++k) {
        const bool better = want_max ? value_less(key(best), key(items[k])) : value_less(key(items[k]), key(best));
        if (better) best = items[k];
      }
      return best;
    };
  };
  f["max"] = min_max(true);
  f["min"] = min_max(false);
  f["center"] = [](Interpreter&, const Value& v, CallArgs& a) {
    const auto p = bind("center", a, {"width"}, {Value::integer(80)});
    const std::string s = v.to_str();
    const int64_t n = static_cast<int64_t>(code_point_count(s)), width = std::min<int64_t>(p[0].as_int(), 1 << 20);
    if (width <= n) return Value::string(s);
    const int64_t pad = width - n, left = pad / 2 + (pad & width & 1);
    return Value::string(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(pad - left), ' '));
  };
  return f;
}

const std::map<std::string, FilterFn>& registry() {
  static const std::map<std::string, FilterFn> filters = build_registry();
  return filters;
}

}  // namespace

bool has_filter(const std::string& name) { return registry().count(name) > 0; }

Value Interpreter::apply_filter(const std::string& name, const Value& input, CallArgs& args, int line) {
  const auto& filters = registry();
  auto it = filters.find(name);
  if (it == filters.end()) fail("template line ", line, ": No filter named '", name, "' found.");
  try {
    return it->second(*this, input, args);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind("template line ", 0) == 0) throw;
    fail("template line ", line, ": ", what);
  }
}

}  // namespace polykv::jinja
