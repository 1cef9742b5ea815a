#include "core/json_parse.h"

#include <gtest/gtest.h>

#include <string>

namespace duet {
namespace {

std::string arrays(int depth, const std::string& inner = "") {
  return std::string(static_cast<size_t>(depth), '[') + inner + std::string(static_cast<size_t>(depth), ']');
}

std::string objects(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "{\"k\":";
  s += "1";
  s += std::string(static_cast<size_t>(depth), '}');
  return s;
}

TEST(JsonParse, ValuesUpToTheBoundParseAsNlohmannWould) {
  for (const std::string& text : {arrays(kMaxJsonDepth, "1"), objects(kMaxJsonDepth),
                                  std::string(R"({"a": [1, 2.5, "x", null, true], "b": {"c": {}}})"),
                                  std::string("  \"just a string\" "), std::string("-0.5e3")}) {
    auto r = parse_json(text);
    ASSERT_TRUE(r.ok()) << text.substr(0, 40) << ": " << r.error().message;
    EXPECT_EQ(*r, nlohmann::json::parse(text));
  }
}

TEST(JsonParse, OneLevelPastTheBoundIsRefusedAsTooDeep) {
  for (const std::string& text : {arrays(kMaxJsonDepth + 1), objects(kMaxJsonDepth + 1),
                                  arrays(kMaxJsonDepth + 1, "{}")}) {
    auto r = parse_json(text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, "json_too_deep");
    EXPECT_NE(r.error().message.find(std::to_string(kMaxJsonDepth)), std::string::npos);
  }
  // Siblings do not add up: depth is nesting, not the count of brackets.
  std::string wide = "[";
  for (int i = 0; i < 1000; ++i) wide += (i ? "," : "") + arrays(kMaxJsonDepth - 1);
  wide += "]";
  EXPECT_TRUE(parse_json(wide).ok());
}

// What took a worker down: 500 k levels inside a 1 MiB body. Refused while
// parsing, so nothing walks it afterwards; unclosed and closed alike.
TEST(JsonParse, AMegabyteOfNestingIsRefusedWithoutRecursion) {
  const std::string closed = arrays(500000);
  EXPECT_EQ(parse_json(closed).error().code, "json_too_deep");
  EXPECT_EQ(parse_json(std::string(1 << 20, '[')).error().code, "json_too_deep");
  EXPECT_EQ(parse_json<nlohmann::ordered_json>(objects(200000)).error().code, "json_too_deep");
}

TEST(JsonParse, InvalidTextIsNotJsonNotTooDeep) {
  for (const char* text : {"", "{", "[1,]", "{\"a\" 1}", "1 2", "\"\xff\"", "[1] x", "nul"}) {
    auto r = parse_json(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_TRUE(r.error().code.empty()) << text;
    EXPECT_NE(r.error().message.find("not valid JSON"), std::string::npos);
  }
}

TEST(JsonParse, OrderedJsonKeepsTheKeyOrder) {
  auto r = parse_json<nlohmann::ordered_json>(R"({"z": 1, "a": {"y": 2, "b": 3}})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->dump(), R"({"z":1,"a":{"y":2,"b":3}})");
}

TEST(JsonParse, ASmallerBoundIsHonoured) {
  EXPECT_TRUE(parse_json(arrays(3), 3).ok());
  EXPECT_FALSE(parse_json(arrays(4), 3).ok());
}

}  // namespace
}  // namespace duet
