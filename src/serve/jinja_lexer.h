// Splits a Jinja template into text and tag tokens, applying whitespace control the way
// transformers configures jinja2 for chat templates: trim_blocks (the newline right after a
// `%}` or `#}` is dropped), lstrip_blocks (spaces before a `{%` or `{#` that starts a line are
// dropped), `-` markers (strip all whitespace on that side), `+` markers (keep it), and one
// trailing newline of the template dropped. Comments produce no tokens.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace dspark::serve::jinja {

struct Token {
  enum class Kind {
    kText,        // literal output; `text` is the (already whitespace-controlled) text
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,        // identifier or keyword
    kString,      // string literal; `text` is the unescaped value
    kInt,
    kFloat,
    kOperator,    // punctuation: ( ) [ ] { } , : . | = + - * / // % ** ~ == != < > <= >=
    kEnd,         // end of template
  };
  Kind kind;
  std::string text;
  size_t offset;  // byte offset in the source, for error positions
};

// What jinja2 does to a template before lexing: "\r\n" and "\r" become "\n", and one trailing
// newline is dropped (keep_trailing_newline=False).
std::string normalize_source(const std::string& source);

// Tokenizes a normalized source. Throws dspark::Error with the line and column of an
// unterminated tag, comment or string, or of a character no token starts with.
std::vector<Token> tokenize(const std::string& source);

// "line L, column C" of a byte offset, for error messages.
std::string describe_position(const std::string& source, size_t offset);

}  // namespace dspark::serve::jinja
