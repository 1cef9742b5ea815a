// A grammar from untrusted text, as a request's `grammar` or
// `response_format` brings it: the first byte picks GBNF (even) or a JSON
// Schema (odd); the text up to a NUL is the grammar, what follows is output
// a model might write, fed to a matcher in pieces of 1-8 bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool schema = data[0] & 1;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t nul = rest.find('\0');
  const std::string_view text = rest.substr(0, nul);
  const std::string_view output = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  // Smaller than the server's limits, so each input stays fast; the limit
  // checks themselves are the same code.
  duet::GrammarLimits limits;
  limits.max_elements = 1 << 16;
  auto g = schema ? duet::json_schema_to_grammar(text) : duet::Grammar::from_gbnf(text, limits);
  if (!g) return 0;
  duet::GrammarMatcher m(*g);
  for (size_t at = 0; at < output.size();) {
    const size_t n = 1 + (static_cast<unsigned char>(output[at]) & 7);
    if (!m.accept_bytes(output.substr(at, n))) break;
    at += n;
  }
  (void)m.can_end();
  return 0;
}
