// Tool calls streamed as the model writes them (tool_choice "auto"): each
// call's first delta is its head (id, name, empty arguments), then its
// arguments come in pieces as the text arrives; markers split anywhere, text
// that only begins like a marker, several calls, calls after text and after
// reasoning, both Mistral forms, and the whole response (finish with all the
// text) parsing calls whole as before.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/chat_output_parser.h"

namespace duet::server {
namespace {

ChatFormat format(ToolCallStyle s, bool think = false) {
  ChatFormat f;
  f.tools = s;
  if (think) f.think_open = "<think>", f.think_close = "</think>";
  return f;
}

// What a streaming client sees: the deltas of each feed, in order.
struct Stream {
  std::vector<ChatDelta> deltas;
  ParsedMessage message;  // rebuilt from the deltas
};

Stream stream(const ChatFormat& f, const std::vector<std::string>& pieces, bool end_with_last = false) {
  int n = 0;
  ChatOutputParser p(f, true, [&n] { return "call" + std::to_string(n++); });
  Stream s;
  const auto take = [&](std::vector<ChatDelta> ds) {
    for (ChatDelta& d : ds) {
      if (d.kind == ChatDelta::kContent) s.message.content += d.text;
      if (d.kind == ChatDelta::kReasoning) s.message.reasoning += d.text;
      if (d.kind == ChatDelta::kToolCall) {
        EXPECT_EQ(d.index, static_cast<int>(s.message.tool_calls.size()));
        s.message.tool_calls.push_back(d.call);
      }
      if (d.kind == ChatDelta::kToolCallArguments) {
        EXPECT_EQ(d.index + 1, static_cast<int>(s.message.tool_calls.size()));
        EXPECT_FALSE(d.text.empty());
        if (!s.message.tool_calls.empty()) s.message.tool_calls.back().arguments += d.text;
      }
      s.deltas.push_back(std::move(d));
    }
  };
  for (size_t i = 0; i + (end_with_last ? 1 : 0) < pieces.size(); ++i) take(p.feed(pieces[i]));
  take(p.finish(end_with_last && !pieces.empty() ? pieces.back() : std::string()));
  EXPECT_EQ(s.message.content, p.message().content);
  EXPECT_EQ(s.message.reasoning, p.message().reasoning);
  EXPECT_EQ(s.message.tool_calls.size(), p.message().tool_calls.size());
  return s;
}

std::vector<std::string> bytes_of(const std::string& text) {
  std::vector<std::string> out;
  for (char c : text) out.emplace_back(1, c);
  return out;
}

void expect_same(const ParsedMessage& a, const ParsedMessage& b, const std::string& how) {
  EXPECT_EQ(a.content, b.content) << how;
  EXPECT_EQ(a.reasoning, b.reasoning) << how;
  ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size()) << how;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    EXPECT_EQ(a.tool_calls[i].id, b.tool_calls[i].id) << how;
    EXPECT_EQ(a.tool_calls[i].name, b.tool_calls[i].name) << how;
    EXPECT_EQ(a.tool_calls[i].arguments, b.tool_calls[i].arguments) << how;
  }
}

// `text` streamed split in two at every byte, and byte by byte, gives what
// the whole response gives (finish with all of it); returns that.
ParsedMessage same_however_split(const ChatFormat& f, const std::string& text) {
  const ParsedMessage whole = stream(f, {text}, /*end_with_last=*/true).message;
  for (size_t i = 0; i <= text.size(); ++i)
    expect_same(stream(f, {text.substr(0, i), text.substr(i)}).message, whole, "split at " + std::to_string(i));
  expect_same(stream(f, bytes_of(text)).message, whole, "byte by byte");
  return whole;
}

// Byte by byte, each call is one head delta (empty arguments) then pieces
// of its arguments only, more than one for arguments longer than a byte.
void expect_streamed_calls(const ChatFormat& f, const std::string& text, size_t n_calls) {
  const Stream s = stream(f, bytes_of(text));
  ASSERT_EQ(s.message.tool_calls.size(), n_calls) << text;
  std::vector<int> pieces(n_calls, 0);
  int last_call = -1;
  for (const ChatDelta& d : s.deltas) {
    if (d.kind == ChatDelta::kToolCall) {
      EXPECT_EQ(d.index, last_call + 1);
      EXPECT_FALSE(d.call.id.empty());
      EXPECT_FALSE(d.call.name.empty());
      EXPECT_EQ(d.call.arguments, "") << "arguments came with the head: " << d.call.arguments;
      last_call = d.index;
    } else if (d.kind == ChatDelta::kToolCallArguments) {
      EXPECT_EQ(d.index, last_call);
      ++pieces[static_cast<size_t>(d.index)];
    }
  }
  for (size_t i = 0; i < n_calls; ++i) EXPECT_GT(pieces[i], 1) << "call " << i << " of " << text;
}

const std::string kHermesTwo =
    "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa ris\", \"n\": [1, 2]}}\n"
    "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>\n";

TEST(ChatOutputStream, HermesCallsStreamTheirArguments) {
  const ChatFormat f = format(ToolCallStyle::kHermes);
  const ParsedMessage m = same_however_split(f, kHermesTwo);
  EXPECT_EQ(m.content, "Let me check.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"city":"Pa ris","n":[1,2]})");  // spaces in strings kept
  EXPECT_EQ(m.tool_calls[1].arguments, R"({"zone":"CET"})");
  expect_streamed_calls(f, kHermesTwo, 2);

  // The call is reported as soon as its head is read: before the block ends.
  ChatOutputParser p(f, true, [] { return std::string("id1"); });
  auto d = p.feed("Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"argu");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "Sure.");
  d = p.feed("ments\": {\"city\": ");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].kind, ChatDelta::kToolCall);
  EXPECT_EQ(d[0].call.name, "get_weather");
  EXPECT_EQ(d[0].call.id, "id1");
  EXPECT_EQ(d[1].kind, ChatDelta::kToolCallArguments);
  EXPECT_EQ(d[1].text, "{\"city\":");
  d = p.feed("\"Oslo\"}}\n</tool");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "\"Oslo\"}");
  EXPECT_TRUE(p.feed("_call>").empty());
  EXPECT_TRUE(p.finish().empty());
  EXPECT_EQ(p.message().tool_calls[0].arguments, R"({"city":"Oslo"})");
}

TEST(ChatOutputStream, Llama3CallsStream) {
  const ChatFormat f = format(ToolCallStyle::kLlama3);
  const std::string bare = "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}";
  const ParsedMessage one = same_however_split(f, bare);
  ASSERT_EQ(one.tool_calls.size(), 1u);
  EXPECT_EQ(one.tool_calls[0].arguments, R"({"zone":"UTC"})");
  EXPECT_EQ(one.content, "");
  expect_streamed_calls(f, bare, 1);

  const std::string tagged = "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", "
                             "\"parameters\": {\"y\": [true, null]}}";
  const ParsedMessage two = same_however_split(f, tagged);
  ASSERT_EQ(two.tool_calls.size(), 2u);
  EXPECT_EQ(two.tool_calls[1].arguments, R"({"y":[true,null]})");
  expect_streamed_calls(f, tagged, 2);
}

TEST(ChatOutputStream, MistralJsonListStreams) {
  for (ToolCallStyle s : {ToolCallStyle::kMistral, ToolCallStyle::kMistralArgs}) {
    const ChatFormat f = format(s);
    const std::string text =
        "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {\"b\": \"c d\"}}]";
    const ParsedMessage m = same_however_split(f, text);
    ASSERT_EQ(m.tool_calls.size(), 2u);
    EXPECT_EQ(m.tool_calls[0].arguments, R"({"a":1})");
    EXPECT_EQ(m.tool_calls[1].arguments, R"({"b":"c d"})");
    EXPECT_EQ(m.content, "");
    expect_streamed_calls(f, text, 2);
  }
}

// [TOOL_CALLS]name[ARGS]{...}, the marker before each call; read whichever
// Mistral form the template writes.
TEST(ChatOutputStream, MistralNameArgsForm) {
  for (ToolCallStyle s : {ToolCallStyle::kMistral, ToolCallStyle::kMistralArgs}) {
    const ChatFormat f = format(s);
    const std::string two = "Checking. [TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\", \"days\": 2}"
                            "[TOOL_CALLS]get_time[ARGS]{\"zone\": \"CET\"}";
    const ParsedMessage m = same_however_split(f, two);
    EXPECT_EQ(m.content, "Checking.");
    ASSERT_EQ(m.tool_calls.size(), 2u);
    EXPECT_EQ(m.tool_calls[0].name, "get_weather");
    EXPECT_EQ(m.tool_calls[0].arguments, R"({"city":"Oslo","days":2})");
    EXPECT_EQ(m.tool_calls[1].name, "get_time");
    EXPECT_EQ(m.tool_calls[1].arguments, R"({"zone":"CET"})");
    expect_streamed_calls(f, two, 2);

    // With a call id between the name and the arguments (not kept: duet names its calls).
    const ParsedMessage id = same_however_split(f, "[TOOL_CALLS]ping[CALL_ID]a1B2c3D4e[ARGS]{}");
    ASSERT_EQ(id.tool_calls.size(), 1u);
    EXPECT_EQ(id.tool_calls[0].name, "ping");
    EXPECT_EQ(id.tool_calls[0].arguments, "{}");
    EXPECT_EQ(id.tool_calls[0].id, "call0");

    // A marker followed by no name[ARGS] is text.
    for (const std::string text : {"[TOOL_CALLS] is the marker", "[TOOL_CALLS]f(x)", "[TOOL_CALLS]f[ARGS] not json"}) {
      const ParsedMessage t = same_however_split(f, text);
      EXPECT_TRUE(t.tool_calls.empty()) << text;
      EXPECT_EQ(t.content, text);
    }
  }
}

// A marker split at every byte never leaks into content, and text that
// only begins like one is held until decided, then given back unchanged.
TEST(ChatOutputStream, MarkerLikeTextIsHeldThenReleased) {
  const ChatFormat hermes = format(ToolCallStyle::kHermes);
  for (const std::string text : {"a <tool_cal", "a <tool_cat> b", "x <tool_call", "<tool_callx>{}", "<<tool_call>"}) {
    const ParsedMessage m = same_however_split(hermes, text);
    if (text == "<<tool_call>") {
      EXPECT_EQ(m.content, "<<tool_call>");  // an empty block is no call
    } else {
      EXPECT_EQ(m.content, text);
    }
    EXPECT_TRUE(m.tool_calls.empty());
  }
  ChatOutputParser p(hermes, true, [] { return std::string("id"); });
  auto d = p.feed("Hi <tool_c");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "Hi");  // the space waits with what may be a marker
  d = p.feed("at> ok");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, " <tool_cat> ok");

  const ParsedMessage mistral = same_however_split(format(ToolCallStyle::kMistralArgs), "see [TOOL_CALL] and [TOOL_");
  EXPECT_EQ(mistral.content, "see [TOOL_CALL] and [TOOL_");
  const ParsedMessage llama = same_however_split(format(ToolCallStyle::kLlama3), "a <|python_ta");
  EXPECT_EQ(llama.content, "a <|python_ta");
}

TEST(ChatOutputStream, ReasoningThenCall) {
  const ChatFormat f = format(ToolCallStyle::kHermes, /*think=*/true);
  const std::string text = "<think>\nneeds the weather\n</think>\n\nOne moment.\n<tool_call>\n"
                           "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}\n</tool_call>";
  const ParsedMessage m = same_however_split(f, text);
  EXPECT_EQ(m.reasoning, "\nneeds the weather\n");
  EXPECT_EQ(m.content, "One moment.");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"city":"Lima"})");
  expect_streamed_calls(f, text, 1);

  ChatFormat opened = format(ToolCallStyle::kMistralArgs, true);
  opened.starts_in_reasoning = true;
  const ParsedMessage n = same_however_split(opened, "hmm [TOOL_CALLS]x[ARGS]{}</think>[TOOL_CALLS]f[ARGS]{\"k\": 1}");
  EXPECT_EQ(n.reasoning, "hmm [TOOL_CALLS]x[ARGS]{}");
  ASSERT_EQ(n.tool_calls.size(), 1u);
  EXPECT_EQ(n.tool_calls[0].arguments, R"({"k":1})");
}

// A call reported while streaming cannot be taken back: arguments that
// turn out malformed stay as written. The whole response, which sees the
// end first, keeps such a call as content, as it always did.
TEST(ChatOutputStream, MalformedArgumentsAfterTheHead) {
  const ChatFormat f = format(ToolCallStyle::kHermes);
  const std::string text = "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": }</tool_call>";
  const ParsedMessage whole = stream(f, {text}, /*end_with_last=*/true).message;
  EXPECT_TRUE(whole.tool_calls.empty());
  EXPECT_EQ(whole.content, text);
  const ParsedMessage streamed = stream(f, bytes_of(text)).message;
  ASSERT_EQ(streamed.tool_calls.size(), 1u);
  EXPECT_EQ(streamed.tool_calls[0].name, "a");
  EXPECT_EQ(streamed.tool_calls[0].arguments, R"({"x":})");
  EXPECT_EQ(streamed.content, "");

  // Cut short (max_tokens): the arguments as far as they came.
  const ParsedMessage cut = stream(f, bytes_of("<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": [1, ")).message;
  ASSERT_EQ(cut.tool_calls.size(), 1u);
  EXPECT_EQ(cut.tool_calls[0].arguments, R"({"x":[1,)");
}

// Heads that do not read in order, and JSON that is no call, are decided
// once the object ends, however the text is split.
TEST(ChatOutputStream, CallsReadWholeOrNotCalls) {
  const ParsedMessage swapped = same_however_split(
      format(ToolCallStyle::kLlama3), "{\"parameters\": {\"k\": 2}, \"name\": \"f\"}; {\"name\": \"g\", \"parameters\": {}}");
  ASSERT_EQ(swapped.tool_calls.size(), 2u);
  EXPECT_EQ(swapped.tool_calls[0].arguments, R"({"k":2})");
  // A closing marker inside what would be the name ends the block first.
  const std::string early = "<tool_call>{\"name\": \"a</tool_call>b\", \"arguments\": {}}";
  const ParsedMessage closed = same_however_split(format(ToolCallStyle::kHermes), early);
  EXPECT_TRUE(closed.tool_calls.empty());
  EXPECT_EQ(closed.content, early);
  const std::string answer = "{\"answer\": 42} is the JSON you asked for";
  const ParsedMessage plain = same_however_split(format(ToolCallStyle::kLlama3), answer);
  EXPECT_TRUE(plain.tool_calls.empty());
  EXPECT_EQ(plain.content, answer);
}

// Outputs pieced together from fragments of every format's markup, fed
// whole, split in two and byte by byte: the same message every way.
TEST(ChatOutputStream, RandomMarkupIsTheSameHoweverSplit) {
  const std::vector<std::string> parts = {
      "<tool_call>", "</tool_call>", "<tool_c", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]x1", "<|python_tag|>",
      "<think>", "</think>", "{", "}", "[", "]", ",", ";", " ", "\n", "\"", "\\", ":", "\"name\"",
      "\"arguments\"", "\"parameters\"", "\"f\"", "\"a</tool_call>b\"", "get_time", "1", "text", "{\"name\": \"g\", ",
      "\"arguments\": {", "\"x\": [1, \"}\"]}"};
  uint64_t state = 42;
  const auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<size_t>(state >> 33);
  };
  for (int round = 0; round < 5000; ++round) {
    std::string text;
    for (size_t n = 1 + next() % 12; n > 0; --n) text += parts[next() % parts.size()];
    ChatFormat f = format(static_cast<ToolCallStyle>(round % 4), round % 3 == 0);
    f.starts_in_reasoning = round % 7 == 0;
    const ParsedMessage whole = stream(f, {text}).message;
    const size_t cut = next() % (text.size() + 1);
    expect_same(stream(f, {text.substr(0, cut), text.substr(cut)}).message, whole, text + " split at " + std::to_string(cut));
    expect_same(stream(f, bytes_of(text)).message, whole, text + " byte by byte");
    stream(f, {text}, /*end_with_last=*/true);  // the whole response's way: its deltas add up
  }
}

}  // namespace
}  // namespace duet::server
