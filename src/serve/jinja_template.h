// A parsed Jinja template of the chat-template subset (see jinja_parser.h for the syntax and
// jinja_builtins.h for the filters, tests and methods). Copies share the parsed tree.
#pragma once
#include <memory>
#include <string>

#include "serve/jinja_ast.h"
#include "serve/jinja_value.h"

namespace dspark::serve::jinja {

class Template {
 public:
  // Throws dspark::Error (one line, with the position) on syntax outside the subset.
  static Template parse(const std::string& source);

  // Renders with `variables` on top of the builtin globals. Throws dspark::Error with the
  // position on evaluation errors; a dspark::Error thrown by a function in `variables` (such as
  // transformers' raise_exception) passes through unchanged.
  std::string render(const Dict& variables) const;

 private:
  struct Parsed {
    std::string source;  // normalized, for error positions
    Body body;
  };
  std::shared_ptr<const Parsed> parsed_;
};

}  // namespace dspark::serve::jinja
