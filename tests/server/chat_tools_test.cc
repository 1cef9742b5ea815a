// Tools apart from any model: reading tools and tool_choice, and the
// grammar a forced call follows in each format, checked by feeding it
// strings and by parsing what it accepts back with the output parser.
#include "server/chat_tools.h"

#include <gtest/gtest.h>

#include "grammar/grammar_matcher.h"
#include "server/chat_output_parser.h"

namespace duet::server {
namespace {

using Json = nlohmann::ordered_json;

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"$ref": "#/$defs/city"}, "days": {"type": "integer"}},
    "required": ["city"], "additionalProperties": false,
    "$defs": {"city": {"enum": ["Paris", "Oslo"]}}}}},
  {"type": "function", "function": {"name": "ping"}}
])");

ChatTools tools(ChatTools::Choice choice, bool parallel = true, std::string named = {}) {
  ChatTools t;
  t.tools = kTools;
  t.choice = choice;
  t.parallel = parallel;
  t.named = std::move(named);
  return t;
}

bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.can_end();
}

// What the output parser makes of `text` in `style`.
std::vector<ToolCall> parsed(ToolCallStyle style, std::string_view text) {
  ChatFormat f;
  f.tools = style;
  f.think_open = "<think>", f.think_close = "</think>";
  ChatOutputParser p(f, true, [] { return std::string("id"); });
  p.feed(text);
  p.finish();
  EXPECT_EQ(p.message().content, "") << text;
  return p.message().tool_calls;
}

TEST(ToolCallGrammar, HermesCallsFollowTheirSchemas) {
  auto g = tool_call_grammar(tools(ChatTools::Choice::kRequired), ToolCallStyle::kHermes);
  ASSERT_TRUE(g.ok()) << g.error().message;
  const std::string one = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 3}}\n</tool_call>";
  const std::string two = one + "\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(accepts(*g, one));
  EXPECT_TRUE(accepts(*g, two));
  EXPECT_FALSE(accepts(*g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>"));
  EXPECT_FALSE(accepts(*g, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(accepts(*g, "Sure! " + one));
  const auto calls = parsed(ToolCallStyle::kHermes, two);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].arguments, R"({"city":"Oslo","days":3})");
  EXPECT_EQ(calls[1].name, "ping");

  auto single = tool_call_grammar(tools(ChatTools::Choice::kRequired, /*parallel=*/false), ToolCallStyle::kHermes);
  ASSERT_TRUE(single.ok());
  EXPECT_TRUE(accepts(*single, one));
  EXPECT_FALSE(accepts(*single, two));
}

TEST(ToolCallGrammar, NamedChoiceAllowsOnlyThatFunction) {
  auto g = tool_call_grammar(tools(ChatTools::Choice::kNamed, true, "ping"), ToolCallStyle::kHermes);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(accepts(*g, "<tool_call>\n{\"name\": \"ping\", \"arguments\": {\"any\": [1]}}\n</tool_call>"));
  EXPECT_FALSE(accepts(*g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
}

TEST(ToolCallGrammar, Llama3AndMistralShapes) {
  auto llama = tool_call_grammar(tools(ChatTools::Choice::kRequired), ToolCallStyle::kLlama3);
  ASSERT_TRUE(llama.ok()) << llama.error().message;
  const std::string l = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; {\"name\": \"ping\", \"parameters\": {}}";
  EXPECT_TRUE(accepts(*llama, l));
  EXPECT_FALSE(accepts(*llama, "{\"name\": \"ping\", \"arguments\": {}}"));
  EXPECT_EQ(parsed(ToolCallStyle::kLlama3, l).size(), 2u);

  auto mistral = tool_call_grammar(tools(ChatTools::Choice::kRequired), ToolCallStyle::kMistral);
  ASSERT_TRUE(mistral.ok()) << mistral.error().message;
  const std::string m = "[TOOL_CALLS][{\"name\": \"ping\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]";
  EXPECT_TRUE(accepts(*mistral, m));
  EXPECT_FALSE(accepts(*mistral, "[TOOL_CALLS][]"));
  const auto calls = parsed(ToolCallStyle::kMistral, m);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].arguments, R"({"city":"Oslo"})");
}

TEST(ToolCallGrammar, MistralNameArgsShape) {
  auto g = tool_call_grammar(tools(ChatTools::Choice::kRequired), ToolCallStyle::kMistralArgs);
  ASSERT_TRUE(g.ok()) << g.error().message;
  const std::string two = "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\", \"days\": 3}[TOOL_CALLS]ping[ARGS]{}";
  EXPECT_TRUE(accepts(*g, two));
  EXPECT_TRUE(accepts(*g, "[TOOL_CALLS]ping[ARGS]{\"any\": [1]}"));
  // Each name with its own tool's schema ($ref into the tool's $defs included).
  EXPECT_FALSE(accepts(*g, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}"));
  EXPECT_FALSE(accepts(*g, "[TOOL_CALLS]ping[ARGS]{\"city\": \"Oslo\"}x"));
  EXPECT_FALSE(accepts(*g, "[TOOL_CALLS]nope[ARGS]{}"));
  EXPECT_FALSE(accepts(*g, "[TOOL_CALLS][{\"name\": \"ping\", \"arguments\": {}}]"));
  const auto calls = parsed(ToolCallStyle::kMistralArgs, two);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].arguments, R"({"city":"Oslo","days":3})");
  EXPECT_EQ(calls[1].name, "ping");

  auto named = tool_call_grammar(tools(ChatTools::Choice::kNamed, false, "get_weather"), ToolCallStyle::kMistralArgs);
  ASSERT_TRUE(named.ok()) << named.error().message;
  EXPECT_TRUE(accepts(*named, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}"));
  EXPECT_FALSE(accepts(*named, "[TOOL_CALLS]ping[ARGS]{}"));
  EXPECT_FALSE(accepts(*named, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_weather[ARGS]{}"));
}

TEST(ToolCallGrammar, PrefixClosesReasoningFirst) {
  auto g = tool_call_grammar(tools(ChatTools::Choice::kNamed, false, "ping"), ToolCallStyle::kHermes, "</think>\n\n");
  ASSERT_TRUE(g.ok());
  const std::string call = "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(accepts(*g, "</think>\n\n" + call));
  EXPECT_FALSE(accepts(*g, call));
}

TEST(ToolCallGrammar, UnsupportedSchemaNamesTheTool) {
  ChatTools t = tools(ChatTools::Choice::kRequired);
  t.tools[1]["function"]["parameters"] = Json::parse(R"({"type": "object", "patternProperties": {}})");
  auto g = tool_call_grammar(t, ToolCallStyle::kHermes);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("tool 'ping' (tools[1])"), std::string::npos) << g.error().message;
  EXPECT_NE(g.error().message.find("patternProperties"), std::string::npos) << g.error().message;
}

TEST(ReadChatTools, ChoicesAndErrors) {
  ChatTools t;
  EXPECT_FALSE(read_chat_tools(Json{{"tools", kTools}, {"tool_choice", "required"}, {"parallel_tool_calls", false}}, t));
  EXPECT_TRUE(t.forced());
  EXPECT_FALSE(t.parallel);
  ChatTools none;
  EXPECT_FALSE(read_chat_tools(Json{{"tools", kTools}, {"tool_choice", "none"}}, none));
  EXPECT_FALSE(none.offered());
  ChatTools named;
  EXPECT_FALSE(read_chat_tools(
      Json{{"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "ping"}}}}}}, named));
  EXPECT_EQ(named.named, "ping");

  const auto error = [](const Json& body) {
    ChatTools x;
    auto e = read_chat_tools(body, x);
    return e ? e->message : std::string("(accepted)");
  };
  EXPECT_NE(error(Json{{"tools", kTools}, {"tool_choice", {{"function", {{"name", "nope"}}}}}}).find("'nope'"),
            std::string::npos);
  EXPECT_NE(error(Json{{"tool_choice", "required"}}).find("no 'tools'"), std::string::npos);
  EXPECT_EQ(error(Json{{"tool_choice", "auto"}}), "(accepted)");
  EXPECT_NE(error(Json{{"tools", Json::array({{{"type", "function"}, {"function", {{"name", "a b"}}}}})}}).find("function.name"),
            std::string::npos);
  EXPECT_NE(error(Json{{"tools", Json::array({{{"type", "function"},
                                                {"function", {{"name", "f"}, {"parameters", {{"required", "x"}}}}}}})}})
                .find("tool 'f' (tools[0]) 'required' must be"),
            std::string::npos);
  EXPECT_NE(error(Json{{"functions", Json::array()}}).find("deprecated"), std::string::npos);
}

}  // namespace
}  // namespace duet::server
