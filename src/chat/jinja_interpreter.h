// Evaluates a parsed template with Jinja2 semantics (as configured by transformers: sandboxed,
// immutable containers, default Undefined). Scoping follows Jinja: each for-loop iteration, macro
// call and block body gets a child scope, so `set` inside them does not leak out; `if` does not
// create a scope. Resource limits make hostile templates fail with polykv::Error instead of
// exhausting memory, time or the C++ stack.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace polykv::jinja {

struct Limits {
  size_t max_output_bytes = 64u << 20;     // total text produced (output, macro results, strings)
  int64_t max_loop_iterations = 5'000'000;  // over the whole render
  int max_eval_depth = 1500;                // nested evaluation frames (macro recursion included)
  int64_t max_range = 100000;               // jinja2.sandbox.MAX_RANGE
};

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
  explicit Scope(std::shared_ptr<Scope> p = nullptr) : parent(std::move(p)) {}
  const Value* lookup(const std::string& name) const;
};

class Interpreter {
 public:
  explicit Interpreter(Limits limits = {}) : limits_(limits) {}
  // Breaks the reference cycles a render can create (a macro stored in the scope it captures, a
  // namespace holding itself) by clearing the scopes and namespaces registered below.
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;
  void register_for_cleanup(std::shared_ptr<Scope> scope) { cleanup_scopes_.push_back(std::move(scope)); }
  void register_for_cleanup(std::shared_ptr<DictData> ns) { cleanup_namespaces_.push_back(std::move(ns)); }

  // Renders `body` with `root` holding the context variables and globals.
  std::string render(const Body& body, const std::shared_ptr<Scope>& root);

  Value eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value call(const Value& callee, CallArgs& args, int line);
  Value get_attr(const Value& obj, const std::string& name, int line);
  Value get_item(const Value& obj, const Value& key, int line);
  // Filters and tests by name (see jinja_filters.cpp / jinja_tests.cpp).
  Value apply_filter(const std::string& name, const Value& input, CallArgs& args, int line);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args, int line);

  const Limits& limits() const { return limits_; }
  void charge_output(size_t bytes);  // accounts produced text against max_output_bytes
  void charge_iterations(int64_t n);

 private:
  enum class Flow { Normal, Break, Continue };

  Flow exec_body(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow exec(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  void exec_set(const Stmt& s, const std::shared_ptr<Scope>& scope);
  Value make_macro(const Stmt& s, const std::shared_ptr<Scope>& scope);
  Value eval_compare(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value eval_call(const Expr& e, const std::shared_ptr<Scope>& scope, const Value* caller);
  void eval_args(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope, CallArgs& args);

  struct DepthGuard {
    Interpreter& in;
    explicit DepthGuard(Interpreter& i, int line);
    ~DepthGuard() { --in.depth_; }
  };

  Limits limits_;
  int depth_ = 0;
  size_t output_bytes_ = 0;
  int64_t iterations_ = 0;
  std::vector<std::shared_ptr<Scope>> cleanup_scopes_;
  std::vector<std::shared_ptr<DictData>> cleanup_namespaces_;
};

// Python semantics of the operators (jinja_operators.cpp).
Value binary_op(const std::string& op, const Value& a, const Value& b, Interpreter& in);
bool contains(const Value& container, const Value& item);
Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Calls str/dict/list methods ("  x ".strip(), d.get("k")) (jinja_methods.cpp).
Value call_method(const Value& receiver, const std::string& name, CallArgs& args, Interpreter& in);
bool is_known_method(const Value& receiver, const std::string& name);
bool is_mutating_method(const Value& receiver, const std::string& name);
bool has_filter(const std::string& name);
bool has_test(const std::string& name);
// Compile-time checks mirroring Jinja: unknown filters/tests outside `if` fail; marks macro bodies
// that read varargs/kwargs/caller (jinja_validate.cpp).
void validate_template(Body& body);

// Binds positional + keyword arguments to parameter names (Python style); missing ones with no
// default are Undefined. Throws on unknown or duplicate keywords and on too many positionals.
std::vector<Value> bind_args(const std::string& what, CallArgs& args, const std::vector<std::string>& names,
                             const std::vector<Value>& defaults);

}  // namespace polykv::jinja
