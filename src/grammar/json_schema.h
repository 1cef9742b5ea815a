// JSON Schema to grammar. The schema is compiled to GBNF text (readable,
// printable) and that text to a Grammar, so one engine serves both.
//
// Supported: type (one or a list), object (properties in the schema's
// order, required/optional, additionalProperties true/false/schema; extra
// keys may not repeat a declared name when the names are plain ASCII),
// enum, const, string (minLength/maxLength, pattern as in regex_to_gbnf.h,
// format date/time/date-time/uuid), integer (minimum/maximum and numeric
// exclusive bounds), number (integer inclusive minimum/maximum; no
// exponent then), boolean, null, array (items, prefixItems, the older
// array form of items with additionalItems, minItems/maxItems), anyOf,
// oneOf (exclusivity not enforced), allOf of object schemas, $ref into the
// same document (#, #/$defs/..., #/definitions/..., any JSON pointer)
// including recursion. Annotations (title, description, default, examples,
// $schema, $id, $comment, deprecated, readOnly, writeOnly) are ignored.
// Any other keyword is an error naming it and its JSON pointer.
//
// Whitespace between JSON tokens is bounded so a model cannot loop on it:
// nothing, one space, or a newline and up to kMaxJsonIndent spaces/tabs of
// indentation. Numerals are at most 16 digits (fraction 16, exponent 2, so
// every one is a finite double).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"
#include "grammar/grammar.h"

namespace duet {

constexpr int kMaxJsonIndent = 16;

struct JsonSchemaLimits {
  int max_depth = 48;                     // nested subschemas
  size_t max_rules = 4000;                // generated GBNF rules
  size_t max_gbnf_bytes = 1 << 20;        // generated GBNF text
  int max_length = 10000;                 // minLength/maxLength/minItems/maxItems
};

// Errors carry code "json_schema" and the JSON pointer of the problem.
Result<std::string> json_schema_to_gbnf(std::string_view schema_json, const JsonSchemaLimits& limits = {});
Result<std::shared_ptr<const Grammar>> json_schema_to_grammar(std::string_view schema_json,
                                                              const JsonSchemaLimits& limits = {});

// Any JSON object (response_format {"type":"json_object"}).
std::string json_object_gbnf();

}  // namespace duet
