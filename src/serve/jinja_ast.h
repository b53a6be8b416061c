// Syntax tree of the Jinja subset: expressions and statements as the parser builds them and the
// renderer walks them. Every node keeps its source offset so evaluation errors can say where.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "serve/jinja_value.h"

namespace dspark::serve::jinja {

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind {
    kLiteral,      // value
    kName,         // name
    kList,         // [items...]
    kTuple,        // (items...,): rendered as a list
    kDict,         // {keys[i]: items[i]}
    kAttribute,    // items[0].name
    kSubscript,    // items[0][items[1]]
    kSlice,        // items[0][items[1]:items[2]:items[3]]; absent bounds are null
    kCall,         // items[0](items[1:], keywords)
    kFilter,       // items[0] | name(items[1:], keywords)
    kTest,         // items[0] is [not] name(items[1:])
    kUnary,        // name in {"-", "+", "not"} applied to items[0]
    kBinary,       // items[0] name items[1]; name is an arithmetic operator, "and" or "or"
    kCompare,      // items[0] ops[0] items[1] ops[1] items[2] ... (chained like Python)
    kConditional,  // items[1] if items[0] else items[2] (items[2] null: undefined)
  };
  Kind kind;
  size_t offset = 0;
  std::string name;
  Value value;
  std::vector<ExprPtr> items;
  std::vector<ExprPtr> keys;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  std::vector<std::string> ops;
  bool negated = false;  // `is not`
};

struct Node;
using Body = std::vector<Node>;

struct Node {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // conditions[i] -> bodies[i]; bodies.back() is the else branch when
                // bodies.size() > conditions.size()
    kFor,       // for targets in expr [if filter]: bodies[0], else bodies[1]
    kSet,       // set targets = expr, or set targets[0].attribute = expr, or a set block
                // capturing bodies[0] when expr is null
    kBreak,
    kContinue,
    kScope,     // a transparent block such as transformers' {% generation %}: bodies[0]
  };
  Kind kind;
  size_t offset = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  std::vector<std::string> targets;
  std::string attribute;
};

}  // namespace dspark::serve::jinja
