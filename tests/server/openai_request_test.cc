// Request bodies straight into parse_generate_body, no server: the edge cases
// fuzzing found (fuzz/regressions/fuzz_openai_request/) stay 400s naming the
// field, never a crash, an exception or a silently wrapped value.
#include <gtest/gtest.h>

#include <string>

#include "core/json_parse.h"
#include "server/openai_request.h"

namespace duet::server {
namespace {

std::optional<ApiError> parse(const std::string& body, bool chat, GenerateRequest* out = nullptr) {
  GenerateRequest r;
  auto e = parse_generate_body(body, chat, r);
  if (out) *out = r;
  return e;
}

TEST(OpenAiRequest, SeedAboveInt64IsOutOfRangeNotWrapped) {
  auto e = parse(R"({"prompt": "a", "seed": 18446744073709551615})", false);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "seed");
  GenerateRequest r;
  ASSERT_FALSE(parse(R"({"prompt": "a", "seed": 9223372036854775807})", false, &r));
  EXPECT_EQ(r.params.sampling.seed, uint64_t{9223372036854775807});
  ASSERT_FALSE(parse(R"({"prompt": "a", "seed": -1})", false, &r));
  EXPECT_EQ(r.params.sampling.seed, ~uint64_t{0});
  e = parse(R"({"prompt": "a", "max_tokens": 18446744073709551615})", false);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "max_tokens");
}

// A "type" that is not a string was read with json::value, which throws.
TEST(OpenAiRequest, NonStringTypesAre400s) {
  auto e = parse(R"({"messages": [{"role": "user", "content": [{"type": 1, "text": "x"}]}]})", true);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "messages[0].content");
  e = parse(R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": null}})", true);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "response_format");
  GenerateRequest r;
  ASSERT_FALSE(parse(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}],
                         "response_format": {"type": "text"}})", true, &r));
  EXPECT_EQ(r.messages.at(0).content, "x");
}

TEST(OpenAiRequest, InvalidJsonAndNonObjects) {
  for (const char* body : {"", "{", "[1]", "null", "\"x\"", "{\"prompt\": \"\xff\"}"}) {
    auto e = parse(body, false);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->status, 400);
  }
}

// A token id as JSON writes an integer; "05" could mean 5 or be a typo.
TEST(OpenAiRequest, LogitBiasKeysAreIntegersWithoutLeadingZeros) {
  for (const char* key : {"05", "00", "+5", " 5", "5.0", "-1", "", "1e3", "1234567890"}) {
    auto e = parse(std::string(R"({"prompt": "a", "logit_bias": {")") + key + R"(": 1}})", false);
    ASSERT_TRUE(e) << key;
    EXPECT_EQ(e->param, "logit_bias") << key;
  }
  for (const char* key : {"0", "5", "123456789"}) {
    GenerateRequest r;
    ASSERT_FALSE(parse(std::string(R"({"prompt": "a", "logit_bias": {")") + key + R"(": 1}})", false, &r)) << key;
    ASSERT_EQ(r.params.sampling.logit_bias.size(), 1u);
    EXPECT_EQ(r.params.sampling.logit_bias[0].token, std::stoi(key));
  }
}

// Nesting is bounded while the body is parsed, whichever field holds it.
TEST(OpenAiRequest, BodiesNestedPastTheBoundAre400sNamingIt) {
  const std::string deep = std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  for (const std::string& body : {R"({"prompt": "a", "stop": )" + deep + "}",
                                  R"({"messages": [{"role": "user", "content": )" + deep + "}]}", deep}) {
    auto e = parse(body, body.find("messages") != std::string::npos);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code, "json_too_deep");
    EXPECT_NE(e->message.find("nested deeper than " + std::to_string(kMaxJsonDepth)), std::string::npos);
  }
}

}  // namespace
}  // namespace duet::server
