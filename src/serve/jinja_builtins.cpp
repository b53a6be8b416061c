#include "serve/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <string_view>

#include "tokenizer/utf8.h"

namespace dspark::serve::jinja {

namespace {

// Binds call arguments to parameter names like Python does, rejecting extra or unknown ones.
class Arguments {
 public:
  Arguments(std::string_view callee, const CallArgs& args, std::initializer_list<const char*> names)
      : values_(names.size()) {
    const std::vector<const char*> params(names);
    if (args.positional.size() > params.size()) {
      eval_fail("{}() takes at most {} argument(s), got {}", callee, params.size(),
                args.positional.size());
    }
    for (size_t i = 0; i < args.positional.size(); ++i) values_[i] = args.positional[i];
    for (const auto& [key, value] : args.keyword) {
      const auto it = std::find_if(params.begin(), params.end(),
                                   [&](const char* p) { return key == p; });
      if (it == params.end()) {
        eval_fail("{}() got an unexpected keyword argument '{}'", callee, key);
      }
      auto& slot = values_[static_cast<size_t>(it - params.begin())];
      if (slot) eval_fail("{}() got multiple values for argument '{}'", callee, key);
      slot = value;
    }
  }
  bool has(size_t i) const { return values_[i].has_value(); }
  const Value& get(size_t i, std::string_view callee) const {
    if (!values_[i]) eval_fail("{}() is missing a required argument", callee);
    return *values_[i];
  }
  Value get_or(size_t i, Value fallback) const { return values_[i] ? *values_[i] : fallback; }

 private:
  std::vector<std::optional<Value>> values_;
};

const std::string& require_string(const Value& v, std::string_view what) {
  if (!v.is_string()) eval_fail("{} expects a string, got {}", what, v.type_name());
  return v.as_string();
}

int64_t require_int(const Value& v, std::string_view what) {
  if (v.type() != Value::Type::kInt && v.type() != Value::Type::kBool) {
    eval_fail("{} expects an integer, got {}", what, v.type_name());
  }
  return v.as_int();
}

bool is_python_space(char32_t cp) {
  return cp == ' ' || (cp >= '\t' && cp <= '\r') || (cp >= 0x1c && cp <= 0x1f) || cp == 0x85 ||
         cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

// str.strip/lstrip/rstrip: `chars` null strips whitespace, else any of its characters.
std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  std::vector<char32_t> set;
  if (chars && !chars->is_none()) {
    const std::string& c = require_string(*chars, "strip");
    for (size_t i = 0; i < c.size();) {
      const auto ch = utf8::next(c, i);
      set.push_back(ch.cp);
      i += ch.len;
    }
  }
  const auto strippable = [&](char32_t cp) {
    return chars && !chars->is_none() ? std::find(set.begin(), set.end(), cp) != set.end()
                                      : is_python_space(cp);
  };
  std::vector<std::pair<size_t, utf8::Char>> chars_of_s;
  for (size_t i = 0; i < s.size();) {
    const auto ch = utf8::next(s, i);
    chars_of_s.emplace_back(i, ch);
    i += ch.len;
  }
  size_t begin = 0, end = chars_of_s.size();
  if (left) while (begin < end && strippable(chars_of_s[begin].second.cp)) ++begin;
  if (right) while (end > begin && strippable(chars_of_s[end - 1].second.cp)) --end;
  if (begin == end) return "";
  const size_t from = chars_of_s[begin].first;
  const size_t to = chars_of_s[end - 1].first + chars_of_s[end - 1].second.len;
  return s.substr(from, to - from);
}

List split(const std::string& s, const Value& separator, int64_t max_split) {
  List parts;
  if (separator.is_none() || separator.is_undefined()) {  // runs of whitespace
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_python_space(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) break;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
        parts.push_back(strip(s.substr(i), nullptr, false, true));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_python_space(static_cast<unsigned char>(s[j]))) ++j;
      parts.push_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  const std::string& sep = require_string(separator, "split");
  if (sep.empty()) eval_fail("split(): empty separator");
  size_t start = 0;
  while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
    const size_t at = s.find(sep, start);
    if (at == std::string::npos) break;
    parts.push_back(s.substr(start, at - start));
    start = at + sep.size();
  }
  parts.push_back(s.substr(start));
  return parts;
}

std::string replace(const std::string& s, const std::string& old, const std::string& with,
                    int64_t count) {
  std::string out;
  size_t start = 0;
  int64_t done = 0;
  if (old.empty()) {  // Python inserts `with` between characters
    const auto chars = code_points(s);
    for (const auto& c : chars) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      out += c;
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out += s.substr(start, at - start) + with;
    start = at + old.size();
    ++done;
  }
  return out + s.substr(start);
}

std::string map_ascii(std::string s, int (*f)(int)) {
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(f(c));
  }
  return s;
}
std::string upper(const std::string& s) { return map_ascii(s, ::toupper); }
std::string lower(const std::string& s) { return map_ascii(s, ::tolower); }
std::string capitalize(const std::string& s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = static_cast<char>(::toupper(out[0]));
  return out;
}
std::string title(const std::string& s) {
  std::string out = s;
  bool word_start = true;
  for (char& c : out) {
    const bool letter = std::isalpha(static_cast<unsigned char>(c)) != 0;
    if (letter) c = static_cast<char>(word_start ? ::toupper(c) : ::tolower(c));
    word_start = !letter && !(static_cast<unsigned char>(c) >= 0x80);
  }
  return out;
}

// str.startswith / str.endswith: the prefix may be a tuple of alternatives.
bool affix_matches(const std::string& s, const Value& affix, bool at_start) {
  if (affix.is_list()) {
    return std::any_of(affix.as_list().begin(), affix.as_list().end(),
                       [&](const Value& a) { return affix_matches(s, a, at_start); });
  }
  const std::string& a = require_string(affix, at_start ? "startswith" : "endswith");
  return at_start ? std::string_view(s).starts_with(a) : std::string_view(s).ends_with(a);
}

Value string_method(const std::string& s, const std::string& name, const CallArgs& call) {
  if (name == "startswith" || name == "endswith") {
    const Arguments args(name, call, {"prefix"});
    return affix_matches(s, args.get(0, name), name == "startswith");
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Arguments args(name, call, {"chars"});
    const Value chars = args.get_or(0, Value::none());
    return strip(s, &chars, name != "rstrip", name != "lstrip");
  }
  if (name == "split") {
    const Arguments args(name, call, {"sep", "maxsplit"});
    return split(s, args.get_or(0, Value::none()), require_int(args.get_or(1, -1), "split"));
  }
  if (name == "replace") {
    const Arguments args(name, call, {"old", "new", "count"});
    const std::string& old = require_string(args.get(0, name), name);
    const std::string& with = require_string(args.get(1, name), name);
    return replace(s, old, with, require_int(args.get_or(2, -1), name));
  }
  if (name == "find" || name == "count") {
    const Arguments args(name, call, {"sub"});
    const std::string& sub = require_string(args.get(0, name), name);
    if (name == "find") {
      const size_t at = s.find(sub);
      if (at == std::string::npos) return -1;
      return static_cast<int64_t>(code_points(s.substr(0, at)).size());
    }
    if (sub.empty()) return static_cast<int64_t>(code_points(s).size()) + 1;
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return n;
  }
  if (name == "join") {
    const Arguments args(name, call, {"iterable"});
    std::string out;
    bool first = true;
    for (const auto& item : iterate(args.get(0, name))) {
      if (!first) out += s;
      first = false;
      out += require_string(item, "join");
    }
    return out;
  }
  const Arguments args(name, call, {});
  if (name == "upper") return upper(s);
  if (name == "lower") return lower(s);
  if (name == "title") return title(s);
  return capitalize(s);
}

Value dict_method(const Value& dict, const std::string& name, const CallArgs& call) {
  if (name == "get") {
    const Arguments args(name, call, {"key", "default"});
    const Value& key = args.get(0, name);
    const Value* found = key.is_string() ? dict.find(key.as_string()) : nullptr;
    return found ? *found : args.get_or(1, Value::none());
  }
  const Arguments args(name, call, {});
  List out;
  for (const auto& [key, value] : dict.as_dict()) {
    if (name == "keys") {
      out.emplace_back(key);
    } else if (name == "values") {
      out.push_back(value);
    } else {
      out.push_back(Value::tuple(List{Value(key), value}));
    }
  }
  return out;
}

Value attribute_of(const Value& v, const std::string& attribute) {
  if (v.is_dict() || v.is_namespace()) {
    const Value* found = v.find(attribute);
    if (found) return *found;
  }
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", v.type_name(), attribute));
}

// The items selectattr/rejectattr/select/reject keep.
Value select_items(const Value& input, const CallArgs& call, bool by_attribute, bool keep) {
  if (by_attribute && call.positional.empty()) eval_fail("selectattr() needs an attribute");
  const std::string attribute =
      by_attribute ? require_string(call.positional[0], "selectattr") : std::string();
  const size_t test_at = by_attribute ? 1 : 0;
  CallArgs test_args;
  std::string test_name;
  if (call.positional.size() > test_at) {
    test_name = require_string(call.positional[test_at], "select");
    test_args.positional.assign(call.positional.begin() + static_cast<long>(test_at) + 1,
                                call.positional.end());
  }
  List out;
  for (const auto& item : iterate(input)) {
    const Value subject = by_attribute ? attribute_of(item, attribute) : item;
    const bool passed =
        test_name.empty() ? subject.truthy() : apply_test(test_name, subject, test_args);
    if (passed == keep) out.push_back(item);
  }
  return out;
}

}  // namespace

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8::next(s, i).len;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

int64_t length_of(const Value& value) {
  switch (value.type()) {
    case Value::Type::kUndefined: return 0;
    case Value::Type::kString: return static_cast<int64_t>(utf8::length(value.as_string()));
    case Value::Type::kList: return static_cast<int64_t>(value.as_list().size());
    case Value::Type::kDict:
    case Value::Type::kNamespace: return static_cast<int64_t>(value.as_dict().size());
    default: eval_fail("object of type '{}' has no len()", value.type_name());
  }
}

std::vector<Value> iterate(const Value& value) {
  switch (value.type()) {
    case Value::Type::kUndefined: return {};
    case Value::Type::kList: return value.as_list();
    case Value::Type::kString: {
      std::vector<Value> out;
      for (auto& c : code_points(value.as_string())) out.emplace_back(std::move(c));
      return out;
    }
    case Value::Type::kDict: {
      std::vector<Value> out;
      for (const auto& [key, item] : value.as_dict()) out.emplace_back(key);
      return out;
    }
    default: eval_fail("'{}' object is not iterable", value.type_name());
  }
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) {
      eval_fail("'in <string>' requires string as left operand, not {}", item.type_name());
    }
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) return item.is_string() && container.find(item.as_string()) != nullptr;
  if (container.is_list() || container.is_undefined()) {
    for (const auto& element : iterate(container)) {
      if (element == item) return true;
    }
    return false;
  }
  eval_fail("argument of type '{}' is not iterable", container.type_name());
}

Value find_method(const Value& object, const std::string& name) {
  static const char* const kStringMethods[] = {
      "capitalize", "count", "endswith", "find", "join", "lower", "lstrip", "replace",
      "rstrip", "split", "startswith", "strip", "title", "upper"};
  static const char* const kDictMethods[] = {"get", "items", "keys", "values"};
  const auto listed = [&](const auto& names) {
    return std::any_of(std::begin(names), std::end(names),
                       [&](const char* n) { return name == n; });
  };
  if (object.is_string() && listed(kStringMethods)) {
    return Value::function("str." + name, [s = object.as_string(), name](const CallArgs& args) {
      return string_method(s, name, args);
    });
  }
  if (object.is_dict() && listed(kDictMethods)) {
    return Value::function("dict." + name, [object, name](const CallArgs& args) {
      return dict_method(object, name, args);
    });
  }
  return Value::undefined(
      fmt::format("'{}' object has no attribute '{}'", object.type_name(), name));
}

Value apply_filter(const std::string& name, const Value& input, const CallArgs& call) {
  if (name == "default" || name == "d") {
    const Arguments args(name, call, {"default_value", "boolean"});
    const bool use_default =
        args.get_or(1, false).truthy() ? !input.truthy() : input.is_undefined();
    return use_default ? args.get_or(0, "") : input;
  }
  if (name == "tojson") {
    const Arguments args(name, call, {"indent"});
    const Value indent = args.get_or(0, Value::none());
    return input.to_json(indent.is_none() ? -1 : static_cast<int>(require_int(indent, "tojson")));
  }
  if (name == "trim") {
    const Arguments args(name, call, {"chars"});
    const Value chars = args.get_or(0, Value::none());
    return strip(input.to_string(), &chars, true, true);
  }
  if (name == "join") {
    const Arguments args(name, call, {"d", "attribute"});
    const std::string separator = args.get_or(0, "").to_string();
    std::string out;
    bool first = true;
    for (const auto& item : iterate(input)) {
      if (!first) out += separator;
      first = false;
      out += (args.has(1) ? attribute_of(item, args.get(1, name).to_string()) : item).to_string();
    }
    return out;
  }
  if (name == "replace") {
    const Arguments args(name, call, {"old", "new", "count"});
    const Value count = args.get_or(2, Value::none());
    return replace(input.to_string(), args.get(0, name).to_string(), args.get(1, name).to_string(),
                   count.is_none() ? -1 : require_int(count, name));
  }
  if (name == "map") {
    const Arguments args(name, call, {"attribute", "default"});
    if (!args.has(0)) eval_fail("map() is supported only as map(attribute=...)");
    List out;
    for (const auto& item : iterate(input)) {
      Value v = attribute_of(item, args.get(0, name).to_string());
      out.push_back(v.is_undefined() && args.has(1) ? args.get(1, name) : v);
    }
    return out;
  }
  if (name == "selectattr" || name == "rejectattr") {
    return select_items(input, call, true, name == "selectattr");
  }
  if (name == "select" || name == "reject") {
    return select_items(input, call, false, name == "select");
  }
  if (name == "int" || name == "float") {
    const Arguments args(name, call, {"default"});
    const bool to_int = name == "int";
    const Value fallback = args.get_or(0, to_int ? Value(0) : Value(0.0));
    if (input.is_number() || input.type() == Value::Type::kBool) {
      return to_int ? Value(static_cast<int64_t>(input.as_float())) : Value(input.as_float());
    }
    if (input.is_string()) {
      try {
        size_t used = 0;
        const std::string text = strip(input.as_string(), nullptr, true, true);
        if (to_int) {
          const int64_t v = std::stoll(text, &used);
          if (used == text.size()) return v;
        } else {
          const double v = std::stod(text, &used);
          if (used == text.size()) return v;
        }
      } catch (const std::exception&) {
      }
    }
    return fallback;
  }
  const Arguments args(name, call, {});
  if (name == "length" || name == "count") return length_of(input);
  if (name == "string") return input.to_string();
  if (name == "safe") return input;
  if (name == "upper") return upper(input.to_string());
  if (name == "lower") return lower(input.to_string());
  if (name == "capitalize") return capitalize(input.to_string());
  if (name == "title") return title(input.to_string());
  if (name == "list") return iterate(input);
  if (name == "first" || name == "last") {
    const auto items = iterate(input);
    if (items.empty()) return Value::undefined(fmt::format("no {} item, sequence was empty", name));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    auto items = iterate(input);
    std::reverse(items.begin(), items.end());
    if (!input.is_string()) return items;
    std::string out;
    for (const auto& c : items) out += c.as_string();
    return out;
  }
  if (name == "items") {
    if (input.is_undefined()) return List{};
    if (!input.is_dict()) eval_fail("items filter expects a dict, got {}", input.type_name());
    return dict_method(input, "items", {});
  }
  if (name == "unique") {
    List out;
    for (const auto& item : iterate(input)) {
      if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
    }
    return out;
  }
  if (name == "abs") {
    if (input.type() == Value::Type::kFloat) return std::fabs(input.as_float());
    return std::abs(require_int(input, "abs"));
  }
  eval_fail("unknown filter '{}'", name);
}

bool apply_test(const std::string& name, const Value& input, const CallArgs& call) {
  using T = Value::Type;
  const auto compare_to = [&](std::string_view what) -> const Value& {
    if (call.positional.size() != 1 || !call.keyword.empty()) {
      eval_fail("test '{}' takes one argument", what);
    }
    return call.positional[0];
  };
  if (name == "eq" || name == "equalto" || name == "==") return input == compare_to(name);
  if (name == "ne" || name == "!=") return !(input == compare_to(name));
  if (name == "in") return contains(compare_to(name), input);
  if (name == "divisibleby") {
    const int64_t by = require_int(compare_to(name), name);
    if (by == 0) eval_fail("divisibleby(0)");
    return require_int(input, name) % by == 0;
  }
  if (name == "lt" || name == "<" || name == "le" || name == "<=" || name == "gt" ||
      name == ">" || name == "ge" || name == ">=") {
    const Value& other = compare_to(name);
    int order;
    if (input.is_string() && other.is_string()) {
      order = input.as_string().compare(other.as_string());
    } else if ((input.is_number() || input.type() == T::kBool) &&
               (other.is_number() || other.type() == T::kBool)) {
      order = input.as_float() < other.as_float() ? -1 : input.as_float() > other.as_float();
    } else {
      eval_fail("'{}' not supported between {} and {}", name, input.type_name(), other.type_name());
    }
    const bool strict = name.size() == 1 || name == "lt" || name == "gt";
    if (name[0] == 'l' || name[0] == '<') return strict ? order < 0 : order <= 0;
    return strict ? order > 0 : order >= 0;
  }
  if (!call.positional.empty() || !call.keyword.empty()) {
    eval_fail("test '{}' takes no arguments", name);
  }
  if (name == "defined") return !input.is_undefined();
  if (name == "undefined") return input.is_undefined();
  if (name == "none") return input.is_none();
  if (name == "boolean") return input.type() == T::kBool;
  if (name == "true") return input.type() == T::kBool && input.as_bool();
  if (name == "false") return input.type() == T::kBool && !input.as_bool();
  if (name == "integer") return input.type() == T::kInt;
  if (name == "float") return input.type() == T::kFloat;
  if (name == "number") return input.is_number() || input.type() == T::kBool;
  if (name == "string") return input.is_string();
  if (name == "mapping") return input.is_dict();
  if (name == "iterable") {
    return input.is_string() || input.is_list() || input.is_dict() || input.is_undefined();
  }
  if (name == "sequence") return input.is_string() || input.is_list() || input.is_dict();
  if (name == "callable") return input.is_function();
  if (name == "odd" || name == "even") {
    return (require_int(input, name) % 2 != 0) == (name == "odd");
  }
  if (name == "lower") return input.is_string() && lower(input.as_string()) == input.as_string();
  if (name == "upper") return input.is_string() && upper(input.as_string()) == input.as_string();
  eval_fail("unknown test '{}'", name);
}

Dict builtin_globals() {
  Dict globals;
  globals.emplace_back("namespace", Value::function("namespace", [](const CallArgs& args) {
    Dict attributes;
    for (const auto& positional : args.positional) {
      if (!positional.is_dict()) eval_fail("namespace() takes keyword arguments or a dict");
      attributes = positional.as_dict();
    }
    for (const auto& [key, value] : args.keyword) {
      const auto it = std::find_if(attributes.begin(), attributes.end(),
                                   [&](const auto& a) { return a.first == key; });
      if (it != attributes.end()) {
        it->second = value;
      } else {
        attributes.emplace_back(key, value);
      }
    }
    return Value::make_namespace(std::move(attributes));
  }));
  globals.emplace_back("dict", Value::function("dict", [](const CallArgs& args) {
    if (!args.positional.empty()) eval_fail("dict() supports keyword arguments only");
    return Value(Dict(args.keyword.begin(), args.keyword.end()));
  }));
  globals.emplace_back("range", Value::function("range", [](const CallArgs& args) {
    if (args.positional.empty() || args.positional.size() > 3 || !args.keyword.empty()) {
      eval_fail("range() takes 1 to 3 positional arguments");
    }
    int64_t start = 0, step = 1, stop;
    if (args.positional.size() == 1) {
      stop = require_int(args.positional[0], "range");
    } else {
      start = require_int(args.positional[0], "range");
      stop = require_int(args.positional[1], "range");
      if (args.positional.size() == 3) step = require_int(args.positional[2], "range");
    }
    if (step == 0) eval_fail("range() arg 3 must not be zero");
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (out.size() >= 100000) eval_fail("range() too large");
      out.emplace_back(i);
    }
    return out;
  }));
  return globals;
}

}  // namespace dspark::serve::jinja
