#include "chat/jinja_json.h"

#include <algorithm>
#include <cmath>

#include "chat/jinja_text.h"
#include "core/error.h"

namespace polykv::jinja {

namespace {

// Recursion depth is checked on the way down (depth = containers enclosing j), so a deep document
// built in memory fails here after kMaxValueNesting frames instead of overflowing the stack. Input
// from outside is already held to the same depth by parse_json_limited (core/json_limits.h).
template <typename Json>
Value convert_json(const Json& j, uint32_t depth) {
  switch (j.type()) {
    case Json::value_t::null: return Value::none();
    case Json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case Json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::floating(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float: return Value::floating(j.template get<double>());
    case Json::value_t::string: return Value::string(j.template get<std::string>());
    case Json::value_t::array: {
      check_nesting(depth + 1);
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(convert_json(e, depth + 1));
      return Value::list(std::move(items));
    }
    case Json::value_t::object: {
      check_nesting(depth + 1);
      auto data = std::make_shared<DictData>();
      data->entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it)
        data->entries.emplace_back(Value::string(it.key()), convert_json(it.value(), depth + 1));
      return Value::dict(data);
    }
    default: fail("unsupported JSON value type in chat template input");
  }
}

}  // namespace

Value value_from_json(const nlohmann::json& j) { return convert_json(j, 0); }
Value value_from_json(const nlohmann::ordered_json& j) { return convert_json(j, 0); }

namespace {

struct Dumper {
  const JsonDumpOptions& opt;
  std::string out;
  int depth = 0;

  std::string item_sep() const { return opt.item_separator ? *opt.item_separator : (opt.indent ? "," : ", "); }
  std::string key_sep() const { return opt.key_separator ? *opt.key_separator : ": "; }

  void newline_indent(int level) {
    out += '\n';
    for (int k = 0; k < level; ++k) out += *opt.indent;
  }

  std::string float_text(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
    return python_float_repr(d);
  }

  std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::String: return k.str();
      case Value::Kind::Bool: return k.as_bool() ? "true" : "false";
      case Value::Kind::Int: return std::to_string(k.as_int());
      case Value::Kind::Float: return float_text(k.as_double());
      case Value::Kind::None: return "null";
      default: fail("keys must be str, int, float, bool or None, not ", k.type_name());
    }
  }

  void dump(const Value& v) {
    check(depth < 512, "tojson: nesting too deep");
    switch (v.kind()) {
      case Value::Kind::None: out += "null"; return;
      case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::Int: out += std::to_string(v.as_int()); return;
      case Value::Kind::Float: out += float_text(v.as_double()); return;
      case Value::Kind::String: out += json_quote(v.str(), opt.ensure_ascii); return;
      case Value::Kind::List: {
        if (v.is_generator()) break;
        const auto& items = v.items();
        if (items.empty()) { out += "[]"; return; }
        out += '[';
        ++depth;
        for (size_t k = 0; k < items.size(); ++k) {
          if (k) out += item_sep();
          if (opt.indent) newline_indent(depth);
          dump(items[k]);
        }
        --depth;
        if (opt.indent) newline_indent(depth);
        out += ']';
        return;
      }
      case Value::Kind::Dict: {
        std::vector<std::pair<Value, Value>> entries = v.dict_data()->entries;
        if (entries.empty()) { out += "{}"; return; }
        if (opt.sort_keys)
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto& a, const auto& b) { return value_less(a.first, b.first); });
        out += '{';
        ++depth;
        bool first = true;
        for (const auto& [k, val] : entries) {
          if (!first) out += item_sep();
          first = false;
          if (opt.indent) newline_indent(depth);
          out += json_quote(key_text(k), opt.ensure_ascii);
          out += key_sep();
          dump(val);
        }
        --depth;
        if (opt.indent) newline_indent(depth);
        out += '}';
        return;
      }
      default: break;
    }
    fail("Object of type ", v.type_name(), " is not JSON serializable");
  }
};

}  // namespace

std::string python_json_dumps(const Value& v, const JsonDumpOptions& options) {
  Dumper d{options, {}, 0};
  d.dump(v);
  return std::move(d.out);
}

}  // namespace polykv::jinja
