// JSON Schemas compiled to grammars accept the documents they should and
// reject the ones they should not; bad schemas fail with the JSON pointer
// and the keyword named; pathological ones hit a limit quickly.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar_test_util.h"

namespace duet {
namespace {

struct Case {
  const char* name;
  const char* schema;
  std::vector<const char*> valid;
  std::vector<const char*> invalid;
};

using testing::matches;

const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {"any_object", R"({"type":"object"})",
       {R"({})", R"({"a":1})", R"({ "a" : [1, {"b": null}], "c": "x" })", "{\n  \"k\": true\n}"},
       {R"([])", R"({"a"})", R"({"a":1,})", R"("x")", R"({"a":01})"}},
      {"person", R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false})",
       {R"({"name":"Ann","age":31})", R"({ "name": "B", "age": 150 })", R"({"name":"","age":0})"},
       {R"({"name":"Ann"})", R"({"age":31,"name":"Ann"})", R"({"name":"Ann","age":151})", R"({"name":"Ann","age":-1})",
        R"({"name":"Ann","age":31,"x":1})", R"({"name":3,"age":3})"}},
      {"optional_props", R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"},"c":{"type":"boolean"}},"required":["b"],"additionalProperties":false})",
       {R"({"b":1})", R"({"a":"x","b":2.5})", R"({"b":-3e2,"c":true})", R"({"b":9.5E+99})", R"({"a":"","b":0,"c":false})"},
       {R"({})", R"({"a":"x"})", R"({"a":"x","c":true})", R"({"c":true,"b":1})", R"({"b":1,"b":2})",
        R"({"b":7E363})", R"({"b":1e-400})"}},
      {"extra_props_default", R"({"type":"object","properties":{"ab":{"type":"integer"},"abc":{"type":"integer"}}})",
       {R"({})", R"({"ab":1})", R"({"ab":1,"abc":2,"a":"x","abcd":[1],"zz":null})", R"({"b":true})"},
       {R"({"ab":"x"})", R"({"ab":1,"ab":2})", R"({"x":1,"ab":2})", R"({"ab":1,"abc":2,"abc":3})"}},
      {"extra_props_schema", R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":{"type":"string","maxLength":3}})",
       {R"({"id":1})", R"({"id":1,"x":"abc","y":""})"},
       {R"({"id":1,"x":"abcd"})", R"({"id":1,"x":1})", R"({"x":"a"})"}},
      {"enum", R"({"enum":["red","green",3,null,{"x":[1]}]})",
       {R"("red")", R"("green")", "3", "null", R"({"x":[1]})"},
       {R"("blue")", "4", R"({"x":[2]})", R"("Red")"}},
      {"const", R"({"const":{"k":"v"}})", {R"({"k":"v"})"}, {R"({"k":"w"})", R"({})"}},
      {"string_length", R"({"type":"string","minLength":2,"maxLength":4})",
       {R"("ab")", R"("abcd")", R"("\n\"")", "\"\xC3\xA9\xC3\xA9\""},
       {R"("a")", R"("abcde")", R"(ab)"}},
      {"string_pattern", R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}(x|yz)?$"})",
       {R"("AB-123")", R"("QZ-000x")", R"("QZ-000yz")"},
       {R"("A-123")", R"("AB-12")", R"("ab-123")", R"("AB-123y")", R"("AB-123xx")"}},
      {"string_pattern_unanchored", R"({"type":"string","pattern":"a\"b"})",
       {R"("a\"b")", R"("xxa\"byy")"}, {R"("ab")", R"("a\"")"}},
      {"date", R"({"type":"string","format":"date"})",
       {R"("2024-02-29")", R"("2023-12-31")", R"("1999-04-30")"},
       {R"("2023-02-29")", R"("2023-04-31")", R"("2023-13-01")", R"("2023-1-01")", R"("2100-02-29")"}},
      {"date_time", R"({"type":"string","format":"date-time"})",
       {R"("2024-01-15T10:20:30Z")", R"("2024-01-15T23:59:59.123+05:30")"},
       {R"("2024-01-15 10:20:30Z")", R"("2024-01-15T24:00:00Z")", R"("2024-01-15T10:20:30")"}},
      {"uuid", R"({"type":"string","format":"uuid"})",
       {R"("123e4567-e89b-12d3-a456-426614174000")"},
       {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")"}},
      {"integer_range", R"({"type":"integer","minimum":-37,"maximum":1234})",
       {"-37", "-1", "0", "9", "10", "999", "1000", "1234"},
       {"-38", "-0", "1235", "2000", "01", "12345", "1.5"}},
      {"integer_exclusive", R"({"type":"integer","exclusiveMinimum":99,"exclusiveMaximum":1001})",
       {"100", "555", "1000"}, {"99", "1001", "5"}},
      {"integer_min_only", R"({"type":"integer","minimum":250})",
       {"250", "999", "1000", "123456789"}, {"249", "25", "-300"}},
      {"number_range", R"({"type":"number","minimum":-5,"maximum":10})",
       {"-5", "-4.99", "0", "3.25", "10", "10.000"}, {"-5.01", "10.5", "11", "-6", "1e3"}},
      {"array_bounds", R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":4})",
       {"[1,2]", "[1, 2, 3, 4]", "[ -1 ,0 ]"}, {"[]", "[1]", "[1,2,3,4,5]", "[1,\"a\"]", "[1,2,]"}},
      {"tuple", R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false,"minItems":1})",
       {R"(["a"])", R"(["a",1])"}, {R"([])", R"([1])", R"(["a","b"])", R"(["a",1,2])"}},
      {"tuple_then_items", R"({"type":"array","prefixItems":[{"type":"boolean"}],"items":{"type":"null"},"minItems":3,"maxItems":4})",
       {"[true,null,null]", "[false,null,null,null]"}, {"[true,null]", "[true,null,null,null,null]", "[null,null,null]"}},
      {"any_of", R"({"anyOf":[{"type":"integer"},{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}]})",
       {"12", R"({"x":"y"})"}, {R"({"y":"x"})", R"("12")", "1.5"}},
      {"one_of_nullable", R"({"oneOf":[{"type":"null"},{"type":"array","items":{"type":"boolean"},"maxItems":3}]})",
       {"null", "[]", "[true,false,true]"}, {"[true,true,true,true]", "false"}},
      {"type_list", R"({"type":["string","null"],"maxLength":3})", {R"("abc")", "null"}, {R"("abcd")", "0"}},
      {"all_of", R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"},"c":{"type":"null"}},"required":["a"],"additionalProperties":false},{"properties":{"b":{"type":"string"}}}]})",
       {R"({"a":1})", R"({"a":1,"c":null})"}, {R"({"a":1,"b":"x"})", R"({"c":null})"}},
      {"recursive_tree", R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":3}},"required":["value"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
       {R"({"value":1})", R"({"value":1,"children":[]})", R"({"value":1,"children":[{"value":2,"children":[{"value":3}]},{"value":4}]})"},
       {R"({"children":[]})", R"({"value":1,"children":[{"value":2},{"value":2},{"value":2},{"value":2}]})",
        R"({"value":1,"children":[{"children":[]}]})"}},
      {"definitions_ref", R"({"definitions":{"pos":{"type":"integer","minimum":1}},"type":"object","properties":{"p":{"$ref":"#/definitions/pos"},"q":{"$ref":"#/definitions/pos"}},"required":["p"],"additionalProperties":false})",
       {R"({"p":1})", R"({"p":5,"q":7})"}, {R"({"p":0})", R"({"q":1})", R"({"p":1,"q":-1})"}},
      {"linked_list", R"({"$ref":"#/$defs/list","$defs":{"list":{"anyOf":[{"type":"null"},{"type":"object","properties":{"head":{"type":"integer"},"tail":{"$ref":"#/$defs/list"}},"required":["head","tail"],"additionalProperties":false}]}}})",
       {"null", R"({"head":1,"tail":null})", R"({"head":1,"tail":{"head":2,"tail":null}})"},
       {R"({"head":1})", R"({"head":1,"tail":{"head":2}})"}},
      {"nested", R"({"type":"object","properties":{"user":{"type":"object","properties":{"name":{"type":"string","minLength":1},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3},"address":{"type":"object","properties":{"zip":{"type":"string","pattern":"^[0-9]{5}$"},"city":{"type":"string"}},"required":["zip"],"additionalProperties":false}},"required":["name","address"],"additionalProperties":false},"created":{"type":"string","format":"date-time"}},"required":["user"],"additionalProperties":false})",
       {R"({"user":{"name":"x","address":{"zip":"12345"}}})",
        R"({"user":{"name":"x","tags":["a","b"],"address":{"zip":"12345","city":"Z"}},"created":"2020-01-01T00:00:00Z"})"},
       {R"({"user":{"name":"","address":{"zip":"12345"}}})", R"({"user":{"name":"x","address":{"zip":"1234"}}})",
        R"({"user":{"name":"x","tags":["c"],"address":{"zip":"12345"}}})"}},
      {"old_tuple_form", R"({"type":"array","items":[{"type":"integer"},{"type":"string"}],"additionalItems":false})",
       {"[]", "[1]", R"([1,"a"])"}, {R"(["a"])", R"([1,"a",2])"}},
      {"empty_schema", R"({})", {"1", R"({"a":[null]})", R"("s")"}, {"nul", "{"}},
      {"bounded_whitespace", R"({"type":"array","items":{"type":"integer"}})",
       {"[1, 2]", "[\n  1,\n  2\n]"}, {"[1,  2]", "[1,\n                                  2]"}},
  };
  return kCases;
}

TEST(JsonSchema, CasesAcceptAndReject) {
  ASSERT_GE(cases().size(), 20u);
  for (const Case& c : cases()) {
    auto g = json_schema_to_grammar(c.schema);
    ASSERT_TRUE(g.ok()) << c.name << ": " << g.error().message;
    for (const char* v : c.valid) EXPECT_TRUE(matches(*g, v)) << c.name << " should accept " << v;
    for (const char* v : c.invalid) EXPECT_FALSE(matches(*g, v)) << c.name << " should reject " << v;
  }
}

TEST(JsonSchema, GeneratedDocumentEndsTheGrammar) {
  // After a closed root object nothing may follow, so generation can stop.
  auto g = json_schema_to_grammar(R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false})");
  ASSERT_TRUE(g.ok());
  GrammarMatcher m(*g);
  ASSERT_TRUE(m.accept_bytes(R"({"a":1})"));
  EXPECT_TRUE(m.is_complete());
}

std::string schema_error(const std::string& schema) {
  auto g = json_schema_to_grammar(schema);
  return g.ok() ? "(no error)" : g.error().message;
}

TEST(JsonSchema, UnsupportedKeywordNamedWithPointer) {
  const std::string e = schema_error(R"({"type":"object","properties":{"n":{"type":"integer","multipleOf":3}}})");
  EXPECT_NE(e.find("'multipleOf'"), std::string::npos) << e;
  EXPECT_NE(e.find("#/properties/n/multipleOf"), std::string::npos) << e;
  const std::string e2 = schema_error(R"({"type":"array","items":{"type":"string"},"uniqueItems":true})");
  EXPECT_NE(e2.find("'uniqueItems'"), std::string::npos) << e2;
  const std::string e3 = schema_error(R"({"type":"string","format":"email"})");
  EXPECT_NE(e3.find("format 'email'"), std::string::npos) << e3;
  EXPECT_NE(e3.find("#/format"), std::string::npos) << e3;
  const std::string e4 = schema_error(R"({"type":"string","pattern":"(?=a)b"})");
  EXPECT_NE(e4.find("#/pattern"), std::string::npos) << e4;
  EXPECT_NE(e4.find("lookaround"), std::string::npos) << e4;
  // Annotations are fine.
  EXPECT_EQ(schema_error(R"({"title":"T","description":"d","$schema":"x","examples":[1],"default":1,"type":"integer"})"),
            "(no error)");
}

TEST(JsonSchema, InvalidSchemaNamesPointer) {
  const std::string e = schema_error(R"({"type":"object","properties":{"a":{"type":"integr"}}})");
  EXPECT_NE(e.find("#/properties/a/type"), std::string::npos) << e;
  EXPECT_NE(e.find("integr"), std::string::npos) << e;
  const std::string e2 = schema_error(R"({"properties":{"a":{"$ref":"#/$defs/missing"}}})");
  EXPECT_NE(e2.find("does not resolve"), std::string::npos) << e2;
  EXPECT_NE(e2.find("#/properties/a/$ref"), std::string::npos) << e2;
  EXPECT_NE(schema_error(R"({"type":"array","minItems":-1})").find("#/minItems"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"integer","minimum":5,"maximum":1})").find("no integer"), std::string::npos);
  EXPECT_NE(schema_error(R"({"enum":[]})").find("#/enum"), std::string::npos);
  EXPECT_NE(schema_error(R"({"properties":{"a":false},"required":["a"]})").find("#/properties/a"), std::string::npos);
  EXPECT_NE(schema_error("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(schema_error(R"({"$ref":"http://example.com/s.json"})").find("not supported"), std::string::npos);
  EXPECT_NE(schema_error(R"([1,2])").find("must be an object"), std::string::npos);
}

TEST(JsonSchema, RecursionWithoutProgressIsAnError) {
  const std::string e = schema_error(R"({"$ref":"#/$defs/a","$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}}})");
  EXPECT_NE(e.find("left-recursive"), std::string::npos) << e;
  EXPECT_NE(schema_error(R"({"$ref":"#"})").find("left-recursive"), std::string::npos);
}

TEST(JsonSchema, DeepAndHugeSchemasHitLimits) {
  std::string deep;
  for (int i = 0; i < 2000; ++i) deep += R"({"type":"array","items":)";
  deep += R"({"type":"null"})";
  for (int i = 0; i < 2000; ++i) deep += "}";
  EXPECT_NE(schema_error(deep).find("deeper than"), std::string::npos) << schema_error(deep).substr(0, 200);
  // Wide: thousands of properties each with an enum of many strings.
  std::string wide = R"({"type":"object","properties":{)";
  for (int i = 0; i < 3000; ++i) {
    wide += (i ? "," : "") + std::string("\"p") + std::to_string(i) + R"(":{"type":"object","properties":{"a":{"type":"string"}}})";
  }
  wide += "}}";
  const std::string e = schema_error(wide);
  EXPECT_TRUE(e.find("more than") != std::string::npos || e.find("too large") != std::string::npos) << e.substr(0, 300);
  // Huge repetition counts are refused rather than expanded.
  EXPECT_NE(schema_error(R"({"type":"string","maxLength":100000000})").find("#/maxLength"), std::string::npos);
}

TEST(JsonSchema, JsonObjectGrammar) {
  auto g = Grammar::from_gbnf(json_object_gbnf());
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(matches(*g, R"({"a": {"b": [1, 2.5e3, "x", true, false, null]}})"));
  EXPECT_TRUE(matches(*g, "{}"));
  EXPECT_TRUE(matches(*g, "{ }"));
  EXPECT_FALSE(matches(*g, R"([1])"));
  EXPECT_FALSE(matches(*g, R"({"a": 1} x)"));
}

}  // namespace
}  // namespace duet
