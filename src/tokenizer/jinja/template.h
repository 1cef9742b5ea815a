// A parsed Jinja template (the subset chat templates use) and its rendering
// under limits, so that an untrusted template cannot hang or exhaust memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"
#include "tokenizer/jinja/value.h"

namespace duet::jinja {

struct Limits {
  size_t max_output_bytes = 16u << 20;
  size_t max_value_size = 16u << 20;  // bytes of one string or list (Value::memory_hint)
  int64_t max_work = int64_t{1} << 25;  // loop iterations (64 each) plus sizes of all values computed
};

class Template {
 public:
  // Lexes and parses; errors name the construct and its line:column.
  static Result<Template> parse(std::string_view source);

  // Renders with `context` as the global variables.
  Result<std::string> render(const Dict& context, const Limits& limits = {}) const;

 private:
  struct Parsed;
  std::shared_ptr<const Parsed> parsed_;
};

}  // namespace duet::jinja
