#include "serve/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>


namespace dspark::serve::jinja {

Value Value::undefined(std::string hint) {
  Value v;
  v.string_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.type_ = Type::kNone;
  return v;
}

Value::Value(bool b) : type_(Type::kBool), bool_(b) {}
Value::Value(int64_t i) : type_(Type::kInt), int_(i) {}
Value::Value(double d) : type_(Type::kFloat), float_(d) {}
Value::Value(std::string s)
    : type_(Type::kString), string_(std::make_shared<const std::string>(std::move(s))) {}
Value::Value(List list)
    : type_(Type::kList), list_(std::make_shared<const List>(std::move(list))) {}
Value::Value(Dict dict) : type_(Type::kDict), dict_(std::make_shared<Dict>(std::move(dict))) {}

Value Value::make_namespace(Dict attributes) {
  Value v(std::move(attributes));
  v.type_ = Type::kNamespace;
  return v;
}

Value Value::tuple(List items) {
  Value v(std::move(items));
  v.bool_ = true;
  return v;
}

Value Value::function(std::string name, Function fn) {
  Value v;
  v.type_ = Type::kFunction;
  v.string_ = std::make_shared<const std::string>(std::move(name));
  v.function_ = std::make_shared<const Function>(std::move(fn));
  return v;
}

Value Value::from_json(const nlohmann::json& json) {
  switch (json.type()) {
    case nlohmann::json::value_t::null: return none();
    case nlohmann::json::value_t::boolean: return Value(json.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(json.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return Value(static_cast<int64_t>(json.get<uint64_t>()));
    case nlohmann::json::value_t::number_float: return Value(json.get<double>());
    case nlohmann::json::value_t::string: return Value(json.get<std::string>());
    case nlohmann::json::value_t::array: {
      List list;
      for (const auto& item : json) list.push_back(from_json(item));
      return Value(std::move(list));
    }
    case nlohmann::json::value_t::object: {
      Dict dict;
      for (const auto& [key, item] : json.items()) dict.emplace_back(key, from_json(item));
      return Value(std::move(dict));
    }
    default: eval_fail("unsupported JSON value {}", json.dump());
  }
}

bool Value::truthy() const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone: return false;
    case Type::kBool: return bool_;
    case Type::kInt: return int_ != 0;
    case Type::kFloat: return float_ != 0;
    case Type::kString: return !string_->empty();
    case Type::kList: return !list_->empty();
    case Type::kDict: return !dict_->empty();
    case Type::kNamespace:
    case Type::kFunction: return true;
  }
  return false;
}

namespace {

// Python's float repr: the shortest round-tripping digits, positional for exponents in
// [-4, 16), scientific otherwise, and always a '.' or an exponent so it reads back as a float.
std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto result =
      std::to_chars(buffer, buffer + sizeof buffer, d, std::chars_format::scientific);
  std::string sci(buffer, result.ptr);  // e.g. "-1.2345e+02"
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const size_t e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  std::string out;
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out = digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  }
  return negative ? "-" + out : out;
}

std::string python_string_repr(const std::string& s) {
  const char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos)
                         ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out + quote;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void write_json(const Value& v, int indent, int depth, std::string& out) {
  const auto newline = [&](int level) {
    if (indent >= 0) out += "\n" + std::string(static_cast<size_t>(indent * level), ' ');
  };
  const char* item_separator = indent >= 0 ? "," : ", ";
  switch (v.type()) {
    case Value::Type::kNone: out += "null"; return;
    case Value::Type::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Type::kInt: out += std::to_string(v.as_int()); return;
    case Value::Type::kFloat: {
      const double d = v.as_float();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                                                   : python_float(d);
      return;
    }
    case Value::Type::kString: out += json_string(v.as_string()); return;
    case Value::Type::kList: {
      if (v.as_list().empty()) {
        out += "[]";
        return;
      }
      out += "[";
      bool first = true;
      for (const auto& item : v.as_list()) {
        if (!first) out += item_separator;
        first = false;
        newline(depth + 1);
        write_json(item, indent, depth + 1, out);
      }
      newline(depth);
      out += "]";
      return;
    }
    case Value::Type::kDict: {
      if (v.as_dict().empty()) {
        out += "{}";
        return;
      }
      out += "{";
      bool first = true;
      for (const auto& [key, item] : v.as_dict()) {
        if (!first) out += item_separator;
        first = false;
        newline(depth + 1);
        out += json_string(key) + ": ";
        write_json(item, indent, depth + 1, out);
      }
      newline(depth);
      out += "}";
      return;
    }
    default: eval_fail("tojson cannot serialize a value of type {}", v.type_name());
  }
}

}  // namespace

std::string Value::to_string() const {
  switch (type_) {
    case Type::kUndefined: return "";
    case Type::kString: return *string_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (type_) {
    case Type::kUndefined: return "";
    case Type::kNone: return "None";
    case Type::kBool: return bool_ ? "True" : "False";
    case Type::kInt: return std::to_string(int_);
    case Type::kFloat: return python_float(float_);
    case Type::kString: return python_string_repr(*string_);
    case Type::kList: {
      std::string out = bool_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].repr();
      if (bool_) return out + (list_->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Type::kDict:
    case Type::kNamespace: {
      std::string out = type_ == Type::kNamespace ? "<Namespace {" : "{";
      for (size_t i = 0; i < dict_->size(); ++i) {
        out += (i ? ", " : "") + python_string_repr((*dict_)[i].first) + ": " +
               (*dict_)[i].second.repr();
      }
      return out + (type_ == Type::kNamespace ? "}>" : "}");
    }
    case Type::kFunction: return "<function " + *string_ + ">";
  }
  return "";
}

std::string Value::to_json(int indent) const {
  std::string out;
  write_json(*this, indent, 0, out);
  return out;
}

std::string Value::type_name() const {
  switch (type_) {
    case Type::kUndefined: return "Undefined";
    case Type::kNone: return "NoneType";
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kString: return "str";
    case Type::kList: return "list";
    case Type::kDict: return "dict";
    case Type::kNamespace: return "Namespace";
    case Type::kFunction: return "function";
  }
  return "?";
}

const Value* Value::find(const std::string& key) const {
  if (type_ != Type::kDict && type_ != Type::kNamespace) return nullptr;
  for (const auto& [name, value] : *dict_) {
    if (name == key) return &value;
  }
  return nullptr;
}

bool operator==(const Value& a, const Value& b) {
  using T = Value::Type;
  const auto numeric = [](const Value& v) { return v.is_number() || v.type() == T::kBool; };
  if (numeric(a) && numeric(b)) {
    if (a.type() == T::kFloat || b.type() == T::kFloat) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case T::kUndefined:
    case T::kNone: return true;
    case T::kString: return a.as_string() == b.as_string();
    case T::kList: return a.as_list() == b.as_list();
    case T::kDict: {
      if (a.as_dict().size() != b.as_dict().size()) return false;
      for (const auto& [key, value] : a.as_dict()) {
        const Value* other = b.find(key);
        if (!other || !(*other == value)) return false;
      }
      return true;
    }
    case T::kNamespace: return &a.namespace_attributes() == &b.namespace_attributes();
    default: return false;  // functions
  }
}

}  // namespace dspark::serve::jinja
