// Runtime values of the Jinja subset that renders chat templates. They mirror the Python objects
// jinja2 hands a template (str, int, float, bool, None, list, dict, jinja2's Undefined and
// namespace), because chat templates are written against Python semantics: truthiness, equality
// across int/float/bool, str() and repr() formatting, slicing by code point.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dspark::serve::jinja {

// An evaluation error that does not yet know where in the template it happened; the renderer
// turns it into a dspark::Error carrying the line and column of the expression being evaluated.
class EvalError : public std::runtime_error {
 public:
  explicit EvalError(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void eval_fail(fmt::format_string<Args...> format, Args&&... args) {
  throw EvalError(fmt::format(format, std::forward<Args>(args)...));
}

class Value;
using List = std::vector<Value>;
// Insertion-ordered like a Python dict; chat-template dicts are small, so lookups scan.
using Dict = std::vector<std::pair<std::string, Value>>;

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
using Function = std::function<Value(const CallArgs&)>;

class Value {
 public:
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace,
                    kFunction };

  // Undefined; `hint` says what was missing ("'x' is undefined") for the error raised when the
  // template goes on to use it.
  Value() = default;
  static Value undefined(std::string hint);
  static Value none();
  Value(bool b);                       // NOLINT: implicit like Python's literals
  Value(int64_t i);                    // NOLINT
  Value(int i) : Value(int64_t{i}) {}  // NOLINT
  Value(double d);                     // NOLINT
  Value(std::string s);                // NOLINT
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT
  Value(List list);                    // NOLINT
  Value(Dict dict);                    // NOLINT
  // The mutable attribute bag of `namespace(...)`: copies share it, so `set ns.x = ...` inside a
  // loop is seen after the loop.
  static Value make_namespace(Dict attributes);
  // A list that prints as a Python tuple, "(1, 2)": what `a, b` literals and dict.items() give.
  static Value tuple(List items);
  static Value function(std::string name, Function fn);
  static Value from_json(const nlohmann::json& json);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::kUndefined; }
  bool is_none() const { return type_ == Type::kNone; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_number() const { return type_ == Type::kInt || type_ == Type::kFloat; }
  bool is_list() const { return type_ == Type::kList; }
  bool is_dict() const { return type_ == Type::kDict; }
  bool is_namespace() const { return type_ == Type::kNamespace; }
  bool is_function() const { return type_ == Type::kFunction; }

  bool as_bool() const { return bool_; }
  int64_t as_int() const { return type_ == Type::kBool ? int64_t{bool_} : int_; }
  double as_float() const { return type_ == Type::kFloat ? float_ : static_cast<double>(as_int()); }
  const std::string& as_string() const { return *string_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }  // also a namespace's attributes
  Dict& namespace_attributes() const { return *dict_; }
  const Function& as_function() const { return *function_; }
  const std::string& function_name() const { return *string_; }
  const std::string& undefined_hint() const { return *string_; }

  // Python's bool(x); Undefined is falsy.
  bool truthy() const;
  // Python's str(x) as jinja2 prints it: Undefined prints nothing, None prints "None".
  std::string to_string() const;
  // Python's repr(x): how lists and dicts print their items.
  std::string repr() const;
  // json.dumps(x, ensure_ascii=False, indent=indent) as transformers' tojson filter writes it;
  // indent < 0 means single-line.
  std::string to_json(int indent = -1) const;
  // The Python type name used in error messages ("str", "list", "dict", ...).
  std::string type_name() const;

  // For dicts and namespaces: the member, or nullptr.
  const Value* find(const std::string& key) const;

 private:
  Type type_ = Type::kUndefined;
  bool bool_ = false;  // for lists: printed as a tuple
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> string_;  // string, function name or undefined hint
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Function> function_;
};

// Python's ==: 1 == 1.0 == True, lists and dicts compare by items, Undefined equals Undefined.
bool operator==(const Value& a, const Value& b);

}  // namespace dspark::serve::jinja
