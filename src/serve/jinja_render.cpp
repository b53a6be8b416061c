#include "serve/jinja_render.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "serve/jinja_builtins.h"
#include "serve/jinja_lexer.h"
#include "util/error.h"

namespace dspark::serve::jinja {

namespace {

bool is_numeric(const Value& v) { return v.is_number() || v.type() == Value::Type::kBool; }

[[noreturn]] void fail_undefined(const Value& v) {
  eval_fail("{}", v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
}

// Python's s[start:stop:step] index arithmetic.
std::vector<int64_t> slice_indices(int64_t n, const Value& start, const Value& stop,
                                   const Value& step_value) {
  const auto bound = [](const Value& v) -> const Value* {
    if (v.is_none() || v.is_undefined()) return nullptr;
    if (v.type() != Value::Type::kInt && v.type() != Value::Type::kBool) {
      eval_fail("slice indices must be integers or none, not {}", v.type_name());
    }
    return &v;
  };
  const Value* step_bound = bound(step_value);
  const int64_t step = step_bound ? step_bound->as_int() : 1;
  if (step == 0) eval_fail("slice step cannot be zero");
  const int64_t lower = step > 0 ? 0 : -1;
  const int64_t upper = step > 0 ? n : n - 1;
  const auto clamp = [&](const Value* v, int64_t fallback) {
    if (!v) return fallback;
    const int64_t i = v->as_int();
    return i < 0 ? std::max(i + n, lower) : std::min(i, upper);
  };
  const int64_t from = clamp(bound(start), step > 0 ? lower : upper);
  const int64_t to = clamp(bound(stop), step > 0 ? upper : lower);
  std::vector<int64_t> out;
  for (int64_t i = from; step > 0 ? i < to : i > to; i += step) out.push_back(i);
  return out;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return a.to_string() + b.to_string();
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool ints = (a.type() == Value::Type::kInt || a.type() == Value::Type::kBool) &&
                    (b.type() == Value::Type::kInt || b.type() == Value::Type::kBool);
  if (is_numeric(a) && is_numeric(b)) {
    const int64_t i = a.as_int(), j = b.as_int();
    const double x = a.as_float(), y = b.as_float();
    if (op == "+") return ints ? Value(i + j) : Value(x + y);
    if (op == "-") return ints ? Value(i - j) : Value(x - y);
    if (op == "*") return ints ? Value(i * j) : Value(x * y);
    if (op == "**") {
      if (ints && b.as_int() >= 0) {
        int64_t result = 1;
        for (int64_t i = 0; i < b.as_int(); ++i) result *= a.as_int();
        return result;
      }
      return std::pow(a.as_float(), b.as_float());
    }
    if (b.as_float() == 0) eval_fail("division by zero");
    if (op == "/") return a.as_float() / b.as_float();
    if (op == "//") {
      if (ints) {
        const int64_t q = a.as_int() / b.as_int();
        return (a.as_int() % b.as_int() != 0 && ((a.as_int() < 0) != (b.as_int() < 0))) ? q - 1 : q;
      }
      return std::floor(a.as_float() / b.as_float());
    }
    if (op == "%") {
      if (ints) {
        const int64_t r = a.as_int() % b.as_int();
        return (r != 0 && ((r < 0) != (b.as_int() < 0))) ? r + b.as_int() : r;
      }
      const double r = std::fmod(a.as_float(), b.as_float());
      return (r != 0 && ((r < 0) != (b.as_float() < 0))) ? r + b.as_float() : r;
    }
  }
  if (op == "+" && a.is_string() && b.is_string()) return a.as_string() + b.as_string();
  if (op == "+" && a.is_list() && b.is_list()) {
    List out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return out;
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.type() == Value::Type::kInt) {
    return arithmetic(op, b, a);
  }
  if (op == "*" && a.type() == Value::Type::kInt && (b.is_string() || b.is_list())) {
    if (b.is_string()) {
      std::string out;
      for (int64_t i = 0; i < a.as_int(); ++i) out += b.as_string();
      return out;
    }
    List out;
    for (int64_t i = 0; i < a.as_int(); ++i) {
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    }
    return out;
  }
  if (op == "%" && a.is_string()) eval_fail("printf-style string formatting is not supported");
  eval_fail("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name());
}

bool compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return a == b;
  if (op == "!=") return !(a == b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  int order;
  if (is_numeric(a) && is_numeric(b)) {
    order = a.as_float() < b.as_float() ? -1 : (a.as_float() > b.as_float() ? 1 : 0);
  } else if (a.is_string() && b.is_string()) {
    order = a.as_string().compare(b.as_string());
  } else {
    eval_fail("'{}' not supported between instances of '{}' and '{}'", op, a.type_name(),
              b.type_name());
  }
  if (op == "<") return order < 0;
  if (op == ">") return order > 0;
  if (op == "<=") return order <= 0;
  return order >= 0;
}

class Renderer {
 public:
  Renderer(const std::string& source, const Dict& variables) : source_(source) {
    scopes_.emplace_back();
    for (const auto& [name, value] : builtin_globals()) scopes_.back()[name] = value;
    for (const auto& [name, value] : variables) scopes_.back()[name] = value;
    scopes_.emplace_back();  // the template's own top-level `set`s
  }

  std::string run(const Body& body) {
    exec(body);
    return std::move(out_);
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  [[noreturn]] void fail_at(size_t offset, const std::string& message) const {
    fail("chat template: {}: {}", describe_position(source_, offset), message);
  }

  Flow exec(const Body& body) {
    for (const auto& node : body) {
      const Flow flow = exec(node);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec(const Node& node) {
    try {
      return exec_node(node);
    } catch (const EvalError& e) {
      fail_at(node.offset, e.what());
    }
  }

  Flow exec_node(const Node& node) {
    switch (node.kind) {
      case Node::Kind::kText: out_ += node.text; return Flow::kNormal;
      case Node::Kind::kOutput: out_ += eval(*node.expr).to_string(); return Flow::kNormal;
      case Node::Kind::kIf:
        for (size_t i = 0; i < node.conditions.size(); ++i) {
          if (eval(*node.conditions[i]).truthy()) return exec(node.bodies[i]);
        }
        if (node.bodies.size() > node.conditions.size()) return exec(node.bodies.back());
        return Flow::kNormal;
      case Node::Kind::kFor: exec_for(node); return Flow::kNormal;
      case Node::Kind::kSet: exec_set(node); return Flow::kNormal;
      case Node::Kind::kBreak: return Flow::kBreak;
      case Node::Kind::kContinue: return Flow::kContinue;
      case Node::Kind::kScope: return exec(node.bodies[0]);
    }
    return Flow::kNormal;
  }

  void bind_targets(const std::vector<std::string>& targets, const Value& value) {
    auto& scope = scopes_.back();
    if (targets.size() == 1) {
      scope[targets[0]] = value;
      return;
    }
    const auto items = iterate(value);
    if (items.size() != targets.size()) {
      eval_fail("cannot unpack {} value(s) into {} names", items.size(), targets.size());
    }
    for (size_t i = 0; i < targets.size(); ++i) scope[targets[i]] = items[i];
  }

  void exec_for(const Node& node) {
    const Value iterable = eval(*node.expr);
    if (!iterable.is_list() && !iterable.is_dict() && !iterable.is_string() &&
        !iterable.is_undefined()) {
      eval_fail("'{}' object is not iterable", iterable.type_name());
    }
    std::vector<Value> items = iterate(iterable);
    if (node.filter) {
      std::vector<Value> kept;
      for (const auto& item : items) {
        scopes_.emplace_back();
        bind_targets(node.targets, item);
        const bool keep = eval(*node.filter).truthy();
        scopes_.pop_back();
        if (keep) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      if (node.bodies.size() > 1) {
        scopes_.emplace_back();
        exec(node.bodies[1]);
        scopes_.pop_back();
      }
      return;
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      scopes_.emplace_back();
      bind_targets(node.targets, items[i]);
      scopes_.back()["loop"] = Value(Dict{
          {"index0", i},
          {"index", i + 1},
          {"revindex0", n - i - 1},
          {"revindex", n - i},
          {"first", i == 0},
          {"last", i == n - 1},
          {"length", n},
          {"previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item")},
          {"nextitem", i + 1 < n ? items[i + 1] : Value::undefined("there is no next item")},
          {"cycle", Value::function("loop.cycle", [i](const CallArgs& args) {
             if (args.positional.empty()) eval_fail("loop.cycle() needs at least one argument");
             return args.positional[static_cast<size_t>(i) % args.positional.size()];
           })},
      });
      const Flow flow = exec(node.bodies[0]);
      scopes_.pop_back();
      if (flow == Flow::kBreak) break;
    }
  }

  void exec_set(const Node& node) {
    if (!node.expr) {  // {% set x %}...{% endset %} captures the rendered body
      std::string saved;
      std::swap(saved, out_);
      exec(node.bodies[0]);
      std::swap(saved, out_);
      scopes_.back()[node.targets[0]] = Value(std::move(saved));
      return;
    }
    Value value = eval(*node.expr);
    if (node.attribute.empty()) {
      bind_targets(node.targets, value);
      return;
    }
    const Value target = lookup(node.targets[0]);
    if (!target.is_namespace()) {
      eval_fail("cannot assign attribute '{}' on '{}': only namespace() objects can be changed",
                node.attribute, node.targets[0]);
    }
    Dict& attributes = target.namespace_attributes();
    for (auto& [name, existing] : attributes) {
      if (name == node.attribute) {
        existing = std::move(value);
        return;
      }
    }
    attributes.emplace_back(node.attribute, std::move(value));
  }

  Value lookup(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      const auto it = scope->find(name);
      if (it != scope->end()) return it->second;
    }
    return Value::undefined(fmt::format("'{}' is undefined", name));
  }

  CallArgs eval_arguments(const Expr& expr, size_t first_positional) {
    CallArgs args;
    for (size_t i = first_positional; i < expr.items.size(); ++i) {
      args.positional.push_back(eval(*expr.items[i]));
    }
    for (const auto& [key, value] : expr.keywords) args.keyword.emplace_back(key, eval(*value));
    return args;
  }

  Value eval(const Expr& expr) {
    try {
      return eval_expr(expr);
    } catch (const EvalError& e) {
      fail_at(expr.offset, e.what());
    }
  }

  Value eval_expr(const Expr& expr) {
    using Kind = Expr::Kind;
    switch (expr.kind) {
      case Kind::kLiteral: return expr.value;
      case Kind::kName: return lookup(expr.name);
      case Kind::kList:
      case Kind::kTuple: {
        List list;
        for (const auto& item : expr.items) list.push_back(eval(*item));
        return expr.kind == Kind::kTuple ? Value::tuple(std::move(list)) : Value(std::move(list));
      }
      case Kind::kDict: {
        Dict dict;
        for (size_t i = 0; i < expr.keys.size(); ++i) {
          const Value key = eval(*expr.keys[i]);
          if (!key.is_string()) eval_fail("dict keys must be strings, got {}", key.type_name());
          Value value = eval(*expr.items[i]);
          const auto it = std::find_if(dict.begin(), dict.end(), [&](const auto& entry) {
            return entry.first == key.as_string();
          });
          if (it != dict.end()) {
            it->second = std::move(value);
          } else {
            dict.emplace_back(key.as_string(), std::move(value));
          }
        }
        return dict;
      }
      case Kind::kAttribute: return get_attribute(eval(*expr.items[0]), expr.name);
      case Kind::kSubscript: return get_item(eval(*expr.items[0]), eval(*expr.items[1]));
      case Kind::kSlice: return get_slice(expr);
      case Kind::kCall: {
        const Value callee = eval(*expr.items[0]);
        if (callee.is_undefined()) fail_undefined(callee);
        if (!callee.is_function()) eval_fail("'{}' object is not callable", callee.type_name());
        return callee.as_function()(eval_arguments(expr, 1));
      }
      case Kind::kFilter: {
        const Value input = eval(*expr.items[0]);
        return apply_filter(expr.name, input, eval_arguments(expr, 1));
      }
      case Kind::kTest: {
        const Value input = eval(*expr.items[0]);
        return apply_test(expr.name, input, eval_arguments(expr, 1)) != expr.negated;
      }
      case Kind::kUnary: {
        const Value operand = eval(*expr.items[0]);
        if (expr.name == "not") return !operand.truthy();
        if (operand.type() == Value::Type::kFloat) {
          return expr.name == "-" ? -operand.as_float() : operand.as_float();
        }
        if (!is_numeric(operand)) {
          if (operand.is_undefined()) fail_undefined(operand);
          eval_fail("bad operand type for unary {}: '{}'", expr.name, operand.type_name());
        }
        return expr.name == "-" ? -operand.as_int() : operand.as_int();
      }
      case Kind::kBinary: {
        Value left = eval(*expr.items[0]);
        if (expr.name == "and") return left.truthy() ? eval(*expr.items[1]) : left;
        if (expr.name == "or") return left.truthy() ? left : eval(*expr.items[1]);
        return arithmetic(expr.name, left, eval(*expr.items[1]));
      }
      case Kind::kCompare: {
        Value left = eval(*expr.items[0]);
        for (size_t i = 0; i < expr.ops.size(); ++i) {
          Value right = eval(*expr.items[i + 1]);
          if (!compare(expr.ops[i], left, right)) return false;
          left = std::move(right);
        }
        return true;
      }
      case Kind::kConditional:
        if (eval(*expr.items[0]).truthy()) return eval(*expr.items[1]);
        return expr.items[2] ? eval(*expr.items[2])
                             : Value::undefined("the inline if-expression had no else branch");
    }
    eval_fail("unknown expression");
  }

  // jinja2's getattr: a Python attribute (method) first, then the dict item.
  static Value get_attribute(const Value& object, const std::string& name) {
    if (object.is_undefined()) fail_undefined(object);
    Value method = find_method(object, name);
    if (!method.is_undefined()) return method;
    if (object.is_dict() || object.is_namespace()) {
      const Value* found = object.find(name);
      if (found) return *found;
    }
    return Value::undefined(
        fmt::format("'{}' object has no attribute '{}'", object.type_name(), name));
  }

  // jinja2's getitem: the item first, then an attribute of that name.
  static Value get_item(const Value& object, const Value& key) {
    if (object.is_undefined()) fail_undefined(object);
    if (object.is_dict() && key.is_string()) {
      const Value* found = object.find(key.as_string());
      if (found) return *found;
    }
    if ((object.is_list() || object.is_string()) &&
        (key.type() == Value::Type::kInt || key.type() == Value::Type::kBool)) {
      const int64_t n = length_of(object);
      const int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
      if (i >= 0 && i < n) {
        if (object.is_list()) return object.as_list()[static_cast<size_t>(i)];
        return code_points(object.as_string())[static_cast<size_t>(i)];
      }
      return Value::undefined(
          fmt::format("{} object has no element {}", object.type_name(), key.as_int()));
    }
    if (key.is_string()) return get_attribute(object, key.as_string());
    return Value::undefined(
        fmt::format("'{}' object has no element {}", object.type_name(), key.repr()));
  }

  Value get_slice(const Expr& expr) {
    const Value object = eval(*expr.items[0]);
    const auto bound = [&](size_t i) {
      return expr.items[i] ? eval(*expr.items[i]) : Value::none();
    };
    const Value start = bound(1), stop = bound(2), step = bound(3);
    if (object.is_undefined()) fail_undefined(object);
    if (object.is_list()) {
      List out;
      for (const int64_t i : slice_indices(length_of(object), start, stop, step)) {
        out.push_back(object.as_list()[static_cast<size_t>(i)]);
      }
      return out;
    }
    if (object.is_string()) {
      const auto chars = code_points(object.as_string());
      std::string out;
      for (const int64_t i : slice_indices(static_cast<int64_t>(chars.size()), start, stop, step)) {
        out += chars[static_cast<size_t>(i)];
      }
      return out;
    }
    eval_fail("'{}' object is not subscriptable", object.type_name());
  }

  const std::string& source_;
  std::vector<std::unordered_map<std::string, Value>> scopes_;
  std::string out_;
};

}  // namespace

std::string render_body(const Body& body, const std::string& source, const Dict& variables) {
  return Renderer(source, variables).run(body);
}

}  // namespace dspark::serve::jinja
