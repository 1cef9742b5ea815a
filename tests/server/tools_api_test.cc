// Tool calls and reasoning over the OpenAI API on a real socket, with a
// random-weight model (duet synth): the grammar, not the model, makes the
// forced calls valid. Named, required and auto choices, parallel calls,
// streamed deltas that add up to the whole message, a tool result rendered
// back through the template, <think> blocks, and the 400s.
#include <gtest/gtest.h>

#include "formats/llama_synth.h"
#include "server/chat_prompt.h"
#include "server_harness.h"
#include "tokenizer/chat_templates_builtin.h"

namespace duet::testing {
namespace {

using nlohmann::json;

// One random-weight model for the whole suite.
class ToolsApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    SynthOptions synth;
    synth.shape = {.arch = Arch::kLlama, .name = "tiny", .n_vocab = 400, .dim = 64, .n_layers = 2, .n_heads = 4,
                   .n_kv_heads = 2, .head_dim = 16, .ffn_dim = 96, .ctx_len = 4096};
    synth.seed = 7;
    ASSERT_TRUE(synth_model(synth, dir_->file("tiny.gguf")).ok());
  }
  static void TearDownTestSuite() { delete dir_; }

  static HarnessOptions options(std::string_view template_source) {
    HarnessOptions o;
    o.model_path = dir_->file("tiny.gguf");
    auto t = ChatTemplate::parse(template_source, "<s>", "</s>");
    EXPECT_TRUE(t.ok()) << t.error().message;
    o.server.chat_template = std::make_shared<const ChatTemplate>(std::move(*t));
    return o;
  }
  static HarnessOptions qwen3() { return options(*builtin_chat_template("qwen3")); }

  static TempDir* dir_;
};
TempDir* ToolsApi::dir_ = nullptr;

json post(TestServer& s, const json& body, int* status) {
  auto r = s.client().Post("/v1/chat/completions", body.dump(), "application/json");
  if (!r) return {};
  *status = r->status;
  return json::parse(r->body, nullptr, false);
}

// The streamed chunks of `body`, parsed.
std::vector<json> stream(TestServer& s, json body) {
  body["stream"] = true;
  auto r = s.client().Post("/v1/chat/completions", body.dump(), "application/json");
  std::vector<json> chunks;
  if (!r) return chunks;
  for (const std::string& data : sse_events(r->body)) {
    if (data == "[DONE]") break;
    chunks.push_back(json::parse(data, nullptr, false));
  }
  return chunks;
}

// The message a client builds from the chunks, as the OpenAI SDKs do
// (tool calls gathered by index), and the finish reason; checks each call's
// first delta carries id, type and name, and later ones only arguments.
json accumulate(const std::vector<json>& chunks, std::string* finish) {
  json msg = {{"content", ""}, {"reasoning_content", ""}, {"tool_calls", json::array()}};
  for (const json& c : chunks) {
    if (!c.contains("choices") || c["choices"].empty()) continue;
    const json& choice = c["choices"][0];
    if (choice["finish_reason"].is_string()) *finish = choice["finish_reason"];
    const json& d = choice["delta"];
    for (const char* k : {"content", "reasoning_content"})
      if (d.contains(k) && d[k].is_string()) msg[k] = msg[k].get<std::string>() + d[k].get<std::string>();
    if (!d.contains("tool_calls")) continue;
    for (const json& tc : d["tool_calls"]) {
      const size_t i = tc["index"];
      json& calls = msg["tool_calls"];
      if (i == calls.size()) {
        EXPECT_TRUE(tc.contains("id") && tc["type"] == "function" && tc["function"].contains("name")) << tc;
        calls.push_back({{"id", tc["id"]}, {"type", "function"},
                         {"function", {{"name", tc["function"]["name"]}, {"arguments", ""}}}});
      } else {
        EXPECT_FALSE(tc.contains("id") || tc["function"].contains("name")) << "a later delta repeats the head: " << tc;
      }
      EXPECT_LT(i, calls.size());
      if (i >= calls.size()) continue;
      json& args = calls[i]["function"]["arguments"];
      args = args.get<std::string>() + tc["function"]["arguments"].get<std::string>();
    }
  }
  return msg;
}

// The whole response's message and the streamed one agree (ids aside: each
// request draws its own).
void expect_same_message(const json& whole, const json& streamed) {
  EXPECT_EQ(whole["content"].is_null() ? "" : whole["content"].get<std::string>(), streamed["content"]);
  EXPECT_EQ(whole.value("reasoning_content", ""), streamed["reasoning_content"]);
  const json calls = whole.value("tool_calls", json::array());
  ASSERT_EQ(calls.size(), streamed["tool_calls"].size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i]["function"], streamed["tool_calls"][i]["function"]);
    EXPECT_EQ(streamed["tool_calls"][i]["id"].get<std::string>().size(), 9u);
  }
}

const json kWeather = {{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"description", "Weather forecast for a city"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties",
                            {{"city", {{"enum", {"Paris", "Oslo", "Lima"}}}},
                             {"days", {{"type", "integer"}, {"minimum", 1}, {"maximum", 7}}}}},
                           {"required", {"city", "days"}},
                           {"additionalProperties", false}}}}}};
const json kTime = {{"type", "function"},
                    {"function",
                     {{"name", "get_time"},
                      {"parameters",
                       {{"type", "object"},
                        {"properties", {{"zone", {{"type", "string"}, {"enum", {"UTC", "CET"}}}}}},
                        {"required", {"zone"}},
                        {"additionalProperties", false}}}}}};

// The arguments are JSON that follows the named tool's schema (checked by
// hand, not by the grammar that made them).
void expect_valid_call(const json& call) {
  ASSERT_EQ(call["type"], "function");
  const std::string name = call["function"]["name"];
  const json args = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << call;
  if (name == "get_weather") {
    EXPECT_EQ(args.size(), 2u) << args;
    EXPECT_TRUE(args["city"] == "Paris" || args["city"] == "Oslo" || args["city"] == "Lima") << args;
    ASSERT_TRUE(args["days"].is_number_integer()) << args;
    EXPECT_GE(args["days"].get<int>(), 1);
    EXPECT_LE(args["days"].get<int>(), 7);
  } else {
    ASSERT_EQ(name, "get_time");
    EXPECT_EQ(args.size(), 1u) << args;
    EXPECT_TRUE(args["zone"] == "UTC" || args["zone"] == "CET") << args;
  }
}

json ask(const json& tools, const json& choice, uint64_t seed) {
  json body = {{"messages", {{{"role", "user"}, {"content", "What is the weather in Paris?"}}}},
               {"max_tokens", 200}, {"temperature", 1.0}, {"seed", seed}, {"tools", tools}};
  if (!choice.is_null()) body["tool_choice"] = choice;
  return body;
}

TEST_F(ToolsApi, NamedChoiceCallsThatFunctionAndStreamsTheSame) {
  TestServer s(qwen3());
  ASSERT_TRUE(s.ok());
  const json choice = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  for (uint64_t seed : {1, 2, 3}) {
    json body = ask({kTime, kWeather}, choice, seed);
    body["parallel_tool_calls"] = false;
    int status = 0;
    const json r = post(s, body, &status);
    ASSERT_EQ(status, 200) << r.dump();
    const json& msg = r["choices"][0]["message"];
    EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls") << r.dump();
    EXPECT_TRUE(msg["content"].is_null()) << msg;
    ASSERT_EQ(msg["tool_calls"].size(), 1u) << msg;
    EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
    expect_valid_call(msg["tool_calls"][0]);

    std::string finish;
    const json streamed = accumulate(stream(s, body), &finish);
    EXPECT_EQ(finish, "tool_calls");
    expect_same_message(msg, streamed);
  }
}

TEST_F(ToolsApi, RequiredChoiceMakesValidParallelCalls) {
  TestServer s(qwen3());
  ASSERT_TRUE(s.ok());
  size_t most = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    int status = 0;
    json body = ask({kWeather, kTime}, "required", seed);
    body["max_tokens"] = 1000;  // room for kMaxParallelCalls calls
    body["temperature"] = 2.0;  // a flatter choice between ending and a further call
    const json r = post(s, body, &status);
    ASSERT_EQ(status, 200) << r.dump();
    const json& calls = r["choices"][0]["message"]["tool_calls"];
    ASSERT_GE(calls.size(), 1u) << r.dump();
    for (const json& c : calls) expect_valid_call(c);
    most = std::max(most, calls.size());
    if (calls.size() > 1) {
      std::string finish;
      expect_same_message(r["choices"][0]["message"], accumulate(stream(s, body), &finish));
      EXPECT_EQ(finish, "tool_calls");
    }
  }
  EXPECT_GE(most, 2u) << "no seed made parallel calls";
}

// With "auto" the model decides; a grammar stands in for a model that
// decides to call two tools, so the parsing of free output is what is tested.
TEST_F(ToolsApi, AutoChoiceFindsCallsInTheOutput) {
  TestServer s(qwen3());
  ASSERT_TRUE(s.ok());
  json body = ask({kWeather, kTime}, "auto", 1);
  body["grammar"] =
      R"(root ::= "Checking.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>\n)"
      R"(<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 2}}\n</tool_call>")";
  int status = 0;
  const json r = post(s, body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  const json& msg = r["choices"][0]["message"];
  EXPECT_EQ(msg["content"], "Checking.");
  ASSERT_EQ(msg["tool_calls"].size(), 2u) << msg;
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], R"({"zone":"CET"})");
  EXPECT_EQ(msg["tool_calls"][1]["function"]["arguments"], R"({"city":"Oslo","days":2})");
  EXPECT_NE(msg["tool_calls"][0]["id"], msg["tool_calls"][1]["id"]);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  std::string finish;
  expect_same_message(msg, accumulate(stream(s, body), &finish));

  // tool_choice none: the same text is only content.
  body["tool_choice"] = "none";
  const json none = post(s, body, &status);
  ASSERT_EQ(status, 200) << none.dump();
  EXPECT_FALSE(none["choices"][0]["message"].contains("tool_calls"));
  EXPECT_NE(none["choices"][0]["message"]["content"].get<std::string>().find("<tool_call>"), std::string::npos);
  EXPECT_EQ(none["choices"][0]["finish_reason"], "stop");

  // The tools reach the prompt: it is longer with them than without.
  json plain = ask(json::array(), nullptr, 1);
  plain.erase("tools");
  plain["max_tokens"] = 1;
  body["tool_choice"] = "auto";
  body.erase("grammar");
  body["max_tokens"] = 1;
  const int with = post(s, body, &status)["usage"]["prompt_tokens"];
  const int without = post(s, plain, &status)["usage"]["prompt_tokens"];
  EXPECT_GT(with, without + 100);
}

// The chunks of a streamed reply with tool calls have OpenAI's shapes: each
// call's first delta is {index, id, type, function: {name, arguments: ""}},
// later ones only {index, function: {arguments: piece}}; no chunk mixes
// content with a call. Returns the number of arguments chunks per call.
std::vector<int> expect_call_chunk_shapes(const std::vector<json>& chunks) {
  std::vector<int> pieces;
  for (const json& c : chunks) {
    if (!c.contains("choices") || c["choices"].empty()) continue;
    const json& d = c["choices"][0]["delta"];
    if (!d.contains("tool_calls")) continue;
    EXPECT_FALSE(d.contains("content")) << d;
    EXPECT_EQ(d["tool_calls"].size(), 1u) << d;
    const json& tc = d["tool_calls"][0];
    const size_t i = tc["index"];
    if (i == pieces.size()) {
      EXPECT_EQ(tc.size(), 4u) << tc;  // index, id, type, function
      EXPECT_EQ(tc["id"].get<std::string>().size(), 9u) << tc;
      EXPECT_EQ(tc["type"], "function") << tc;
      EXPECT_EQ(tc["function"].size(), 2u) << tc;
      EXPECT_FALSE(tc["function"]["name"].get<std::string>().empty()) << tc;
      EXPECT_EQ(tc["function"]["arguments"], "") << "a first delta with arguments: " << tc;
      pieces.push_back(0);
    } else {
      EXPECT_EQ(i + 1, pieces.size()) << "a delta for a call before the last: " << tc;
      EXPECT_EQ(tc.size(), 2u) << tc;  // index, function
      EXPECT_EQ(tc["function"].size(), 1u) << tc;
      EXPECT_FALSE(tc["function"]["arguments"].get<std::string>().empty()) << tc;
      if (i < pieces.size()) ++pieces[i];
    }
  }
  return pieces;
}

// "auto" calls stream piecewise: text first as content, then each call's
// head, then its arguments over several chunks; they add up to the
// non-streamed message, and no markup reaches the content.
TEST_F(ToolsApi, AutoCallsStreamTheirArgumentsInPieces) {
  TestServer s(qwen3());
  ASSERT_TRUE(s.ok());
  json body = ask({kWeather, kTime}, "auto", 1);
  body["grammar"] =
      R"(root ::= "Checking the <b>forecast</b>.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\", \"days\": 6}}\n</tool_call>\n)"
      R"(<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>")";
  int status = 0;
  const json r = post(s, body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  const json& msg = r["choices"][0]["message"];
  ASSERT_EQ(msg["tool_calls"].size(), 2u) << msg;
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], R"({"city":"Lima","days":6})");

  const std::vector<json> chunks = stream(s, body);
  const std::vector<int> pieces = expect_call_chunk_shapes(chunks);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_GT(pieces[0], 1) << "the arguments came in one chunk";
  EXPECT_GT(pieces[1], 1) << "the arguments came in one chunk";
  // Content comes before the first call, and holds none of its markup.
  bool call_seen = false;
  for (const json& c : chunks) {
    if (!c.contains("choices") || c["choices"].empty()) continue;
    const json& d = c["choices"][0]["delta"];
    if (d.contains("tool_calls")) call_seen = true;
    if (d.contains("content") && d["content"].is_string() && !d["content"].get<std::string>().empty()) {
      EXPECT_FALSE(call_seen) << d;
      EXPECT_EQ(d["content"].get<std::string>().find("<tool"), std::string::npos) << d;
    }
  }
  std::string finish;
  const json streamed = accumulate(chunks, &finish);
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(streamed["content"], "Checking the <b>forecast</b>.");
  expect_same_message(msg, streamed);
}

// A Mistral v11-style template writes [TOOL_CALLS]name[ARGS]{...}: forced
// calls take that form, and free ones in it are found and streamed.
TEST_F(ToolsApi, MistralNameArgsForm) {
  const std::string tmpl =
      "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
      "{% if tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}"
      "{# calls come back as [TOOL_CALLS]name[ARGS]{...} #}assistant: ";
  TestServer s(options(tmpl));
  ASSERT_TRUE(s.ok());
  for (uint64_t seed : {1, 2}) {
    json body = ask({kTime, kWeather}, "required", seed);
    body["max_tokens"] = 1000;
    int status = 0;
    const json r = post(s, body, &status);
    ASSERT_EQ(status, 200) << r.dump();
    const json& msg = r["choices"][0]["message"];
    ASSERT_TRUE(msg.contains("tool_calls")) << r.dump();
    for (const json& c : msg["tool_calls"]) expect_valid_call(c);
    EXPECT_TRUE(msg["content"].is_null()) << r.dump();
    EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
    std::string finish;
    const std::vector<json> chunks = stream(s, body);
    expect_call_chunk_shapes(chunks);
    expect_same_message(msg, accumulate(chunks, &finish));
    EXPECT_EQ(finish, "tool_calls");
  }

  json body = ask({kWeather, kTime}, "auto", 1);
  body["grammar"] = R"(root ::= "On it. [TOOL_CALLS]get_time[ARGS]{\"zone\": \"CET\"}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\", \"days\": 3}")";
  int status = 0;
  const json r = post(s, body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  const json& msg = r["choices"][0]["message"];
  EXPECT_EQ(msg["content"], "On it.");
  ASSERT_EQ(msg["tool_calls"].size(), 2u) << msg;
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_time");
  EXPECT_EQ(msg["tool_calls"][1]["function"]["arguments"], R"({"city":"Oslo","days":3})");
  const std::vector<json> chunks = stream(s, body);
  const std::vector<int> pieces = expect_call_chunk_shapes(chunks);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_GT(pieces[1], 1);
  std::string finish;
  expect_same_message(msg, accumulate(chunks, &finish));
  EXPECT_EQ(finish, "tool_calls");
}

// Templates that write calls the Mistral and the Llama 3.x way (their
// markers tell the format) get forced calls in that shape: the parser of
// each format finds only calls written in it, so a wrong shape would come
// back as content.
TEST_F(ToolsApi, MistralAndLlama3FormatsFollowTheTemplate) {
  const std::string turns = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";
  const std::vector<std::string> templates = {
      turns + "{% if tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}"
              "{# calls come back as [TOOL_CALLS][...] #}assistant: ",
      turns + "{% if tools %}<|start_header_id|>{{ tools | tojson }} Reply with {\"name\": function name, "
              "\"parameters\": arguments}{% endif %}assistant: ",
  };
  for (const std::string& tmpl : templates) {
    TestServer s(options(tmpl));
    ASSERT_TRUE(s.ok());
    for (uint64_t seed : {5, 6}) {
      json body = ask({kTime, kWeather}, "required", seed);
      body["max_tokens"] = 1000;  // room for kMaxParallelCalls calls
      int status = 0;
      const json r = post(s, body, &status);
      ASSERT_EQ(status, 200) << r.dump();
      const json& msg = r["choices"][0]["message"];
      ASSERT_TRUE(msg.contains("tool_calls")) << tmpl << "\n" << r.dump();
      for (const json& c : msg["tool_calls"]) expect_valid_call(c);
      EXPECT_TRUE(msg["content"].is_null()) << r.dump();
      EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
      std::string finish;
      expect_same_message(msg, accumulate(stream(s, body), &finish));
    }
  }
}

json round_trip_body() {
  return {{"messages",
           {{{"role", "user"}, {"content", "Weather in Paris?"}},
            {{"role", "assistant"},
             {"content", nullptr},
             {"tool_calls",
              {{{"id", "abc123XYZ"},
                {"type", "function"},
                {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Paris", "days": 1})"}}}}}}},
            {{"role", "tool"}, {"tool_call_id", "abc123XYZ"}, {"content", R"({"temp_c": 21})"}}}},
          {"tools", json::array({kWeather})},
          {"max_tokens", 8}};
}

// The rendered prompt, as the server renders it for `body`.
std::string rendered(const ChatTemplate* tmpl, Model& model, const json& body) {
  server::GenerateRequest r;
  EXPECT_FALSE(server::parse_generate_body(body.dump(), true, r));
  std::string prompt;
  auto e = server::render_chat_request(tmpl, model, r, prompt);
  EXPECT_FALSE(e) << e->message;
  return prompt;
}

TEST_F(ToolsApi, ToolResultRoundTripRendersThroughTheTemplate) {
  const HarnessOptions o = qwen3();
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  const std::string p = rendered(o.server.chat_template.get(), s.model(), round_trip_body());
  // Printed by the template's tojson (Python's separators).
  EXPECT_NE(p.find("<tools>\n{\"function\": {\"description\": \"Weather forecast for a city\", \"name\": \"get_weather\""),
            std::string::npos)
      << p;
  EXPECT_NE(p.find("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                   "{\"city\": \"Paris\", \"days\": 1}}\n</tool_call><|im_end|>"),
            std::string::npos)
      << p;
  EXPECT_NE(p.find("<|im_start|>user\n<tool_response>\n{\"temp_c\": 21}\n</tool_response><|im_end|>\n"
                   "<|im_start|>assistant\n"),
            std::string::npos)
      << p;
  int status = 0;
  const json r = post(s, round_trip_body(), &status);
  EXPECT_EQ(status, 200) << r.dump();

  // A template that knows no tools (ChatML) gets them from duet, in the
  // Hermes words the output parser reads.
  const HarnessOptions chatml = options(*builtin_chat_template("chatml"));
  const std::string q = rendered(chatml.server.chat_template.get(), s.model(), round_trip_body());
  EXPECT_NE(q.find("<|im_start|>system\n# Tools"), std::string::npos) << q;
  EXPECT_NE(q.find(kWeather.dump()), std::string::npos) << q;
  EXPECT_NE(q.find("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                   "{\"city\":\"Paris\",\"days\":1}}\n</tool_call><|im_end|>"),
            std::string::npos)
      << q;
  EXPECT_NE(q.find("<|im_start|>user\n<tool_response>\n{\"temp_c\": 21}\n</tool_response><|im_end|>"),
            std::string::npos)
      << q;
}

// A Qwen3-style template that opens the reasoning block in the prompt unless
// enable_thinking is false.
constexpr std::string_view kThinking =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and enable_thinking is "
    "false %}<think>\n\n</think>\n\n{% else %}<think>\n{% endif %}{% endif %}";

TEST_F(ToolsApi, ReasoningGoesToReasoningContent) {
  TestServer s(options(kThinking));
  ASSERT_TRUE(s.ok());
  json body = {{"messages", {{{"role", "user"}, {"content", "2+2?"}}}},
               {"max_tokens", 100},
               {"grammar", R"(root ::= "Two and two.\n</think>\n\nFour.")"}};
  int status = 0;
  const json r = post(s, body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  const json& msg = r["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], "Two and two.\n");
  EXPECT_EQ(msg["content"], "Four.");
  std::string finish;
  expect_same_message(msg, accumulate(stream(s, body), &finish));
  EXPECT_EQ(finish, "stop");

  // enable_thinking false reaches the template: the prompt closes the
  // block, and the same output is all content.
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  const json off = post(s, body, &status);
  ASSERT_EQ(status, 200) << off.dump();
  EXPECT_FALSE(off["choices"][0]["message"].contains("reasoning_content")) << off.dump();
  EXPECT_EQ(off["choices"][0]["message"]["content"], "Two and two.\n</think>\n\nFour.");

  // A forced call after an opened block: the grammar closes it first.
  json call = ask(json::array({kTime}), "required", 3);
  const json c = post(s, call, &status);
  ASSERT_EQ(status, 200) << c.dump();
  ASSERT_EQ(c["choices"][0]["message"]["tool_calls"].size(), 1u) << c.dump();
  expect_valid_call(c["choices"][0]["message"]["tool_calls"][0]);
}

TEST_F(ToolsApi, BadToolsAre400sSayingWhat) {
  TestServer s(qwen3());
  ASSERT_TRUE(s.ok());
  const auto expect_400 = [&](const json& body, const std::string& says) {
    int status = 0;
    const json r = post(s, body, &status);
    EXPECT_EQ(status, 400) << body.dump() << " -> " << r.dump();
    const std::string msg = r["error"]["message"];
    EXPECT_NE(msg.find(says), std::string::npos) << msg;
  };
  expect_400(ask(json::array({kWeather}), {{"type", "function"}, {"function", {{"name", "get_stock"}}}}, 1),
             "'get_stock', which is not in 'tools'");
  expect_400(ask(json::array({kWeather}), "sometimes", 1), "'tool_choice' must be");
  expect_400(ask(json::object(), nullptr, 1), "'tools' must be an array");
  expect_400(ask({{{"type", "function"}, {"function", {{"description", "x"}}}}}, nullptr, 1), "tools[0].function.name");
  expect_400(ask({{{"type", "retrieval"}}}, nullptr, 1), "tools[0].type");
  expect_400(ask({kWeather, kWeather}, nullptr, 1), "two tools are named 'get_weather'");
  json bad_schema = kTime;
  bad_schema["function"]["parameters"]["type"] = 5;
  expect_400(ask({kWeather, bad_schema}, "auto", 1), "tool 'get_time' (tools[1])");
  json unsupported = kTime;
  unsupported["function"]["parameters"]["properties"]["zone"]["not"] = {{"const", "UTC"}};
  expect_400(ask({kWeather, unsupported}, "required", 1), "tool 'get_time' (tools[1])");
  json no_tools = ask(json::array(), "required", 1);
  no_tools.erase("tools");
  expect_400(no_tools, "has no 'tools'");
  json both = ask(json::array({kWeather}), "required", 1);
  both["response_format"] = {{"type", "json_object"}};
  expect_400(both, "cannot be combined");
  json bad_call = round_trip_body();
  bad_call["messages"][1]["tool_calls"][0]["function"]["arguments"] = json::object();
  expect_400(bad_call, "messages[1].tool_calls[0]");
  json no_id = round_trip_body();
  no_id["messages"][2].erase("tool_call_id");
  expect_400(no_id, "tool_call_id' is required");
}

}  // namespace
}  // namespace duet::testing
