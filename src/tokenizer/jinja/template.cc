#include "tokenizer/jinja/template.h"

#include "tokenizer/jinja/evaluator.h"
#include "tokenizer/jinja/parser.h"

namespace duet::jinja {

struct Template::Parsed {
  Body body;
};

Result<Template> Template::parse(std::string_view source) {
  DUET_ASSIGN(const std::vector<Token> tokens, lex(source));
  DUET_ASSIGN(Body body, jinja::parse(tokens));
  Template t;
  t.parsed_ = std::make_shared<const Parsed>(Parsed{std::move(body)});
  return t;
}

Result<std::string> Template::render(const Dict& context, const Limits& limits) const {
  return evaluate(parsed_->body, context, limits);
}

}  // namespace duet::jinja
