// Recursive-descent parser for the Jinja subset. Tags: if/elif/else, for (with loop filter and
// else), set (name, tuple, namespace attribute, block form), break/continue and transformers'
// generation block. Expressions follow jinja2's grammar and precedence. Any other tag or syntax
// is a one-line dspark::Error naming the line and column, never a silent misparse.
#pragma once
#include <string>

#include "serve/jinja_ast.h"

namespace dspark::serve::jinja {

// `source` must already be normalized (normalize_source).
Body parse_template(const std::string& source);

}  // namespace dspark::serve::jinja
