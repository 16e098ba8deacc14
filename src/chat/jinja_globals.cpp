// Global functions available to templates: Jinja's range / dict / namespace and transformers'
// raise_exception / strftime_now.
#include "chat/jinja_globals.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace polykv::jinja {

void install_globals(Scope& scope, const std::optional<std::tm>& now) {
  scope.vars["raise_exception"] = Value::callable("raise_exception", [](Interpreter&, CallArgs& args) -> Value {
    const auto a = bind_args("raise_exception()", args, {"message"}, {});
    fail("raise_exception: ", a[0].to_str());
  });
  scope.vars["strftime_now"] = Value::callable("strftime_now", [now](Interpreter&, CallArgs& args) {
    const auto a = bind_args("strftime_now()", args, {"format"}, {});
    if (!a[0].is_string()) fail("strftime_now() argument must be str");
    std::tm tm{};
    if (now) {
      tm = *now;
    } else {
      const std::time_t t = std::time(nullptr);
      localtime_r(&t, &tm);
    }
    char buf[512];
    const size_t n = std::strftime(buf, sizeof buf, a[0].str().c_str(), &tm);
    if (n == 0 && !a[0].str().empty()) fail("strftime_now(): format too long or empty result");
    return Value::string(std::string(buf, n));
  });
  scope.vars["range"] = Value::callable("range", [](Interpreter& in, CallArgs& args) {
    if (!args.keyword.empty()) fail("range() takes no keyword arguments");
    const auto& p = args.positional;
    if (p.empty() || p.size() > 3) fail("range expected 1 to 3 arguments, got ", p.size());
    for (const Value& v : p)
      if (!v.is_int() && !v.is_bool()) fail("'", v.type_name(), "' object cannot be interpreted as an integer");
    int64_t start = 0, stop, step = 1;
    if (p.size() == 1) stop = p[0].as_int();
    else { start = p[0].as_int(); stop = p[1].as_int(); }
    if (p.size() == 3) step = p[2].as_int();
    if (step == 0) fail("range() arg 3 must not be zero");
    const double count = step > 0 ? std::max(0.0, std::ceil((static_cast<double>(stop) - start) / step))
                                  : std::max(0.0, std::ceil((static_cast<double>(start) - stop) / -static_cast<double>(step)));
    if (count > static_cast<double>(in.limits().max_range))
      fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (", in.limits().max_range, ").");
    std::vector<Value> out;
    for (int64_t k = 0, v = start; k < static_cast<int64_t>(count); ++k, v += step) out.push_back(Value::integer(v));
    return Value::list(std::move(out));
  });
  auto mapping_from_args = [](CallArgs& args, const char* what) {
    auto data = std::make_shared<DictData>();
    if (args.positional.size() > 1) fail(what, " expected at most 1 positional argument");
    if (!args.positional.empty()) {
      const Value& init = args.positional[0];
      if (init.is_dict()) {
        data->entries = init.dict_data()->entries;
      } else {
        for (const Value& pair : iterate(init)) {
          const auto kv = iterate(pair);
          if (kv.size() != 2) fail(what, ": sequence elements must have length 2");
          data->set(kv[0], kv[1]);
        }
      }
    }
    for (auto& [k, v] : args.keyword) data->set(Value::string(k), v);
    return data;
  };
  scope.vars["namespace"] = Value::callable("namespace", [mapping_from_args](Interpreter& in, CallArgs& args) {
    auto data = mapping_from_args(args, "namespace()");
    in.register_for_cleanup(data);  // a namespace can be made to contain itself
    return Value::name_space(data);
  });
  scope.vars["dict"] = Value::callable("dict", [mapping_from_args](Interpreter&, CallArgs& args) {
    return Value::dict(mapping_from_args(args, "dict()"));
  });
}

}  // namespace polykv::jinja
