// The filters, tests, Python methods and global functions the Jinja subset provides: those chat
// templates actually use, with jinja2's (and Python's) semantics. Anything else is an EvalError
// naming it, so a template that needs more fails loudly instead of rendering a wrong prompt.
//
// Filters: abs, capitalize, count, d/default, first, float, int, items, join, last, length,
//   list, lower, map(attribute=), reject/select(test), rejectattr/selectattr(attr, test),
//   replace, reverse, safe, string, title, tojson (transformers' version: insertion order,
//   ensure_ascii=False), trim, unique, upper.
// Tests: boolean, callable, defined, divisibleby, eq/equalto/==, even, false, float, ge/>=,
//   gt/>, in, integer, iterable, le/<=, lower, lt/<, mapping, ne/!=, none, number, odd,
//   sequence, string, true, undefined, upper.
// Methods: str.{capitalize, count, endswith, find, join, lower, lstrip, replace, rstrip, split,
//   startswith, strip, title, upper}, dict.{get, items, keys, values}.
// Globals: dict, namespace, range.
// Upper/lower/title case only ASCII letters; other characters are left as they are.
#pragma once
#include <string>
#include <vector>

#include "serve/jinja_value.h"

namespace dspark::serve::jinja {

Value apply_filter(const std::string& name, const Value& input, const CallArgs& args);
bool apply_test(const std::string& name, const Value& input, const CallArgs& args);
// The bound method `object.name`, or Undefined when the type has no such method.
Value find_method(const Value& object, const std::string& name);
// Builtin global functions (dict, namespace, range).
Dict builtin_globals();

// Python-style helpers shared with the renderer.
std::vector<std::string> code_points(const std::string& s);  // one string per character
int64_t length_of(const Value& value);                       // len(x)
std::vector<Value> iterate(const Value& value);              // list(x); Undefined is empty
bool contains(const Value& container, const Value& item);    // item in container

}  // namespace dspark::serve::jinja
