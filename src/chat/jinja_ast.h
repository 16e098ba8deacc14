// Syntax tree of a parsed Jinja template. Expressions and statements are tagged structs: the
// interpreter switches on `kind`. Every node records its template line for error messages.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace polykv::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,    // value
    Name,       // name
    List,       // args = items
    Tuple,      // args = items
    Dict,       // args = key0, value0, key1, value1, ...
    Attr,       // args[0].name
    Item,       // args[0][args[1]]
    Slice,      // args[0][args[1]:args[2]:args[3]] (null parts are omitted bounds)
    Call,       // args[0](args[1..], kwargs)
    Filter,     // args[0] | name(args[1..], kwargs)
    Test,       // args[0] is name(args[1..], kwargs); negated when `is not`
    Not,        // not args[0]
    Negate,     // -args[0]
    Plus,       // +args[0]
    Binary,     // args[0] op args[1] for + - * / // % ** ~
    Compare,    // args[0] ops[0] args[1] ops[1] args[2] ... (ops: == != < <= > >= in notin)
    And,
    Or,
    Conditional,  // args[1] if args[0] else args[2] (args[2] may be null: undefined)
  };
  Kind kind;
  int line = 0;
  Value value;                 // Literal
  std::string name;            // Name, Attr, Filter, Test; operator for Binary
  std::vector<std::string> ops;  // Compare
  bool negated = false;        // Test
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null when required
};

struct Stmt {
  enum class Kind {
    Text,        // text
    Print,       // {{ expr }}
    If,          // conditions[i] -> bodies[i]; else_body
    For,         // for targets in expr [if filter] body [else else_body]
    Set,         // set targets = expr   (or attr_target.attr = expr when attr_object set)
    SetBlock,    // set targets[0] [| filters] body endset
    Macro,       // macro name(params) body
    CallBlock,   // call[(caller params)] expr body endcall
    FilterBlock, // filter <filter chain applied to a placeholder> body endfilter
    Break,
    Continue,
  };
  Kind kind;
  int line = 0;
  std::string text;                 // Text; Macro name; Set attribute name (for ns.attr)
  ExprPtr expr;                     // Print, For iterable, Set value, CallBlock call, FilterBlock chain
  ExprPtr filter;                   // For `if` filter; SetBlock filter chain
  std::vector<std::string> targets; // For / Set / SetBlock names
  bool targets_tuple = false;       // `for a, b in` / `set a, b =` (unpack even one name: `for a, in`)
  std::string attr_object;          // Set into a namespace attribute: attr_object.text = expr
  std::vector<ExprPtr> conditions;  // If
  std::vector<Body> bodies;         // If branches; For/Set/Macro/... body is bodies[0]
  Body else_body;                   // If / For
  std::vector<MacroParam> params;   // Macro, CallBlock (caller's params)
  // Macro / CallBlock: whether the body reads varargs / kwargs / caller (filled by validation; decides
  // whether extra arguments are accepted, as in Jinja).
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
};

// The placeholder name a {% filter %} / {% set x | f %} chain is applied to.
inline constexpr const char* kFilterBlockInput = "\x01filter_block_input";

}  // namespace polykv::jinja
