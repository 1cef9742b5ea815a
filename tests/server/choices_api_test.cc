// n > 1, logit_bias, echo and suffix over HTTP (stories260K): n choices
// prefill their prompt once (/metrics), greedy ones agree, seeded ones
// differ and repeat, streaming carries each chunk's choice index, usage
// counts the prompt once, a client that leaves frees every choice;
// logit_bias bans and forces tokens; echo prefixes
// the prompt; suffix builds a fill-in-the-middle prompt where the model
// has FIM tokens.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "formats/gguf.h"
#include "server_harness.h"

namespace duet {
namespace {

using namespace duet::testing;
using nlohmann::json;

json post(const TestServer& s, const std::string& path, const json& body, int* status = nullptr) {
  auto c = s.client();
  auto r = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return json();
  if (status) *status = r->status;
  else EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body);
}

// The streamed chunks' payloads, "[DONE]" left out.
std::vector<json> stream(const TestServer& s, const std::string& path, const json& body) {
  auto c = s.client();
  auto r = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r);
  std::vector<json> out;
  if (!r) return out;
  EXPECT_EQ(r->status, 200) << r->body;
  const std::vector<std::string> events = sse_events(r->body);
  EXPECT_FALSE(events.empty());
  if (!events.empty()) {
    EXPECT_EQ(events.back(), "[DONE]");
  }
  for (const std::string& e : events)
    if (e != "[DONE]") out.push_back(json::parse(e));
  return out;
}

std::vector<std::string> texts(const json& r) {
  std::vector<std::string> out;
  for (size_t i = 0; i < r["choices"].size(); ++i) {
    const json& c = r["choices"][i];
    EXPECT_EQ(c["index"], i);
    out.push_back(c.contains("message") ? c["message"]["content"].get<std::string>() : c["text"].get<std::string>());
  }
  return out;
}

// A 200-token prompt as ids: story text, repeated.
std::vector<int32_t> long_prompt(const Model& m) {
  const std::vector<int32_t> story =
      m.tokenizer().encode("Once upon a time, there was a little girl named Lily. She liked to play outside", false);
  std::vector<int32_t> p{m.tokenizer().bos_id()};
  while (p.size() < 200) p.push_back(story[p.size() % story.size()]);
  return p;
}

json completion(json prompt, int n, int max_tokens, double temperature = 0) {
  return {{"prompt", std::move(prompt)}, {"n", n}, {"max_tokens", max_tokens}, {"temperature", temperature}};
}

TEST(Choices, FourGreedyChoicesPrefillTheirPromptOnce) {
  HarnessOptions o;
  o.engine.ctx = 512;  // stories260K was trained on 128 tokens: room for a 200-token prompt
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  const json r = post(s, "/v1/completions", completion(long_prompt(s.model()), 4, 12));
  const std::vector<std::string> t = texts(r);
  ASSERT_EQ(t.size(), 4u);
  for (const std::string& x : t) EXPECT_EQ(x, t[0]);
  EXPECT_FALSE(t[0].empty());
  EXPECT_EQ(r["usage"]["prompt_tokens"], 200);
  EXPECT_EQ(r["usage"]["completion_tokens"], 4 * 12);
  EXPECT_EQ(r["usage"]["total_tokens"], 200 + 4 * 12);

  const std::string m = wait_for_metrics(
      s, [](const std::string& text) { return metric_value(text, "duet_generation_tokens_total") == 48; });
  EXPECT_EQ(metric_value(m, "duet_prompt_tokens_total"), 200) << m;
  // One prefill of the 200 tokens, not four: the choices shared its 13 blocks.
  EXPECT_EQ(metric_value(m, "duet_prompt_tokens_computed_total"), 200) << m;
  EXPECT_EQ(metric_value(m, "duet_forked_choices_total"), 3) << m;
  EXPECT_EQ(metric_value(m, "duet_fork_shared_blocks_total"), 3 * 13) << m;
  // 200 = 12 blocks + 8 tokens: three choices copy the partial 13th block.
  EXPECT_EQ(metric_value(m, "duet_kv_block_copies_total"), 3) << m;
  EXPECT_EQ(metric_value(m, "duet_requests_finished_total{reason=\"length\"}"), 4) << m;
}

TEST(Choices, SeededChoicesDifferAndRepeat) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  json body = completion("Once upon a time", 4, 24, 1.0);
  body["seed"] = 11;
  const std::vector<std::string> a = texts(post(s, "/v1/completions", body));
  const std::vector<std::string> b = texts(post(s, "/v1/completions", body));
  EXPECT_EQ(a, b);
  EXPECT_EQ(std::set<std::string>(a.begin(), a.end()).size(), 4u);
  // Choice 0 samples with the request's seed, as a lone request does.
  body["n"] = 1;
  EXPECT_EQ(texts(post(s, "/v1/completions", body))[0], a[0]);
}

TEST(Choices, StreamedChunksCarryTheirChoice) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  json body = completion("Once upon a time", 3, 10, 1.0);
  body["seed"] = 5;
  const std::vector<std::string> whole = texts(post(s, "/v1/completions", body));
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  std::map<int, std::string> text;
  std::map<int, std::string> finish;
  json usage;
  for (const json& chunk : stream(s, "/v1/completions", body)) {
    if (chunk.contains("usage") && !chunk["usage"].is_null()) usage = chunk["usage"];
    for (const json& c : chunk["choices"]) {
      text[c["index"].get<int>()] += c["text"].get<std::string>();
      if (!c["finish_reason"].is_null()) finish[c["index"].get<int>()] = c["finish_reason"];
    }
  }
  ASSERT_EQ(text.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(text[i], whole[static_cast<size_t>(i)]) << i;
    EXPECT_EQ(finish[i], "length") << i;
  }
  EXPECT_EQ(usage["completion_tokens"], 30) << usage.dump();
}

TEST(Choices, ChatGivesEachChoiceItsMessage) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const json body = {{"messages", {{{"role", "user"}, {"content", "A dog"}}}},
                     {"n", 2}, {"max_tokens", 8}, {"temperature", 0}};
  const json r = post(s, "/v1/chat/completions", body);
  const std::vector<std::string> t = texts(r);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0], t[1]);
  EXPECT_EQ(r["choices"][1]["message"]["role"], "assistant");

  json streamed = body;
  streamed["stream"] = true;
  std::map<int, std::string> text, role;
  for (const json& chunk : stream(s, "/v1/chat/completions", streamed))
    for (const json& c : chunk["choices"]) {
      const int i = c["index"];
      if (c["delta"].contains("role")) role[i] = c["delta"]["role"];
      if (c["delta"].contains("content")) text[i] += c["delta"]["content"].get<std::string>();
    }
  EXPECT_EQ(role, (std::map<int, std::string>{{0, "assistant"}, {1, "assistant"}}));
  EXPECT_EQ(text[0], t[0]);
  EXPECT_EQ(text[1], t[1]);
}

TEST(Choices, AClientThatLeavesFreesEveryChoice) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  {
    RawSocket sock(s.port());
    ASSERT_TRUE(sock.ok());
    const json body = {{"prompt", "Once upon a time"}, {"n", 4}, {"max_tokens", 400}, {"ignore_eos", true},
                       {"stream", true}};
    ASSERT_TRUE(sock.send_all(raw_post("/v1/completions", body.dump())));
    const std::string seen = sock.read_until("\"index\":3");  // every choice is running
    ASSERT_NE(seen.find("\"index\":3"), std::string::npos) << seen;
  }
  const std::string m = wait_for_metrics(s, [](const std::string& text) {
    return metric_value(text, "duet_requests_finished_total{reason=\"cancelled\"}") == 4;
  });
  EXPECT_EQ(metric_value(m, "duet_requests_finished_total{reason=\"cancelled\"}"), 4) << m;
  EXPECT_EQ(metric_value(m, "duet_kv_blocks_used"), 0) << m;
  EXPECT_EQ(metric_value(m, "duet_requests_in_flight"), 0) << m;
}

TEST(Choices, NAboveTheServersMaximumIs400) {
  HarnessOptions o;
  o.server.max_n = 3;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  int status = 0;
  const json r = post(s, "/v1/completions", completion("a", 4, 2), &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["param"], "n");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("at most 3"), std::string::npos) << r.dump();
  EXPECT_EQ(texts(post(s, "/v1/completions", completion("a", 3, 2))).size(), 3u);
}

TEST(LogitBias, BansAndForcesTokens) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const Tokenizer& tok = s.model().tokenizer();
  json body = completion("Once upon a time", 1, 1);
  body["logprobs"] = 1;
  const json plain = post(s, "/v1/completions", body);
  const std::string first = plain["choices"][0]["logprobs"]["tokens"][0];
  int32_t banned = -1;
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (tok.decode_piece(id) == first) banned = id;
  ASSERT_GE(banned, 0) << first;

  body["logit_bias"] = {{std::to_string(banned), -100}};
  const json without = post(s, "/v1/completions", body);
  EXPECT_NE(without["choices"][0]["logprobs"]["tokens"][0], first);

  const int32_t forced = tok.encode(" cat", false).back();
  json force = completion("Once upon a time", 1, 4);
  force["logit_bias"] = {{std::to_string(forced), 100}};
  const std::string piece = tok.decode_piece(forced);
  EXPECT_EQ(texts(post(s, "/v1/completions", force))[0], piece + piece + piece + piece);
}

TEST(Echo, PrefixesThePromptWholeAndStreamed) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string plain = texts(post(s, "/v1/completions", completion("Once upon a time", 1, 8)))[0];
  json body = completion("Once upon a time", 2, 8);
  body["echo"] = true;
  for (const std::string& t : texts(post(s, "/v1/completions", body))) EXPECT_EQ(t, "Once upon a time" + plain);
  body["stream"] = true;
  std::map<int, std::string> text;
  for (const json& chunk : stream(s, "/v1/completions", body))
    for (const json& c : chunk["choices"]) text[c["index"].get<int>()] += c["text"].get<std::string>();
  EXPECT_EQ(text[0], "Once upon a time" + plain);
  EXPECT_EQ(text[1], "Once upon a time" + plain);
}

// stories260K with tokenizer.ggml.fim_{pre,suf,mid}_token_id naming three
// of its tokens.
std::string fim_model(const TempDir& dir) {
  auto in = GgufFile::open(shared_path("models/stories260K/stories260K.gguf"));
  EXPECT_TRUE(in.ok());
  GgufWriter w;
  for (const std::string& key : in->keys()) w.set(key, *in->find(key));
  w.set("tokenizer.ggml.fim_pre_token_id", GgufValue::of_u64(300));
  w.set("tokenizer.ggml.fim_suf_token_id", GgufValue::of_u64(301));
  w.set("tokenizer.ggml.fim_mid_token_id", GgufValue::of_u64(302));
  for (const TensorView& t : in->tensors())
    EXPECT_TRUE(w.add_tensor(t.name, t.dtype, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims), t.data,
                             t.nbytes).ok());
  const std::string path = dir.file("fim.gguf");
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

TEST(Suffix, BuildsTheFillInTheMiddlePrompt) {
  TempDir dir;
  HarnessOptions o;
  o.model_path = fim_model(dir);
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  const Tokenizer& tok = s.model().tokenizer();
  ASSERT_TRUE(tok.has_fim());
  json body = completion("Once upon a time", 1, 4);
  body["suffix"] = " they lived happily.";
  const json r = post(s, "/v1/completions", body);
  // BOS, <pre>, the prompt, <suf>, the suffix, <mid>.
  const size_t want = 4 + tok.encode("Once upon a time", false).size() + tok.encode(" they lived happily.", false).size();
  EXPECT_EQ(r["usage"]["prompt_tokens"], want) << r.dump();
  EXPECT_EQ(r["usage"]["completion_tokens"], 4);
  // The FIM prompt conditions the model: the middle differs from a plain completion's.
  body.erase("suffix");
  body["prompt"] = "Once upon a time";
  const json plain = post(s, "/v1/completions", body);
  EXPECT_EQ(plain["usage"]["prompt_tokens"], 1 + tok.encode("Once upon a time", false).size());
}

}  // namespace
}  // namespace duet
