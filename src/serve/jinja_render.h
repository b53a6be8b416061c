// Evaluates a parsed template: jinja2's scoping (a for loop's body gets fresh variables on every
// iteration, so `set` inside a loop does not leak out of it or into the next iteration; that is
// what `namespace` is for), the `loop` object, short-circuit and/or, Python operators, and
// jinja2's default Undefined (prints as nothing, is falsy, fails when used any further).
#pragma once
#include <string>

#include "serve/jinja_ast.h"
#include "serve/jinja_value.h"

namespace dspark::serve::jinja {

// `source` is the normalized template text the body was parsed from (for error positions).
std::string render_body(const Body& body, const std::string& source, const Dict& variables);

}  // namespace dspark::serve::jinja
