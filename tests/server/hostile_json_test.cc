// JSON nested far past any real request, at every field that takes JSON, on
// every endpoint, over a socket: a 400 that says so (or, where the deep
// text is only a string's content, a normal answer), the server alive, the
// next request served. Before the depth bound was checked while parsing,
// one of these (~200 KB of "[[[...") overflowed a worker's stack.
#include <gtest/gtest.h>

#include <string>

#include "core/json_parse.h"
#include "server_harness.h"

namespace duet::testing {
namespace {

using nlohmann::json;

constexpr int kDeep = 200000;

std::string deep_arrays(int depth = kDeep) { return std::string(depth, '[') + std::string(depth, ']'); }
std::string deep_objects(int depth = kDeep / 2) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "{\"a\":";
  return s + "1" + std::string(depth, '}');
}

const char* kUser = R"({"role": "user", "content": "Once upon a time"})";

struct Case {
  const char* name;
  const char* path;
  std::string body;
};

// Each field that takes JSON, with `deep` in it.
std::vector<Case> cases(const std::string& deep) {
  const std::string chat = std::string(R"({"max_tokens": 2, "messages": [)") + kUser + "]";
  return {
      {"response_format.json_schema.schema", "/v1/chat/completions",
       chat + R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": )" + deep + "}}}"},
      {"response_format.schema", "/v1/completions",
       R"({"prompt": "a", "response_format": {"type": "json_object", "schema": )" + deep + "}}"},
      {"tools[].function.parameters", "/v1/chat/completions",
       chat + R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": )" + deep + "}}]}"},
      {"messages[].content", "/v1/chat/completions",
       R"({"max_tokens": 2, "messages": [{"role": "user", "content": )" + deep + "}]}"},
      {"chat_template_kwargs", "/v1/chat/completions", chat + R"(, "chat_template_kwargs": {"x": )" + deep + "}}"},
      {"prompt", "/v1/completions", R"({"max_tokens": 2, "prompt": )" + deep + "}"},
      {"logit_bias", "/v1/completions", R"({"prompt": "a", "logit_bias": {"1": )" + deep + "}}"},
      {"embeddings input", "/v1/embeddings", R"({"input": )" + deep + "}"},
      {"tokenize content", "/tokenize", R"({"content": )" + deep + "}"},
      {"detokenize tokens", "/detokenize", R"({"tokens": )" + deep + "}"},
      {"the whole body", "/v1/chat/completions", deep},
  };
}

void expect_served(TestServer& s) {
  auto c = s.client();
  auto r = c.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 4, "temperature": 0})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 4);
}

TEST(HostileJson, DeepNestingAtEveryFieldIsA400AndTheServerStaysUp) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  for (const std::string& deep : {deep_arrays(), deep_objects()}) {
    for (const Case& k : cases(deep)) {
      SCOPED_TRACE(k.name);
      ASSERT_LT(k.body.size(), size_t{1} << 20);
      auto c = s.client();
      auto r = c.Post(k.path, k.body, "application/json");
      ASSERT_TRUE(r) << "no answer: the server went down";
      EXPECT_EQ(r->status, 400);
      const json e = json::parse(r->body)["error"];
      EXPECT_EQ(e["code"], "json_too_deep") << r->body;
      if (std::string(k.name) != "the whole body") EXPECT_FALSE(e["param"].is_null()) << r->body;
      EXPECT_NE(e["message"].get<std::string>().find("nested deeper than"), std::string::npos);
      expect_served(s);
    }
  }
}

// Tool-call arguments come as a JSON string; the template gets the object
// when the string holds one. 450 k levels inside that string are read as
// the string they are: rendered, they make a prompt of ~900 k tokens, which
// this context refuses.
TEST(HostileJson, DeepToolCallArgumentsStayAString) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const json body = {
      {"max_tokens", 2},
      {"messages",
       {{{"role", "user"}, {"content", "hi"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", "call_1"}, {"type", "function"},
            {"function", {{"name", "f"}, {"arguments", deep_arrays(450000)}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "ok"}}}}};
  const std::string text = body.dump();
  ASSERT_LT(text.size(), size_t{1} << 20);
  auto c = s.client();
  auto r = c.Post("/v1/chat/completions", text, "application/json");
  ASSERT_TRUE(r) << "no answer: the server went down";
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "context_length_exceeded") << r->body.substr(0, 300);
  expect_served(s);
}

// Nesting within the bound is a request like any other.
TEST(HostileJson, NestingWithinTheBoundIsServed) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string body = std::string(R"({"max_tokens": 2, "messages": [)") + kUser +
                           R"(], "chat_template_kwargs": {"x": )" + deep_arrays(kMaxJsonDepth - 3) + "}}";
  auto c = s.client();
  auto r = c.Post("/v1/chat/completions", body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body.substr(0, 300);
}

}  // namespace
}  // namespace duet::testing
