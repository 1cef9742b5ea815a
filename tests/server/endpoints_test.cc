// The endpoints beside generation, over real sockets: llama.cpp's /tokenize
// and /detokenize, OpenAI's /v1/embeddings (shapes, batching, encodings,
// every bad input a 400), /health, and CORS with and without origins.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "server/cors.h"
#include "server/embeddings_api.h"
#include "server/startup_server.h"
#include "server_harness.h"

namespace duet::testing {
namespace {

using nlohmann::json;

struct Reply {
  int status = 0;
  json body;
  httplib::Headers headers;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

Reply post(TestServer& s, const std::string& path, const std::string& body, const httplib::Headers& h = {}) {
  auto c = s.client();
  auto r = c.Post(path, h, body, "application/json");
  if (!r) return {};
  return {r->status, json::parse(r->body, nullptr, false), r->headers};
}
Reply post(TestServer& s, const std::string& path, const json& body) { return post(s, path, body.dump()); }

void expect_400(const Reply& r, const std::string& says, const std::string& param = {}) {
  EXPECT_EQ(r.status, 400) << r.body.dump();
  ASSERT_TRUE(r.body.contains("error")) << r.body.dump();
  const std::string message = r.body["error"]["message"];
  EXPECT_NE(message.find(says), std::string::npos) << message;
  if (!param.empty()) { EXPECT_EQ(r.body["error"]["param"], param) << r.body.dump(); }
}

std::vector<float> vec(const json& embedding) { return embedding.get<std::vector<float>>(); }

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = a.size() == b.size() ? 0.0f : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

TEST(Tokenize, IdsPiecesAndTheRoundTrip) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const Tokenizer& tok = s.model().tokenizer();
  const std::string text = "Once upon a time, Lily saw a cat.";
  Reply plain = post(s, "/tokenize", json{{"content", text}});
  ASSERT_EQ(plain.status, 200) << plain.body.dump();
  EXPECT_EQ(plain.body["tokens"].get<std::vector<int32_t>>(), tok.encode(text, false));
  Reply bos = post(s, "/tokenize", json{{"content", text}, {"add_special", true}});
  EXPECT_EQ(bos.body["tokens"].get<std::vector<int32_t>>(), tok.encode(text, true));

  Reply pieces = post(s, "/tokenize", json{{"content", text}, {"add_special", true}, {"with_pieces", true}});
  ASSERT_EQ(pieces.status, 200);
  std::string joined;
  for (const json& t : pieces.body["tokens"]) {
    ASSERT_TRUE(t["id"].is_number_integer());
    if (t["id"] == tok.bos_id()) EXPECT_EQ(t["piece"], tok.token_text(tok.bos_id()));
    else joined += t["piece"].get<std::string>();
  }
  EXPECT_EQ(joined, " " + text);  // SentencePiece's dummy prefix

  Reply back = post(s, "/detokenize", json{{"tokens", plain.body["tokens"]}});
  ASSERT_EQ(back.status, 200);
  EXPECT_EQ(back.body["content"], text);
  EXPECT_EQ(post(s, "/detokenize", json{{"tokens", json::array()}}).body["content"], "");
}

TEST(Tokenize, APieceThatIsPartOfACharacterIsItsBytes) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  // stories260K spells "ü" with byte tokens <0xC3> <0xBC>.
  Reply r = post(s, "/tokenize", json{{"content", "ü"}, {"with_pieces", true}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  std::vector<int> bytes;
  for (const json& t : r.body["tokens"])
    if (t["piece"].is_array())
      for (const json& b : t["piece"]) bytes.push_back(b.get<int>());
  EXPECT_EQ(bytes, (std::vector<int>{0xC3, 0xBC})) << r.body.dump();
}

// --max-tokenize-tokens caps the response (each token with its piece is
// ~20 bytes of JSON, several times the text it came from); at the cap the
// answer is whole, past it a 400 that says so, and 0 means no cap.
TEST(Tokenize, TheTokenCapIsA400PastIt) {
  HarnessOptions o;
  o.server.max_tokenize_tokens = 50;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  const Tokenizer& tok = s.model().tokenizer();
  std::string text;
  while (tok.encode(text, false).size() < 50) text += "a cat ";
  while (tok.encode(text, false).size() > 50) text.pop_back();
  ASSERT_EQ(tok.encode(text, false).size(), 50u);
  Reply at = post(s, "/tokenize", json{{"content", text}, {"with_pieces", true}});
  ASSERT_EQ(at.status, 200) << at.body.dump();
  EXPECT_EQ(at.body["tokens"].size(), 50u);
  Reply past = post(s, "/tokenize", json{{"content", text + " dog"}, {"with_pieces", true}});
  expect_400(past, "more than the 50 one request may tokenize", "content");
  EXPECT_EQ(past.body["error"]["code"], "too_many_tokens");

  o.server.max_tokenize_tokens = 0;
  TestServer uncapped(o);
  ASSERT_TRUE(uncapped.ok());
  EXPECT_EQ(post(uncapped, "/tokenize", json{{"content", text + text}}).status, 200);
}

TEST(Tokenize, BadBodiesAre400s) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  expect_400(post(s, "/tokenize", std::string("{")), "not valid JSON");
  expect_400(post(s, "/tokenize", json::object()), "'content' is required", "content");
  expect_400(post(s, "/tokenize", json{{"content", 5}}), "must be a string", "content");
  expect_400(post(s, "/tokenize", json{{"content", "a"}, {"with_pieces", "yes"}}), "boolean", "with_pieces");
  expect_400(post(s, "/tokenize", json{{"content", "a"}, {"extra", 1}}), "unknown field", "extra");
  expect_400(post(s, "/detokenize", json{{"tokens", {1, 512}}}), "out of range", "tokens");
  expect_400(post(s, "/detokenize", json{{"tokens", json::array({-1})}}), "out of range", "tokens");
  expect_400(post(s, "/detokenize", json{{"tokens", json::array({1.5})}}), "array of token ids", "tokens");
  expect_400(post(s, "/detokenize", json{{"tokens", "1 2"}}), "array of token ids", "tokens");
}

TEST(Embeddings, ShapeUsageAndUnitVectors) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const Tokenizer& tok = s.model().tokenizer();
  const std::vector<std::string> texts = {"Once upon a time", "The cat sat on the mat.", "Lily"};
  Reply r = post(s, "/v1/embeddings", json{{"input", texts}, {"model", "m"}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["object"], "list");
  EXPECT_EQ(r.body["model"], "m");
  int64_t n_tokens = 0;
  for (const auto& t : texts) n_tokens += static_cast<int64_t>(tok.encode(t, true).size());
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], n_tokens);
  EXPECT_EQ(r.body["usage"]["total_tokens"], n_tokens);
  ASSERT_EQ(r.body["data"].size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const json& d = r.body["data"][i];
    EXPECT_EQ(d["object"], "embedding");
    EXPECT_EQ(d["index"], i);
    const std::vector<float> v = vec(d["embedding"]);
    ASSERT_EQ(v.size(), static_cast<size_t>(s.model().config().dim));
    double norm = 0;
    for (float x : v) norm += static_cast<double>(x) * x;
    EXPECT_NEAR(norm, 1.0, 1e-5);
  }
  // Different texts, different vectors.
  EXPECT_GT(max_diff(vec(r.body["data"][0]["embedding"]), vec(r.body["data"][1]["embedding"])), 1e-3);
}

TEST(Embeddings, EveryInputFormGivesTheSameVectorAloneOrBatched) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::vector<int32_t> ids = s.model().tokenizer().encode("The cat sat on the mat.", true);
  Reply text = post(s, "/v1/embeddings", json{{"input", "The cat sat on the mat."}});
  Reply one_ids = post(s, "/v1/embeddings", json{{"input", ids}});
  Reply batch_ids = post(s, "/v1/embeddings", json{{"input", json::array({std::vector<int32_t>{1, 400, 20}, ids})}});
  ASSERT_EQ(text.status, 200);
  ASSERT_EQ(one_ids.status, 200);
  ASSERT_EQ(batch_ids.status, 200) << batch_ids.body.dump();
  const std::vector<float> v = vec(text.body["data"][0]["embedding"]);
  EXPECT_LT(max_diff(v, vec(one_ids.body["data"][0]["embedding"])), 1e-6);
  EXPECT_LT(max_diff(v, vec(batch_ids.body["data"][1]["embedding"])), 1e-5);

  // base64 carries the same float32 bytes.
  Reply b64 = post(s, "/v1/embeddings", json{{"input", ids}, {"encoding_format", "base64"}});
  ASSERT_EQ(b64.status, 200);
  EXPECT_EQ(b64.body["data"][0]["embedding"], server::base64_floats(vec(one_ids.body["data"][0]["embedding"])));
  // dimensions equal to the model's width is no change.
  Reply dims = post(s, "/v1/embeddings", json{{"input", ids}, {"dimensions", s.model().config().dim}});
  ASSERT_EQ(dims.status, 200) << dims.body.dump();
  EXPECT_EQ(dims.body["data"][0]["embedding"], one_ids.body["data"][0]["embedding"]);
}

TEST(Embeddings, Base64IsRfc4648OfLittleEndianFloats) {
  // 1.0f is 00 00 80 3F; 1.0f, -2.0f is 00 00 80 3F 00 00 00 C0.
  EXPECT_EQ(server::base64_floats({1.0f}), "AACAPw==");
  EXPECT_EQ(server::base64_floats({1.0f, -2.0f}), "AACAPwAAAMA=");
  EXPECT_EQ(server::base64_floats({}), "");
}

TEST(Embeddings, BadInputsAre400sThatSayWhatIsWrong) {
  HarnessOptions o;
  o.engine.ctx = 64;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  const std::string e = "/v1/embeddings";
  expect_400(post(s, e, json::object()), "'input' is required", "input");
  expect_400(post(s, e, json{{"input", ""}}), "empty string", "input");
  expect_400(post(s, e, json{{"input", json::array()}}), "empty array", "input");
  expect_400(post(s, e, json{{"input", {"a", ""}}}), "input[1] is an empty string", "input");
  expect_400(post(s, e, json{{"input", json::array({json::array()})}}), "input[0] is an empty array", "input");
  expect_400(post(s, e, json{{"input", 5}}), "must be a string, an array", "input");
  expect_400(post(s, e, json{{"input", {"a", 5}}}), "mixes kinds at input[1]", "input");
  expect_400(post(s, e, json{{"input", {1, "a"}}}), "only token ids", "input");
  expect_400(post(s, e, json{{"input", json::array({1.5})}}), "only token ids", "input");
  expect_400(post(s, e, json{{"input", {1, 512}}}), "token id 512 is out of range", "input");
  expect_400(post(s, e, json{{"input", json::array({json::array({1, 2}), json::array({-3})})}}), "input[1]: token id -3 is out of range", "input");
  expect_400(post(s, e, json{{"input", std::vector<int32_t>(65, 1)}}), "65 tokens; the context holds 64", "input");
  expect_400(post(s, e, json{{"input", "a"}, {"encoding_format", "int8"}}), "\"float\" or \"base64\"",
             "encoding_format");
  expect_400(post(s, e, json{{"input", "a"}, {"dimensions", 8}}), "not trained to give shorter ones", "dimensions");
  expect_400(post(s, e, json{{"input", "a"}, {"dimensions", "64"}}), "an integer", "dimensions");
  expect_400(post(s, e, json{{"input", "a"}, {"model", 3}}), "a string", "model");
  expect_400(post(s, e, json{{"input", "a"}, {"stream", true}}), "unknown field 'stream'", "stream");
  expect_400(post(s, e, json{{"input", std::vector<std::string>(server::EmbeddingLimits{}.max_inputs + 1, "a")}}),
             "at most 2048", "input");
  // A context-length input fits (nothing is generated after it).
  Reply full = post(s, e, json{{"input", std::vector<int32_t>(64, 1)}});
  EXPECT_EQ(full.status, 200) << full.body.dump();
}

TEST(Embeddings, PoolingNoneIsA400NamingTheFlag) {
  HarnessOptions o;
  o.server.pooling = Pooling::kNone;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  expect_400(post(s, "/v1/embeddings", json{{"input", "a"}}), "--pooling");
}

TEST(Health, OkWhenServing) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto r = s.client().Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body), json({{"status", "ok"}}));
}

TEST(Health, TheStartupServerAnswers503WhileTheModelLoads) {
  server::StartupServer startup(server::HttpLimits{});
  auto port = startup.start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.error().message;
  httplib::Client c("127.0.0.1", *port);
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  EXPECT_EQ(json::parse(h->body), json({{"status", "loading"}}));
  auto g = c.Post("/v1/completions", "{}", "application/json");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 503);
  EXPECT_EQ(json::parse(g->body)["error"]["code"], "loading");
  startup.stop();
  // The port is free again for the real server.
  server::StartupServer again(server::HttpLimits{});
  EXPECT_TRUE(again.start("127.0.0.1", *port).ok());
}

// The stand-in hands its listening socket to the real server: a client
// that connects between the two is not refused but answered by the second.
TEST(Health, AClientConnectingDuringTheHandOverIsServedNotRefused) {
  server::StartupServer startup(server::HttpLimits{});
  auto port = startup.start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.error().message;
  const server::Listener listener = startup.hand_over();
  ASSERT_GE(listener.fd, 0);
  RawSocket between(*port);  // nobody accepts now: it waits in the backlog
  ASSERT_TRUE(between.ok()) << "refused during the hand-over";
  ASSERT_TRUE(between.send_all("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  server::HttpServer real(
      server::HttpLimits{}, 2,
      [](const server::HttpRequest&, server::HttpResponse& res) {
        res.set_content(R"({"status":"ok"})", "application/json");
      },
      [](int status, const std::string& message, server::HttpResponse& res) {
        res.status = status;
        res.set_content(message, "text/plain");
      });
  auto adopted = real.adopt(listener);
  ASSERT_TRUE(adopted.ok()) << adopted.error().message;
  EXPECT_EQ(*adopted, *port);
  std::thread io([&] { real.run(); });
  const std::string reply = between.read_all();
  real.stop();
  io.join();
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
  EXPECT_NE(reply.find(R"({"status":"ok"})"), std::string::npos) << reply;
}

Reply options(TestServer& s, const std::string& path, const httplib::Headers& h) {
  RawSocket sock(s.port());
  std::string req = "OPTIONS " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
  for (const auto& [k, v] : h) req += k + ": " + v + "\r\n";
  EXPECT_TRUE(sock.send_all(req + "\r\n"));
  const std::string raw = sock.read_all();
  Reply r;
  if (raw.size() < 12) return r;
  r.status = std::stoi(raw.substr(9, 3));
  size_t pos = raw.find("\r\n") + 2;
  const size_t end = raw.find("\r\n\r\n");
  while (pos < end) {
    const size_t eol = raw.find("\r\n", pos);
    const std::string line = raw.substr(pos, eol - pos);
    const size_t colon = line.find(':');
    r.headers.emplace(line.substr(0, colon), line.substr(colon + 2));
    pos = eol + 2;
  }
  r.body = json::parse(raw.substr(end + 4), nullptr, false);
  return r;
}

TEST(Cors, OffByDefault) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  Reply r = post(s, "/tokenize", json{{"content", "a"}}.dump(), {{"Origin", "https://app.example"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "");
  Reply pre = options(s, "/v1/chat/completions",
                      {{"Origin", "https://app.example"}, {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(pre.header("Allow"), "POST, OPTIONS");
  EXPECT_EQ(pre.header("Access-Control-Allow-Origin"), "");
  EXPECT_EQ(pre.header("Access-Control-Allow-Methods"), "");
  EXPECT_EQ(pre.header("Content-Length"), "");  // a 204 has no body
}

TEST(Cors, AllowedOriginsGetHeadersAndPreflightsWithoutTheKey) {
  HarnessOptions o;
  o.server.api_key = "sesame";
  auto cors = server::parse_cors_origins({"https://a.example, http://localhost:3000", "https://b.example/"});
  ASSERT_TRUE(cors.ok());
  o.server.cors = *cors;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  Reply pre = options(s, "/v1/chat/completions",
                      {{"Origin", "https://b.example"},
                       {"Access-Control-Request-Method", "POST"},
                       {"Access-Control-Request-Headers", "authorization, content-type, x-stainless-os"}});
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(pre.header("Access-Control-Allow-Origin"), "https://b.example");
  EXPECT_EQ(pre.header("Vary"), "Origin");
  EXPECT_EQ(pre.header("Access-Control-Allow-Methods"), "POST, OPTIONS");
  const std::string allowed = pre.header("Access-Control-Allow-Headers");
  for (const char* h : {"Authorization", "Content-Type", "x-stainless-os"})
    EXPECT_NE(allowed.find(h), std::string::npos) << allowed;
  EXPECT_EQ(pre.header("Access-Control-Max-Age"), "7200");

  // A real request: the origin is echoed, errors included (the browser must
  // be able to read a 401).
  Reply ok = post(s, "/tokenize", json{{"content", "a"}}.dump(),
                  {{"Origin", "http://localhost:3000"}, {"Authorization", "Bearer sesame"}});
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.header("Access-Control-Allow-Origin"), "http://localhost:3000");
  EXPECT_EQ(ok.header("Access-Control-Expose-Headers"), "Retry-After");
  Reply denied = post(s, "/tokenize", json{{"content", "a"}}.dump(), {{"Origin", "https://a.example"}});
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(denied.header("Access-Control-Allow-Origin"), "https://a.example");

  // Other origins: no header on responses, 403 on preflights.
  Reply other = post(s, "/tokenize", json{{"content", "a"}}.dump(),
                     {{"Origin", "https://evil.example"}, {"Authorization", "Bearer sesame"}});
  EXPECT_EQ(other.status, 200);
  EXPECT_EQ(other.header("Access-Control-Allow-Origin"), "");
  Reply refused = options(s, "/v1/embeddings", {{"Origin", "https://evil.example"}, {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(refused.header("Access-Control-Allow-Origin"), "");
  EXPECT_EQ(refused.body["error"]["code"], "origin_not_allowed");
  // An unknown route is no preflight: it needs the key like any request.
  EXPECT_EQ(options(s, "/v1/nope", {{"Origin", "https://a.example"}, {"Access-Control-Request-Method", "POST"}}).status,
            401);
}

TEST(Cors, AnyOriginIsAStar) {
  HarnessOptions o;
  o.server.cors = *server::parse_cors_origins({"*"});
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  Reply r = post(s, "/v1/embeddings", json{{"input", "a"}}.dump(), {{"Origin", "https://any.example"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(r.header("Vary"), "");
  Reply pre = options(s, "/health", {{"Origin", "https://any.example"}, {"Access-Control-Request-Method", "GET"}});
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(pre.header("Access-Control-Allow-Methods"), "GET, OPTIONS");
  EXPECT_EQ(pre.header("Access-Control-Allow-Headers"), "Authorization, Content-Type");
}

TEST(Cors, BadOriginsAreRefusedAtStart) {
  for (const char* bad : {"app.example", "https://a.example/path", "https://", ""})
    EXPECT_FALSE(server::parse_cors_origins({bad}).ok()) << bad;
  auto two = server::parse_cors_origins({"https://a.example,https://b.example:8443"});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->origins, (std::vector<std::string>{"https://a.example", "https://b.example:8443"}));
}

}  // namespace
}  // namespace duet::testing
