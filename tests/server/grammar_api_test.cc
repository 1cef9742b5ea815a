// Constrained output over the OpenAI API on a real socket: `grammar` and
// `response_format` (json_object, json_schema) on both endpoints, streamed
// and whole alike, and 400s that say what is wrong with a grammar/schema.
#include <gtest/gtest.h>

#include "grammar/grammar_matcher.h"
#include "server_harness.h"

namespace duet::testing {
namespace {

using nlohmann::json;

json post(TestServer& s, const std::string& path, const json& body, int* status = nullptr) {
  auto r = s.client().Post(path, body.dump(), "application/json");
  if (!r) return {};
  if (status) *status = r->status;
  return json::parse(r->body, nullptr, false);
}

// The content of a streamed chat completion, put back together.
std::string streamed_chat_content(TestServer& s, json body) {
  body["stream"] = true;
  auto r = s.client().Post("/v1/chat/completions", body.dump(), "application/json");
  if (!r) return "(no response)";
  std::string content;
  for (const std::string& data : sse_events(r->body)) {
    if (data == "[DONE]") break;
    const json ev = json::parse(data, nullptr, false);
    if (ev.is_discarded() || !ev.contains("choices") || ev["choices"].empty()) continue;
    const json& delta = ev["choices"][0]["delta"];
    if (delta.contains("content") && delta["content"].is_string()) content += delta["content"].get<std::string>();
  }
  return content;
}

const json kPersonSchema = json::parse(R"({"type":"object","properties":{
  "zeta":{"type":"string","maxLength":8},"alpha":{"type":"integer","minimum":1,"maximum":99},
  "tags":{"type":"array","items":{"enum":["x","y"]},"maxItems":2}},
  "required":["zeta","alpha"],"additionalProperties":false})");

json chat_body(const json& response_format, uint64_t seed) {
  return {{"messages", {{{"role", "user"}, {"content", "Tell me about a person."}}}},
          {"max_tokens", 300}, {"temperature", 1.0}, {"seed", seed}, {"response_format", response_format}};
}

TEST(GrammarApi, CompletionFollowsGbnf) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string g = R"(root ::= " upon a " ("cat" | "dog") ("," " " [a-z]+){1,3} ".")";
  for (uint64_t seed : {1, 2, 3}) {
    int status = 0;
    json r = post(s, "/v1/completions",
                  {{"prompt", "Once"}, {"max_tokens", 200}, {"temperature", 1.0}, {"seed", seed}, {"grammar", g}}, &status);
    ASSERT_EQ(status, 200) << r.dump();
    const std::string text = r["choices"][0]["text"];
    auto compiled = Grammar::from_gbnf(g);
    ASSERT_TRUE(compiled.ok());
    GrammarMatcher m(*compiled);
    EXPECT_TRUE(m.accept_bytes(text) && m.can_end()) << text;
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << r.dump();
  }
}

TEST(GrammarApi, ChatJsonSchemaValidatesAndStreamsTheSame) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const json rf = {{"type", "json_schema"}, {"json_schema", {{"name", "person"}, {"strict", true}, {"schema", kPersonSchema}}}};
  for (uint64_t seed : {11, 12, 13}) {
    int status = 0;
    const json body = chat_body(rf, seed);
    json r = post(s, "/v1/chat/completions", body, &status);
    ASSERT_EQ(status, 200) << r.dump();
    const std::string content = r["choices"][0]["message"]["content"];
    const json j = json::parse(content, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << content;
    EXPECT_TRUE(j["zeta"].is_string() && j["zeta"].get<std::string>().size() <= 8) << content;
    EXPECT_TRUE(j["alpha"].is_number_integer() && j["alpha"] >= 1 && j["alpha"] <= 99) << content;
    for (auto it = j.begin(); it != j.end(); ++it)
      EXPECT_TRUE(it.key() == "zeta" || it.key() == "alpha" || it.key() == "tags") << content;
    EXPECT_EQ(streamed_chat_content(s, body), content);
  }
}

TEST(GrammarApi, SchemaKeepsTheClientsPropertyOrder) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  // Written by hand: a JSON library on this side might sort the keys.
  const std::string body = R"({"prompt": "x", "max_tokens": 100, "seed": 3, "response_format": {"type": "json_schema",
    "json_schema": {"name": "o", "schema": {"type": "object", "properties": {"zeta": {"const": 1}, "alpha": {"const": 2}},
    "required": ["zeta", "alpha"], "additionalProperties": false}}}})";
  auto r = s.client().Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string text = json::parse(r->body)["choices"][0]["text"];
  EXPECT_LT(text.find("\"zeta\""), text.find("\"alpha\"")) << text;
  EXPECT_NE(text.find("\"alpha\""), std::string::npos) << text;
}

TEST(GrammarApi, JsonObjectOnBothEndpoints) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  int status = 0;
  json r = post(s, "/v1/chat/completions", chat_body({{"type", "json_object"}}, 5), &status);
  ASSERT_EQ(status, 200) << r.dump();
  const std::string content = r["choices"][0]["message"]["content"];
  if (r["choices"][0]["finish_reason"] == "stop") {
    const json j = json::parse(content, nullptr, false);
    EXPECT_TRUE(j.is_object()) << content;
  }
  EXPECT_EQ(content.substr(0, 1), "{");
  r = post(s, "/v1/completions",
           {{"prompt", "x"}, {"max_tokens", 100}, {"seed", 2}, {"response_format", {{"type", "json_object"}, {"schema", {{"const", "k"}}}}}},
           &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["choices"][0]["text"], "\"k\"");
}

void expect_400(TestServer& s, const std::string& path, const json& body, const std::string& param,
                const std::vector<std::string>& message_has) {
  int status = 0;
  json r = post(s, path, body, &status);
  EXPECT_EQ(status, 400) << r.dump();
  ASSERT_TRUE(r.contains("error")) << r.dump();
  EXPECT_EQ(r["error"]["param"], param) << r.dump();
  const std::string msg = r["error"]["message"];
  for (const std::string& m : message_has) EXPECT_NE(msg.find(m), std::string::npos) << "'" << m << "' not in: " << msg;
}

json schema_format(const json& schema) {
  return {{"type", "json_schema"}, {"json_schema", {{"name", "s"}, {"schema", schema}}}};
}

TEST(GrammarApi, BadGrammarsAndSchemasAre400sSayingWhy) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  expect_400(s, "/v1/completions", {{"prompt", "x"}, {"grammar", "root ::= \"a\" | (\"b\""}}, "grammar",
             {"1:", "expected ')'"});
  expect_400(s, "/v1/completions", {{"prompt", "x"}, {"grammar", "root ::= undefined-rule"}}, "grammar",
             {"undefined-rule", "not defined"});
  expect_400(s, "/v1/chat/completions", chat_body(schema_format({{"type", "object"}, {"properties", {{"n", {{"type", "integer"}, {"multipleOf", 2}}}}}}), 1),
             "response_format.json_schema.schema", {"'multipleOf'", "#/properties/n/multipleOf"});
  expect_400(s, "/v1/chat/completions", chat_body(schema_format({{"type", "strnig"}}), 1),
             "response_format.json_schema.schema", {"#/type", "strnig"});
  expect_400(s, "/v1/chat/completions", chat_body(schema_format({{"$ref", "#/$defs/nope"}}), 1),
             "response_format.json_schema.schema", {"does not resolve"});
  // Past the schema compiler's 48 subschemas, and past the body's 128
  // levels of JSON (refused while parsing, naming the top-level field).
  json deep = {{"type", "null"}};
  for (int i = 0; i < 60; ++i) deep = {{"type", "array"}, {"items", deep}};
  expect_400(s, "/v1/chat/completions", chat_body(schema_format(deep), 1), "response_format.json_schema.schema",
             {"deeper than 48"});
  for (int i = 0; i < 440; ++i) deep = {{"type", "array"}, {"items", deep}};
  expect_400(s, "/v1/chat/completions", chat_body(schema_format(deep), 1), "response_format",
             {"nested deeper than 128"});
  expect_400(s, "/v1/chat/completions", chat_body({{"type", "json_schema"}, {"json_schema", {{"name", "s"}}}}, 1),
             "response_format.json_schema.schema", {"required"});
  expect_400(s, "/v1/chat/completions", chat_body({{"type", "yaml"}}, 1), "response_format.type", {"yaml"});
  json both = chat_body({{"type", "json_object"}}, 1);
  both["grammar"] = "root ::= \"a\"";
  expect_400(s, "/v1/chat/completions", both, "grammar", {"either"});
  // The server still serves after all that.
  int status = 0;
  post(s, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}}, &status);
  EXPECT_EQ(status, 200);
}

}  // namespace
}  // namespace duet::testing
