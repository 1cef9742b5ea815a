// The chat output parser apart from any model: each tool-call format,
// reasoning blocks, malformed calls falling back to content, and the same
// result however the text is split into feeds.
#include "server/chat_output_parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace duet::server {
namespace {

ChatFormat hermes_format(bool think = false) {
  ChatFormat f;
  f.tools = ToolCallStyle::kHermes;
  if (think) f.think_open = "<think>", f.think_close = "</think>";
  return f;
}

ChatFormat style(ToolCallStyle s) {
  ChatFormat f;
  f.tools = s;
  return f;
}

// The message rebuilt from the deltas alone (what a streaming client sees),
// after checking it equals the parser's own accumulation.
ParsedMessage run(const ChatFormat& f, bool tools, const std::vector<std::string>& pieces, bool forced = false) {
  int n = 0;
  ChatOutputParser p(f, tools, [&n] { return "call" + std::to_string(n++); }, forced);
  ParsedMessage m;
  auto take = [&](const std::vector<ChatDelta>& ds) {
    for (const ChatDelta& d : ds) {
      if (d.kind == ChatDelta::kContent) m.content += d.text;
      if (d.kind == ChatDelta::kReasoning) m.reasoning += d.text;
      if (d.kind == ChatDelta::kToolCall) {
        EXPECT_EQ(d.index, static_cast<int>(m.tool_calls.size()));
        m.tool_calls.push_back(d.call);
      }
      if (d.kind == ChatDelta::kToolCallArguments) {
        EXPECT_EQ(d.index + 1, static_cast<int>(m.tool_calls.size()));
        if (!m.tool_calls.empty()) m.tool_calls.back().arguments += d.text;
      }
    }
  };
  for (const std::string& s : pieces) take(p.feed(s));
  take(p.finish());
  EXPECT_EQ(m.content, p.message().content);
  EXPECT_EQ(m.reasoning, p.message().reasoning);
  EXPECT_EQ(m.tool_calls.size(), p.message().tool_calls.size());
  for (size_t i = 0; i < m.tool_calls.size() && i < p.message().tool_calls.size(); ++i)
    EXPECT_EQ(m.tool_calls[i].arguments, p.message().tool_calls[i].arguments);
  return m;
}

// Every split of `text` in two, and one byte at a time, all agree with the
// whole text fed at once; returns that result.
ParsedMessage run_all_splits(const ChatFormat& f, bool tools, const std::string& text, bool forced = false) {
  const ParsedMessage whole = run(f, tools, {text}, forced);
  auto same = [&](const ParsedMessage& m, const std::string& how) {
    EXPECT_EQ(m.content, whole.content) << how;
    EXPECT_EQ(m.reasoning, whole.reasoning) << how;
    ASSERT_EQ(m.tool_calls.size(), whole.tool_calls.size()) << how;
    for (size_t i = 0; i < m.tool_calls.size(); ++i) {
      EXPECT_EQ(m.tool_calls[i].name, whole.tool_calls[i].name) << how;
      EXPECT_EQ(m.tool_calls[i].arguments, whole.tool_calls[i].arguments) << how;
      EXPECT_EQ(m.tool_calls[i].id, whole.tool_calls[i].id) << how;
    }
  };
  for (size_t i = 0; i <= text.size(); ++i)
    same(run(f, tools, {text.substr(0, i), text.substr(i)}, forced), "split at " + std::to_string(i));
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  same(run(f, tools, bytes, forced), "byte by byte");
  return whole;
}

TEST(ChatOutputParser, PlainTextIsContentUnchanged) {
  const std::string text = "  Hello <b>there</b>, [x] {y} <tool ok\n\n";
  for (bool tools : {false, true}) {
    const ParsedMessage m = run_all_splits(hermes_format(true), tools, text);
    EXPECT_EQ(m.content, text);
    EXPECT_EQ(m.reasoning, "");
    EXPECT_TRUE(m.tool_calls.empty());
  }
}

TEST(ChatOutputParser, HermesCall) {
  const ParsedMessage m = run_all_splits(
      hermes_format(), true,
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": [1, 2]}}\n"
      "</tool_call>\n");
  EXPECT_EQ(m.content, "Let me look.");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"city":"Paris","n":[1,2]})");
  EXPECT_EQ(m.tool_calls[0].id, "call0");
}

TEST(ChatOutputParser, HermesParallelCalls) {
  const ParsedMessage m = run_all_splits(
      hermes_format(), true,
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
      "{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>");
  EXPECT_EQ(m.content, "");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].name, "a");
  EXPECT_EQ(m.tool_calls[0].arguments, "{}");
  EXPECT_EQ(m.tool_calls[1].name, "b");
  EXPECT_EQ(m.tool_calls[1].arguments, R"({"x":1})");  // arguments given as a string holding the object
  EXPECT_EQ(m.tool_calls[1].id, "call1");
}

// Malformed before the head is read (arguments that break after it stream
// as written: chat_output_stream_test.cc).
TEST(ChatOutputParser, MalformedHermesCallsAreContent) {
  const std::vector<std::string> bad = {
      "<tool_call>{\"arguments\": {}}</tool_call>",                       // no name
      "<tool_call>{\"name\": 5, \"arguments\": {}}</tool_call>",          // name not a string
      "<tool_call>{\"name\": \"a\", \"arguments\": [1]}</tool_call>",     // arguments not an object
      "<tool_call>{\"name\": \"a\", \"arguments\": \"nope\"}</tool_call>",
      "<tool_call>[1, 2]</tool_call>",
      "<tool_call>" + std::string(200, '[') + std::string(200, ']') + "</tool_call>",  // too deep
      "<tool_call>\xff\xfe</tool_call>",
  };
  for (const std::string& text : bad) {
    const ParsedMessage m = run_all_splits(hermes_format(), true, text);
    EXPECT_TRUE(m.tool_calls.empty()) << text;
    EXPECT_EQ(m.content, text);
  }
}

TEST(ChatOutputParser, GoodCallBesideMalformedOne) {
  const std::string bad = "<tool_call>{oops}</tool_call>";
  const ParsedMessage m = run_all_splits(
      hermes_format(), true, bad + "\n<tool_call>{\"name\": \"f\", \"arguments\": {\"k\": \"</tool\"}}</tool_call>");
  EXPECT_EQ(m.content, bad);  // the newline before the good call only separated them
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"k":"</tool"})");
}

TEST(ChatOutputParser, UnclosedHermesCallAtTheEnd) {
  const ParsedMessage ok = run_all_splits(hermes_format(), true, "<tool_call>{\"name\": \"f\", \"arguments\": {}}");
  ASSERT_EQ(ok.tool_calls.size(), 1u);
  EXPECT_EQ(ok.content, "");
  const ParsedMessage cut = run_all_splits(hermes_format(), true, "<tool_call>{\"name\": \"f\", \"argu");
  EXPECT_TRUE(cut.tool_calls.empty());
  EXPECT_EQ(cut.content, "<tool_call>{\"name\": \"f\", \"argu");
}

TEST(ChatOutputParser, ToolMarkersAreTextWithoutTools) {
  const std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
  const ParsedMessage m = run_all_splits(hermes_format(), false, text);
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_EQ(m.content, text);
}

TEST(ChatOutputParser, Llama3Calls) {
  const ParsedMessage one =
      run_all_splits(style(ToolCallStyle::kLlama3), true, "{\"name\": \"f\", \"parameters\": {\"q\": \"x\"}}");
  ASSERT_EQ(one.tool_calls.size(), 1u);
  EXPECT_EQ(one.tool_calls[0].name, "f");
  EXPECT_EQ(one.tool_calls[0].arguments, R"({"q":"x"})");
  EXPECT_EQ(one.content, "");

  const ParsedMessage two = run_all_splits(
      style(ToolCallStyle::kLlama3), true,
      "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": {\"a\": 1}}");
  ASSERT_EQ(two.tool_calls.size(), 2u);
  EXPECT_EQ(two.tool_calls[1].name, "g");

  const std::string not_call = "{\"answer\": 42}";
  const ParsedMessage plain = run_all_splits(style(ToolCallStyle::kLlama3), true, not_call);
  EXPECT_TRUE(plain.tool_calls.empty());
  EXPECT_EQ(plain.content, not_call);
}

TEST(ChatOutputParser, MistralCalls) {
  const ParsedMessage m = run_all_splits(
      style(ToolCallStyle::kMistral), true,
      "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {}}]");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"a":1})");
  EXPECT_EQ(m.tool_calls[1].name, "g");
  EXPECT_EQ(m.content, "");

  const std::string broken = "Sure. [TOOL_CALLS][{\"name\": \"f\"}]";
  const ParsedMessage b = run_all_splits(style(ToolCallStyle::kMistral), true, broken);
  EXPECT_TRUE(b.tool_calls.empty());
  EXPECT_EQ(b.content, broken);
}

TEST(ChatOutputParser, ThinkBlock) {
  const ParsedMessage m =
      run_all_splits(hermes_format(true), true, "<think>\nthe user wants x < y\n</think>\n\nThe answer.");
  EXPECT_EQ(m.reasoning, "\nthe user wants x < y\n");
  EXPECT_EQ(m.content, "The answer.");
}

TEST(ChatOutputParser, ThinkThenToolCall) {
  const ParsedMessage m = run_all_splits(
      hermes_format(true), true,
      "<think>call f</think>\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  EXPECT_EQ(m.reasoning, "call f");
  EXPECT_EQ(m.content, "");
  ASSERT_EQ(m.tool_calls.size(), 1u);
}

TEST(ChatOutputParser, ReasoningOpenedByThePrompt) {
  ChatFormat f = hermes_format(true);
  f.starts_in_reasoning = true;
  const ParsedMessage m = run_all_splits(f, false, "hmm <tool_call> not here\n</think>\n\nDone.");
  EXPECT_EQ(m.reasoning, "hmm <tool_call> not here\n");
  EXPECT_EQ(m.content, "Done.");
  const ParsedMessage unfinished = run_all_splits(f, false, "still thinking </thi");
  EXPECT_EQ(unfinished.reasoning, "still thinking </thi");
  EXPECT_EQ(unfinished.content, "");
}

TEST(ChatOutputParser, ThinkOnlyOpensAtTheStart) {
  const ParsedMessage m = run_all_splits(hermes_format(true), false, "Text then <think>x</think>");
  EXPECT_EQ(m.content, "Text then <think>x</think>");
  EXPECT_EQ(m.reasoning, "");
}

// Calls a grammar forces stream as they are written: the call (id, name)
// once its name is complete, then its arguments' text in pieces.
TEST(ChatOutputParser, ForcedCallsStreamTheirArguments) {
  const std::string hermes =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa}ris\\\"\", \"n\": [1, {}]}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>";
  const ParsedMessage m = run_all_splits(hermes_format(), true, hermes, /*forced=*/true);
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"city": "Pa}ris\"", "n": [1, {}]})");  // as written
  EXPECT_EQ(m.tool_calls[1].arguments, "{}");
  EXPECT_EQ(m.content, "");

  ChatOutputParser p(hermes_format(), true, [] { return std::string("x"); }, /*forced=*/true);
  auto d = p.feed("<tool_call>\n{\"name\": \"get_weath");
  EXPECT_TRUE(d.empty());
  d = p.feed("er\", \"arguments\": {\"city\": \"Pa");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].kind, ChatDelta::kToolCall);
  EXPECT_EQ(d[0].call.name, "get_weather");
  EXPECT_EQ(d[0].call.arguments, "");
  EXPECT_EQ(d[1].kind, ChatDelta::kToolCallArguments);
  EXPECT_EQ(d[1].text, "{\"city\": \"Pa");
  d = p.feed("ris\"}}\n</tool_call>");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "ris\"}");

  const ParsedMessage llama = run_all_splits(
      style(ToolCallStyle::kLlama3), true, "{\"name\": \"f\", \"parameters\": {\"a\": 1}}; {\"name\": \"g\", \"parameters\": {}}", true);
  ASSERT_EQ(llama.tool_calls.size(), 2u);
  EXPECT_EQ(llama.tool_calls[0].arguments, R"({"a": 1})");
  const ParsedMessage mistral = run_all_splits(
      style(ToolCallStyle::kMistral), true, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {\"b\": []}}]", true);
  ASSERT_EQ(mistral.tool_calls.size(), 2u);
  EXPECT_EQ(mistral.tool_calls[1].arguments, R"({"b": []})");
}

TEST(ChatOutputParser, ForcedCallsOutOfOrderOrCut) {
  // Arguments before the name: reported whole once the object ends.
  const ParsedMessage swapped = run_all_splits(
      hermes_format(), true, "<tool_call>{\"arguments\": {\"k\": 2}, \"name\": \"f\"}</tool_call>", true);
  ASSERT_EQ(swapped.tool_calls.size(), 1u);
  EXPECT_EQ(swapped.tool_calls[0].arguments, R"({"k":2})");
  // Cut before the arguments began (max_tokens): content, not a call.
  const ParsedMessage cut = run_all_splits(hermes_format(), true, "<tool_call>{\"name\": \"f", true);
  EXPECT_TRUE(cut.tool_calls.empty());
  EXPECT_EQ(cut.content, "{\"name\": \"f");
  // Reasoning the prompt opened, closed by the grammar's prefix.
  ChatFormat f = hermes_format(true);
  f.starts_in_reasoning = true;
  const ParsedMessage after = run_all_splits(
      f, true, "</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", true);
  ASSERT_EQ(after.tool_calls.size(), 1u);
  EXPECT_EQ(after.reasoning, "");
}

TEST(ChatFormat, FromTemplateSource) {
  EXPECT_EQ(chat_format_for_template("{{ '<tool_call>' }}").tools, ToolCallStyle::kHermes);
  EXPECT_EQ(chat_format_for_template("{{ '[TOOL_CALLS]' }}").tools, ToolCallStyle::kMistral);
  EXPECT_EQ(chat_format_for_template("{{ '[TOOL_CALLS]' + name + '[ARGS]' + arguments }}").tools,
            ToolCallStyle::kMistralArgs);
  EXPECT_EQ(chat_format_for_template("<|start_header_id|>{\"name\": .., \"parameters\": ..}").tools,
            ToolCallStyle::kLlama3);
  EXPECT_TRUE(chat_format_for_template("x").think_open.empty());
  const ChatFormat f = chat_format_for_template("{{ '<think>\\n' }}");
  EXPECT_EQ(f.think_close, "</think>");
  EXPECT_TRUE(prompt_opens_reasoning(f, "<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning(f, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning(f, "<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace duet::server
