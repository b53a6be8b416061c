#include "serve/jinja_parser.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "serve/jinja_lexer.h"
#include "util/error.h"

namespace dspark::serve::jinja {

namespace {

using K = Token::Kind;

class Parser {
 public:
  explicit Parser(const std::string& source) : source_(source), tokens_(tokenize(source)) {}

  Body parse() {
    std::string stopped_at;
    Body body = parse_body({}, stopped_at, 0);
    return body;
  }

 private:
  // ---- token stream ----
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() {
    const Token& token = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return token;
  }
  bool at_operator(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == K::kOperator && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == K::kName && peek(ahead).text == name;
  }
  bool skip_operator(std::string_view op) {
    if (!at_operator(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& token) {
    switch (token.kind) {
      case K::kEnd: return "end of template";
      case K::kBlockEnd: return "'%}'";
      case K::kVarEnd: return "'}}'";
      case K::kBlockBegin: return "'{%'";
      case K::kVarBegin: return "'{{'";
      case K::kText: return "text";
      case K::kString: return "string literal";
      default: return "'" + token.text + "'";
    }
  }

  [[noreturn]] void error_at(size_t offset, const std::string& message) const {
    fail("chat template: {}: {}", describe_position(source_, offset), message);
  }
  [[noreturn]] void unexpected(const std::string& wanted) const {
    error_at(peek().offset, fmt::format("expected {}, got {}", wanted, describe(peek())));
  }

  void expect_operator(std::string_view op) {
    if (!skip_operator(op)) unexpected(fmt::format("'{}'", op));
  }
  void expect_block_end() {
    if (peek().kind != K::kBlockEnd) unexpected("'%}'");
    next();
  }
  std::string expect_identifier() {
    if (peek().kind != K::kName) unexpected("a name");
    return next().text;
  }

  // ---- statements ----

  // Parses nodes until a `{% <stop> ...` tag, whose `{%` and name it consumes; `opened_at` is
  // the offset of the block being closed, for the "unclosed" error.
  Body parse_body(std::initializer_list<std::string_view> stop, std::string& stopped_at,
                  size_t opened_at, std::string_view opener = "") {
    Body body;
    while (true) {
      const Token& token = peek();
      switch (token.kind) {
        case K::kEnd:
          if (stop.size() != 0) {
            std::string wanted;
            for (const auto s : stop) {
              wanted += (wanted.empty() ? "'" : " or '") + std::string(s) + "'";
            }
            error_at(opened_at, fmt::format("unclosed '{}' block (expected {} before the end of "
                                            "the template)", opener, wanted));
          }
          return body;
        case K::kText:
          body.push_back({.kind = Node::Kind::kText, .offset = token.offset, .text = token.text});
          next();
          break;
        case K::kVarBegin: {
          next();
          Node node{.kind = Node::Kind::kOutput, .offset = token.offset};
          node.expr = parse_expression();
          if (peek().kind != K::kVarEnd) unexpected("'}}'");
          next();
          body.push_back(std::move(node));
          break;
        }
        case K::kBlockBegin: {
          const Token& name = peek(1);
          if (name.kind != K::kName) {
            error_at(name.offset, fmt::format("expected a tag name, got {}", describe(name)));
          }
          if (std::find(stop.begin(), stop.end(), name.text) != stop.end()) {
            stopped_at = name.text;
            next();
            next();
            return body;
          }
          next();
          next();
          body.push_back(parse_statement(name, token.offset));
          break;
        }
        default: unexpected("text or a tag");
      }
    }
  }

  // `offset` is that of the tag's `{%`, where errors about the tag point.
  Node parse_statement(const Token& tag, size_t offset) {
    const std::string& name = tag.text;
    if (name == "if") return parse_if(offset);
    if (name == "for") return parse_for(offset);
    if (name == "set") return parse_set(offset);
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) error_at(offset, fmt::format("'{}' outside a for loop", name));
      expect_block_end();
      return {.kind = name == "break" ? Node::Kind::kBreak : Node::Kind::kContinue,
              .offset = offset};
    }
    if (name == "generation") {
      expect_block_end();
      Node node{.kind = Node::Kind::kScope, .offset = offset};
      std::string stopped_at;
      node.bodies.push_back(parse_body({"endgeneration"}, stopped_at, offset, "generation"));
      expect_block_end();
      return node;
    }
    if (name.starts_with("end") || name == "else" || name == "elif") {
      error_at(offset, fmt::format("unexpected '{}' (no open block it could close)", name));
    }
    error_at(offset, fmt::format("unsupported tag '{}'", name));
  }

  Node parse_if(size_t offset) {
    Node node{.kind = Node::Kind::kIf, .offset = offset};
    std::string stopped_at = "if";
    while (true) {
      node.conditions.push_back(parse_expression());
      expect_block_end();
      node.bodies.push_back(parse_body({"elif", "else", "endif"}, stopped_at, offset, "if"));
      if (stopped_at == "elif") continue;
      if (stopped_at == "else") {
        expect_block_end();
        node.bodies.push_back(parse_body({"endif"}, stopped_at, offset, "if"));
      }
      expect_block_end();
      return node;
    }
  }

  Node parse_for(size_t offset) {
    Node node{.kind = Node::Kind::kFor, .offset = offset};
    do {
      node.targets.push_back(expect_identifier());
    } while (skip_operator(","));
    if (!skip_name("in")) unexpected("'in'");
    node.expr = parse_tuple(/*with_conditional=*/false);
    if (skip_name("if")) node.filter = parse_expression();
    if (at_name("recursive")) error_at(peek().offset, "recursive for loops are not supported");
    expect_block_end();
    std::string stopped_at;
    ++loop_depth_;
    node.bodies.push_back(parse_body({"else", "endfor"}, stopped_at, offset, "for"));
    --loop_depth_;
    if (stopped_at == "else") {
      expect_block_end();
      node.bodies.push_back(parse_body({"endfor"}, stopped_at, offset, "for"));
    }
    expect_block_end();
    return node;
  }

  Node parse_set(size_t offset) {
    Node node{.kind = Node::Kind::kSet, .offset = offset};
    node.targets.push_back(expect_identifier());
    if (skip_operator(".")) {
      node.attribute = expect_identifier();
    } else {
      while (skip_operator(",")) node.targets.push_back(expect_identifier());
    }
    if (skip_operator("=")) {
      node.expr = parse_tuple(/*with_conditional=*/true);
      expect_block_end();
      return node;
    }
    if (node.targets.size() != 1 || !node.attribute.empty()) unexpected("'='");
    expect_block_end();
    std::string stopped_at;
    node.bodies.push_back(parse_body({"endset"}, stopped_at, offset, "set"));
    expect_block_end();
    return node;
  }

  // ---- expressions, in jinja2's precedence order ----

  static ExprPtr make(Expr expr) { return std::make_shared<const Expr>(std::move(expr)); }

  ExprPtr parse_tuple(bool with_conditional) {
    const size_t offset = peek().offset;
    ExprPtr first = with_conditional ? parse_expression() : parse_or();
    if (!at_operator(",")) return first;
    Expr tuple{.kind = Expr::Kind::kTuple, .offset = offset};
    tuple.items.push_back(first);
    while (skip_operator(",")) {
      if (peek().kind == K::kBlockEnd || peek().kind == K::kVarEnd || at_operator(")")) break;
      tuple.items.push_back(with_conditional ? parse_expression() : parse_or());
    }
    return make(std::move(tuple));
  }

  ExprPtr parse_expression() {
    ExprPtr expr = parse_or();
    while (at_name("if")) {
      const size_t offset = next().offset;
      Expr conditional{.kind = Expr::Kind::kConditional, .offset = offset};
      conditional.items.push_back(parse_or());
      conditional.items.push_back(expr);
      conditional.items.push_back(skip_name("else") ? parse_expression() : nullptr);
      expr = make(std::move(conditional));
    }
    return expr;
  }

  ExprPtr binary(std::string op, size_t offset, ExprPtr left, ExprPtr right) {
    Expr expr{.kind = Expr::Kind::kBinary, .offset = offset, .name = std::move(op)};
    expr.items = {std::move(left), std::move(right)};
    return make(std::move(expr));
  }

  // One left-associative level of binary operators: operand (op operand)*.
  ExprPtr parse_binary_level(ExprPtr (Parser::*operand)(),
                             std::initializer_list<std::string_view> ops) {
    ExprPtr left = (this->*operand)();
    while ((peek().kind == K::kOperator || peek().kind == K::kName) &&
           std::find(ops.begin(), ops.end(), peek().text) != ops.end()) {
      const Token& op = next();
      left = binary(op.text, op.offset, left, (this->*operand)());
    }
    return left;
  }

  ExprPtr parse_or() { return parse_binary_level(&Parser::parse_and, {"or"}); }
  ExprPtr parse_and() { return parse_binary_level(&Parser::parse_not, {"and"}); }

  ExprPtr parse_not() {
    if (at_name("not")) {
      const size_t offset = next().offset;
      Expr expr{.kind = Expr::Kind::kUnary, .offset = offset, .name = "not"};
      expr.items.push_back(parse_not());
      return make(std::move(expr));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const size_t offset = peek().offset;
    ExprPtr first = parse_math1();
    Expr compare{.kind = Expr::Kind::kCompare, .offset = offset};
    compare.items.push_back(first);
    while (true) {
      const Token& token = peek();
      if (token.kind == K::kOperator &&
          (token.text == "==" || token.text == "!=" || token.text == "<" || token.text == ">" ||
           token.text == "<=" || token.text == ">=")) {
        compare.ops.push_back(next().text);
      } else if (at_name("in")) {
        next();
        compare.ops.push_back("in");
      } else if (at_name("not") && at_name("in", 1)) {
        next();
        next();
        compare.ops.push_back("not in");
      } else {
        break;
      }
      compare.items.push_back(parse_math1());
    }
    return compare.ops.empty() ? first : make(std::move(compare));
  }

  ExprPtr parse_math1() { return parse_binary_level(&Parser::parse_concat, {"+", "-"}); }
  ExprPtr parse_concat() { return parse_binary_level(&Parser::parse_math2, {"~"}); }
  ExprPtr parse_math2() {
    return parse_binary_level(&Parser::parse_pow, {"*", "/", "//", "%"});
  }
  ExprPtr parse_pow() { return parse_binary_level(&Parser::parse_filtered_unary, {"**"}); }
  ExprPtr parse_filtered_unary() { return parse_unary(true); }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (at_operator("-") || at_operator("+")) {
      const Token& op = next();
      Expr expr{.kind = Expr::Kind::kUnary, .offset = op.offset, .name = op.text};
      expr.items.push_back(parse_unary(false));
      node = make(std::move(expr));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(node);
    return with_filter ? parse_filters_and_tests(node) : node;
  }

  ExprPtr parse_primary() {
    const Token& token = peek();
    switch (token.kind) {
      case K::kName: {
        next();
        const std::string& n = token.text;
        if (n == "true" || n == "True") return literal(Value(true), token.offset);
        if (n == "false" || n == "False") return literal(Value(false), token.offset);
        if (n == "none" || n == "None") return literal(Value::none(), token.offset);
        return make({.kind = Expr::Kind::kName, .offset = token.offset, .name = n});
      }
      case K::kString: {
        std::string text;
        while (peek().kind == K::kString) text += next().text;  // adjacent literals concatenate
        return literal(Value(std::move(text)), token.offset);
      }
      case K::kInt: {
        next();
        try {
          return literal(Value(static_cast<int64_t>(std::stoll(token.text))), token.offset);
        } catch (const std::out_of_range&) {
          error_at(token.offset, "integer literal out of range");
        }
      }
      case K::kFloat: next(); return literal(Value(std::stod(token.text)), token.offset);
      case K::kOperator:
        if (token.text == "(") {
          next();
          if (skip_operator(")")) return make({.kind = Expr::Kind::kTuple, .offset = token.offset});
          ExprPtr inner = parse_tuple(true);
          expect_operator(")");
          return inner;
        }
        if (token.text == "[") return parse_list();
        if (token.text == "{") return parse_dict();
        break;
      default: break;
    }
    unexpected("an expression");
  }

  static ExprPtr literal(Value value, size_t offset) {
    return make({.kind = Expr::Kind::kLiteral, .offset = offset, .value = std::move(value)});
  }

  ExprPtr parse_list() {
    Expr list{.kind = Expr::Kind::kList, .offset = next().offset};
    while (!at_operator("]")) {
      if (!list.items.empty()) expect_operator(",");
      if (at_operator("]")) break;  // trailing comma
      list.items.push_back(parse_expression());
    }
    next();
    return make(std::move(list));
  }

  ExprPtr parse_dict() {
    Expr dict{.kind = Expr::Kind::kDict, .offset = next().offset};
    while (!at_operator("}")) {
      if (!dict.keys.empty()) expect_operator(",");
      if (at_operator("}")) break;
      dict.keys.push_back(parse_expression());
      expect_operator(":");
      dict.items.push_back(parse_expression());
    }
    next();
    return make(std::move(dict));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (at_operator(".")) {
        const size_t offset = next().offset;
        if (peek().kind == K::kInt) {  // x.0 is x[0]
          Expr subscript{.kind = Expr::Kind::kSubscript, .offset = offset};
          const auto index = static_cast<int64_t>(std::stoll(next().text));
          subscript.items = {node, literal(Value(index), offset)};
          node = make(std::move(subscript));
          continue;
        }
        Expr attribute{.kind = Expr::Kind::kAttribute, .offset = offset,
                       .name = expect_identifier()};
        attribute.items.push_back(node);
        node = make(std::move(attribute));
      } else if (at_operator("[")) {
        node = parse_subscript(node);
      } else if (at_operator("(")) {
        Expr call{.kind = Expr::Kind::kCall, .offset = peek().offset};
        call.items.push_back(node);
        parse_call_arguments(call);
        node = make(std::move(call));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target) {
    const size_t offset = next().offset;
    ExprPtr start;
    if (!at_operator(":")) {
      start = parse_expression();
      if (skip_operator("]")) {
        Expr subscript{.kind = Expr::Kind::kSubscript, .offset = offset};
        subscript.items = {target, start};
        return make(std::move(subscript));
      }
    }
    expect_operator(":");
    Expr slice{.kind = Expr::Kind::kSlice, .offset = offset};
    slice.items = {target, start, nullptr, nullptr};
    if (!at_operator("]") && !at_operator(":")) slice.items[2] = parse_expression();
    if (skip_operator(":") && !at_operator("]")) slice.items[3] = parse_expression();
    expect_operator("]");
    return make(std::move(slice));
  }

  // (a, b, key=c): positional arguments go to items after the callee, keywords to keywords.
  void parse_call_arguments(Expr& call) {
    expect_operator("(");
    bool first = true;
    while (!skip_operator(")")) {
      if (!first) {
        expect_operator(",");
        if (skip_operator(")")) break;
      }
      first = false;
      if (peek().kind == K::kName && at_operator("=", 1)) {
        std::string key = next().text;
        next();
        call.keywords.emplace_back(std::move(key), parse_expression());
      } else {
        if (!call.keywords.empty()) unexpected("a keyword argument (positional after keyword)");
        call.items.push_back(parse_expression());
      }
    }
  }

  ExprPtr parse_filters_and_tests(ExprPtr node) {
    while (true) {
      if (at_operator("|")) {
        next();
        Expr filter{.kind = Expr::Kind::kFilter, .offset = peek().offset,
                    .name = expect_identifier()};
        filter.items.push_back(node);
        if (at_operator("(")) parse_call_arguments(filter);
        node = make(std::move(filter));
      } else if (at_name("is")) {
        next();
        Expr test{.kind = Expr::Kind::kTest, .offset = peek().offset};
        test.negated = skip_name("not");
        test.name = expect_identifier();
        test.items.push_back(node);
        if (at_operator("(")) {
          parse_call_arguments(test);
        } else if (starts_test_argument()) {
          test.items.push_back(parse_postfix(parse_primary()));
        }
        node = make(std::move(test));
      } else if (at_operator("(")) {
        Expr call{.kind = Expr::Kind::kCall, .offset = peek().offset};
        call.items.push_back(node);
        parse_call_arguments(call);
        node = make(std::move(call));
      } else {
        return node;
      }
    }
  }

  // jinja2 lets a test take one argument without parentheses: `x is divisibleby 3`.
  bool starts_test_argument() const {
    const Token& token = peek();
    if (token.kind == K::kName) {
      return token.text != "else" && token.text != "or" && token.text != "and";
    }
    return token.kind == K::kString || token.kind == K::kInt || token.kind == K::kFloat ||
           at_operator("[") || at_operator("{");
  }

  const std::string& source_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(const std::string& source) { return Parser(source).parse(); }

}  // namespace dspark::serve::jinja
