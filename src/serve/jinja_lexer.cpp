#include "serve/jinja_lexer.h"

#include <cctype>
#include <string_view>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace dspark::serve::jinja {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(const std::string& source) : src_(source) {}

  std::vector<Token> run() {
    bool line_start = true;  // the text about to be read begins a line (lstrip_blocks)
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      std::string text =
          src_.substr(pos_, tag == std::string::npos ? std::string::npos : tag - pos_);
      if (tag == std::string::npos) {
        emit_text(std::move(text), pos_);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char marker = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      const bool is_marker = marker == '-' || (marker == '+' && kind != '{');
      if (marker == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (marker != '+' && kind != '{') {
        strip_line_indent(text, line_start);
      }
      emit_text(std::move(text), pos_);
      pos_ = tag + 2 + (is_marker ? 1 : 0);
      if (kind == '#') {
        skip_comment(tag);
      } else {
        lex_tag(kind == '{', tag);
      }
      line_start = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({Token::Kind::kEnd, "", src_.size()});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  // lstrip_blocks: drop the spaces between the start of the line and a block or comment tag.
  static void strip_line_indent(std::string& text, bool line_start) {
    const size_t newline = text.rfind('\n');
    const size_t line_begin = newline == std::string::npos ? 0 : newline + 1;
    if (line_begin == 0 && !line_start) return;
    for (size_t i = line_begin; i < text.size(); ++i) {
      if (!is_space(text[i])) return;
    }
    text.resize(line_begin);
  }

  void emit_text(std::string text, size_t offset) {
    if (!text.empty()) tokens_.push_back({Token::Kind::kText, std::move(text), offset});
  }

  void skip_whitespace() {
    while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
  }

  // After `%}` or `#}`: trim_blocks drops one newline; after `-%}` all whitespace goes.
  void after_block_end(char marker) {
    if (marker == '-') {
      skip_whitespace();
    } else if (marker != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
  }

  void skip_comment(size_t tag) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) error(tag, "unterminated comment");
    const char marker = end > pos_ ? src_[end - 1] : '\0';
    pos_ = end + 2;
    after_block_end(marker);
  }

  void lex_tag(bool is_variable, size_t tag) {
    tokens_.push_back({is_variable ? Token::Kind::kVarBegin : Token::Kind::kBlockBegin, "", tag});
    const std::string_view close = is_variable ? "}}" : "%}";
    int brackets = 0;  // a dict literal's "}}" must not end the tag
    while (true) {
      skip_whitespace();
      if (pos_ >= src_.size()) {
        error(tag, is_variable ? "unterminated '{{'" : "unterminated '{%'");
      }
      if (brackets == 0) {
        const std::string_view rest(src_.data() + pos_, src_.size() - pos_);
        char marker = '\0';
        if ((rest.starts_with('-') || (!is_variable && rest.starts_with('+'))) &&
            rest.substr(1).starts_with(close)) {
          marker = rest[0];
        }
        if (marker || rest.starts_with(close)) {
          tokens_.push_back(
              {is_variable ? Token::Kind::kVarEnd : Token::Kind::kBlockEnd, "", pos_});
          pos_ += close.size() + (marker ? 1 : 0);
          if (is_variable) {
            if (marker == '-') skip_whitespace();
          } else {
            after_block_end(marker);
          }
          return;
        }
      }
      lex_expression_token(brackets);
    }
  }

  void lex_expression_token(int& brackets) {
    const size_t start = pos_;
    const char c = src_[pos_];
    if (is_name_start(c)) {
      while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
      tokens_.push_back({Token::Kind::kName, src_.substr(start, pos_ - start), start});
    } else if (is_digit(c)) {
      lex_number();
    } else if (c == '\'' || c == '"') {
      tokens_.push_back({Token::Kind::kString, lex_string(), start});
    } else {
      static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
      for (const auto op : kTwoChar) {
        if (src_.compare(pos_, 2, op) == 0) {
          pos_ += 2;
          tokens_.push_back({Token::Kind::kOperator, std::string(op), start});
          return;
        }
      }
      if (std::string_view("()[]{},:.|=+-*/%~<>").find(c) == std::string_view::npos) {
        error(start, fmt::format("unexpected character '{}'", c));
      }
      if (c == '(' || c == '[' || c == '{') ++brackets;
      if ((c == ')' || c == ']' || c == '}') && brackets > 0) --brackets;
      ++pos_;
      tokens_.push_back({Token::Kind::kOperator, std::string(1, c), start});
    }
  }

  void lex_number() {
    const size_t start = pos_;
    bool is_float = false;
    while (pos_ < src_.size() && (is_digit(src_[pos_]) || src_[pos_] == '_')) ++pos_;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      while (pos_ < src_.size() && (is_digit(src_[pos_]) || src_[pos_] == '_')) ++pos_;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        is_float = true;
        pos_ = p;
        while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
      }
    }
    std::string text;
    for (size_t i = start; i < pos_; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    tokens_.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInt, text, start});
  }

  // Python string-literal escapes, as jinja2 decodes them.
  std::string lex_string() {
    const size_t start = pos_;
    const char quote = src_[pos_++];
    std::string out;
    while (true) {
      if (pos_ >= src_.size()) error(start, "unterminated string literal");
      const char c = src_[pos_++];
      if (c == quote) return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= src_.size()) error(start, "unterminated string literal");
      const char e = src_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;  // line continuation
        case 'x': utf8::append(out, read_hex(2, start)); break;
        case 'u': utf8::append(out, read_hex(4, start)); break;
        case 'U': utf8::append(out, read_hex(8, start)); break;
        default:  // Python keeps unknown escapes as written
          out += '\\';
          out += e;
      }
    }
  }

  char32_t read_hex(int digits, size_t string_start) {
    char32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const int d = pos_ < src_.size() ? hex_value(src_[pos_]) : -1;
      if (d < 0) error(string_start, "malformed \\x, \\u or \\U escape in string literal");
      value = value * 16 + static_cast<char32_t>(d);
      ++pos_;
    }
    return value;
  }

  [[noreturn]] void error(size_t offset, const std::string& message) const {
    fail("chat template: {}: {}", describe_position(src_, offset), message);
  }

  const std::string& src_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::string normalize_source(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

std::string describe_position(const std::string& source, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return fmt::format("line {}, column {}", line, column);
}

}  // namespace dspark::serve::jinja
