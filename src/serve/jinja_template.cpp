#include "serve/jinja_template.h"

#include "serve/jinja_lexer.h"
#include "serve/jinja_parser.h"
#include "serve/jinja_render.h"

namespace dspark::serve::jinja {

Template Template::parse(const std::string& source) {
  auto parsed = std::make_shared<Parsed>();
  parsed->source = normalize_source(source);
  parsed->body = parse_template(parsed->source);
  Template result;
  result.parsed_ = std::move(parsed);
  return result;
}

std::string Template::render(const Dict& variables) const {
  return render_body(parsed_->body, parsed_->source, variables);
}

}  // namespace dspark::serve::jinja
