// The OpenAI API over real sockets: completions and chat, whole and
// streamed, usage, stop strings, logprobs, auth and the error statuses.
#include <gtest/gtest.h>

#include "server_harness.h"

namespace duet::testing {
namespace {

using nlohmann::json;

json post_json(TestServer& s, const std::string& path, const json& body, int* status = nullptr,
               const std::string& key = {}) {
  auto c = s.client();
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  auto r = c.Post(path, h, body.dump(), "application/json");
  if (!r) return {};
  if (status) *status = r->status;
  return json::parse(r->body, nullptr, false);
}

void expect_error(const json& j, const std::string& param = {}) {
  ASSERT_TRUE(j.contains("error")) << j.dump();
  EXPECT_TRUE(j["error"]["message"].is_string());
  EXPECT_TRUE(j["error"]["type"].is_string());
  if (!param.empty()) { EXPECT_EQ(j["error"]["param"], param) << j.dump(); }
}

TEST(ServerApi, HealthModelsAndUnknownRoute) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(json::parse(m->body)["data"][0]["id"], "stories260K");
  auto nf = c.Get("/v1/nope");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  expect_error(json::parse(nf->body));
}

TEST(ServerApi, CompletionIsTheEnginesGreedyText) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  int status = 0;
  json r = post_json(s, "/v1/completions", completion_body("Once upon a time", 30), &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["object"], "text_completion");
  const std::string text = r["choices"][0]["text"];
  // karpathy's llama2.c prints this continuation for stories260K at temperature 0.
  EXPECT_EQ(text.rfind(", there was a little girl named Lily.", 0), 0u) << text;
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["completion_tokens"], 30);
  EXPECT_EQ(r["usage"]["prompt_tokens"], static_cast<int>(s.model().tokenizer().encode("Once upon a time", true).size()));
}

TEST(ServerApi, StreamingGivesTheSameTextThenUsageAndDone) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const json whole = post_json(s, "/v1/completions", completion_body("The cat", 25));
  json body = completion_body("The cat", 25);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto c = s.client();
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const auto events = sse_events(r->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json j = json::parse(events[i]);
    text += j["choices"][0]["text"].get<std::string>();
    if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, whole["choices"][0]["text"]);
  EXPECT_EQ(finish, "length");
  const json usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 25);
}

TEST(ServerApi, StopStringsAndLogprobs) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string full = post_json(s, "/v1/completions", completion_body("Once upon a time", 30))["choices"][0]["text"];
  json body = completion_body("Once upon a time", 30);
  body["stop"] = json::array({"girl", "zebra"});
  body["logprobs"] = 2;
  int status = 0;
  const json r = post_json(s, "/v1/completions", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["choices"][0]["text"], full.substr(0, full.find("girl")));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  const json& lp = r["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), r["usage"]["completion_tokens"].get<size_t>());
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_TRUE(lp["top_logprobs"][i].contains(lp["tokens"][i].get<std::string>()));
  }
}

TEST(ServerApi, ChatWholeAndStreamed) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  json body = {{"model", "x"},
               {"messages", {{{"role", "system"}, {"content", "Tell a story."}}, {{"role", "user"}, {"content", "A cat"}}}},
               {"max_tokens", 12},
               {"temperature", 0},
               {"logprobs", true},
               {"top_logprobs", 2}};
  int status = 0;
  const json r = post_json(s, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  const std::string content = r["choices"][0]["message"]["content"];
  EXPECT_EQ(r["choices"][0]["logprobs"]["content"].size(), r["usage"]["completion_tokens"].get<size_t>());
  body["stream"] = true;
  body.erase("logprobs");
  body.erase("top_logprobs");
  auto c = s.client();
  auto sr = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(sr);
  const auto events = sse_events(sr->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"]["role"], "assistant");
  std::string streamed;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json d = json::parse(events[i])["choices"][0]["delta"];
    if (d.contains("content")) streamed += d["content"].get<std::string>();
  }
  EXPECT_EQ(streamed, content);
}

// With a chat template configured, the prompt is exactly the template's
// rendering of the messages, and a template's raise_exception is a 400.
TEST(ServerApi, ChatUsesTheConfiguredTemplate) {
  const char* source =
      "{% if messages[0]['content'] == 'forbidden' %}{{ raise_exception('that topic is refused') }}{% endif %}"
      "{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}";
  auto tmpl = ChatTemplate::parse(source, "<s>", "</s>");
  ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
  HarnessOptions o;
  o.server.chat_template = std::make_shared<const ChatTemplate>(*tmpl);
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  const std::vector<duet::ChatMessage> msgs = {{"system", "Tell a story."}, {"user", "A cat"}};
  auto rendered = tmpl->apply(msgs, true);
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ(*rendered, "<s><system>Tell a story.\n<user>A cat\n<assistant>");
  const size_t expected = s.model().tokenizer().encode(*rendered, false, true).size();
  json body = {{"messages", {{{"role", "system"}, {"content", "Tell a story."}}, {{"role", "user"}, {"content", "A cat"}}}},
               {"max_tokens", 4}, {"temperature", 0}};
  int status = 0;
  const json r = post_json(s, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["usage"]["prompt_tokens"].get<size_t>(), expected);
  const json bad = post_json(s, "/v1/chat/completions",
                             {{"messages", {{{"role", "user"}, {"content", "forbidden"}}}}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(bad.dump().find("that topic is refused"), std::string::npos) << bad.dump();
}

// Speculative decoding behind the API: greedy completions (whole and
// streamed, several at once) are the plain server's, and /metrics counts
// the drafts.
TEST(ServerApi, SpeculativeServerGivesThePlainText) {
  HarnessOptions spec_options;
  spec_options.spec.lookup = 2;
  TestServer plain, spec(spec_options);
  ASSERT_TRUE(plain.ok() && spec.ok());
  const std::vector<std::string> prompts = {"Once upon a time", "The dog ran", "Lily had a ball"};
  for (const std::string& prompt : prompts) {
    const json body = {{"prompt", prompt}, {"max_tokens", 48}, {"temperature", 0}};
    const json a = post_json(plain, "/v1/completions", body);
    std::vector<std::thread> others;
    std::vector<json> concurrent(2);
    for (size_t i = 0; i < concurrent.size(); ++i)
      others.emplace_back([&, i] { concurrent[i] = post_json(spec, "/v1/completions", body); });
    for (auto& t : others) t.join();
    for (const json& b : concurrent) EXPECT_EQ(b["choices"][0]["text"], a["choices"][0]["text"]) << prompt;
  }
  auto r = spec.client().Get("/metrics");
  ASSERT_TRUE(r);
  const size_t at = r->body.find("\nduet_spec_draft_tokens_total ");
  ASSERT_NE(at, std::string::npos) << r->body;
  EXPECT_GT(std::stod(r->body.substr(at + 31)), 0.0);
}

TEST(ServerApi, InvalidRequestsAre400WithTheField) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  auto bad = c.Post("/v1/completions", "{\"prompt\": ", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  expect_error(json::parse(bad->body));

  struct Case {
    json body;
    std::string param;
  };
  const std::vector<Case> cases = {
      {{{"prompt", "a"}, {"max_tokens", "ten"}}, "max_tokens"},
      {{{"prompt", 5}}, "prompt"},
      {{{"prompt", "a"}, {"temperature", 7}}, "temperature"},
      {{{"prompt", "a"}, {"frobnicate", true}}, "frobnicate"},
      {{{"prompt", "a"}, {"n", 17}}, "n"},  // above --max-n (16)
      {{{"prompt", "a"}, {"n", 0}}, "n"},
      {{{"prompt", "a"}, {"logit_bias", {{"dog", 1}}}}, "logit_bias"},
      {{{"prompt", "a"}, {"logit_bias", {{"5", 101}}}}, "logit_bias"},
      {{{"prompt", "a"}, {"logit_bias", {{"999999", 1}}}}, "logit_bias"},  // not in the vocabulary
      {{{"prompt", "a"}, {"echo", true}, {"logprobs", 1}}, "echo"},
      {{{"prompt", "a"}, {"suffix", "end"}}, "suffix"},  // stories260K has no FIM tokens
      {{{"prompt", "a"}, {"stop", {1, 2}}}, "stop"},
      {{{"max_tokens", 3}}, "prompt"},
      {{{"prompt", std::vector<int>{1, 1000000}}}, "prompt"},  // id out of the vocabulary
      {json::array({1, 2}), ""},
  };
  for (const Case& k : cases) {
    int status = 0;
    const json r = post_json(s, "/v1/completions", k.body, &status);
    EXPECT_EQ(status, 400) << k.body.dump();
    expect_error(r, k.param);
  }
  int status = 0;
  const json chat = post_json(s, "/v1/chat/completions", {{"messages", {{{"role", "robot"}, {"content", "x"}}}}}, &status);
  EXPECT_EQ(status, 400);
  expect_error(chat, "messages[0].role");

  std::string long_prompt;
  for (int i = 0; i < 600; ++i) long_prompt += " cat";
  const json over = post_json(s, "/v1/completions", completion_body(long_prompt, 4), &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(over["error"]["code"], "context_length_exceeded") << over.dump();

  const std::string huge(2 << 20, 'a');
  auto big = c.Post("/v1/completions", "{\"prompt\": \"" + huge + "\"}", "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  expect_error(json::parse(big->body));
}

TEST(ServerApi, ApiKeyIsRequiredWhenSet) {
  HarnessOptions o;
  o.server.api_key = "sesame";
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  int status = 0;
  expect_error(post_json(s, "/v1/completions", completion_body("a", 2), &status));
  EXPECT_EQ(status, 401);
  expect_error(post_json(s, "/v1/completions", completion_body("a", 2), &status, "wrong"));
  EXPECT_EQ(status, 401);
  post_json(s, "/v1/completions", completion_body("a", 2), &status, "sesame");
  EXPECT_EQ(status, 200);
  auto c = s.client();
  EXPECT_EQ(c.Get("/metrics")->status, 401);
  EXPECT_EQ(c.Get("/health")->status, 200);
}

TEST(ServerApi, FullQueueIs429WithRetryAfter) {
  HarnessOptions o;
  o.max_in_flight = 1;
  o.engine.n_threads = 1;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  // Hold the only slot with a long stream.
  RawSocket hold(s.port());
  json body = completion_body("Once upon a time", 400);
  body["stream"] = true;
  body["ignore_eos"] = true;
  const std::string b = body.dump();
  ASSERT_TRUE(hold.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            "Content-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b));
  ASSERT_NE(hold.read_until("data: ").find("data: "), std::string::npos);
  auto c = s.client();
  auto r = c.Post("/v1/completions", completion_body("a", 2).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "queue_full");
}

}  // namespace
}  // namespace duet::testing
