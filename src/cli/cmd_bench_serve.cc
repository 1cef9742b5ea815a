// duet bench serve: a load generator for the HTTP server. N concurrent
// streaming clients over loopback send a mix of prompt and output lengths
// (bounded in request count and time) to a server it starts in-process from
// -m MODEL, or to a running one at --url. Prints output tokens/s, TTFT and
// ITL percentiles as the clients saw them, and the KV cache utilization
// (token slots filled ÷ token slots of the blocks in use, sampled from
// /metrics while the load runs). --shared-prefix-words gives every prompt
// the same prefix: with and without --no-prefix-cache, the TTFT figures show
// what the prefix cache saves. -c 1,4,16 runs the same mix at each
// concurrency in turn; --svg draws the TTFT and ITL distributions and the
// throughput against concurrency.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/svg_chart.h"
#include "core/json_parse.h"
#include "engine/engine_loop.h"
#include "server/openai_server.h"

namespace duet::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchServeOptions {
  std::string model;
  std::string url;
  std::string api_key;
  std::vector<int32_t> clients = {16};  // one run per concurrency
  int32_t requests = 64;
  double duration_s = 120;
  std::string prompt_words = "4:24";  // min:max words per prompt (fits stories260K's 128 tokens)
  std::string output_tokens = "16:64";
  int32_t threads = 0;
  int32_t max_seqs = 16;
  int32_t max_batch_tokens = 512;
  int32_t ctx = 0;
  int32_t shared_prefix_words = 0;
  bool no_prefix_cache = false;
  uint64_t seed = 1;
  bool json_out = false;
  std::string svg;
};

struct Range {
  int32_t lo, hi;
};

Result<Range> parse_range(const std::string& s, const char* what) {
  Range r{};
  char extra = 0;
  const int n = std::sscanf(s.c_str(), "%d:%d%c", &r.lo, &r.hi, &extra);
  if (n == 1) r.hi = r.lo;
  if ((n != 1 && n != 2) || r.lo < 1 || r.hi < r.lo)
    return err(what, " must be N or MIN:MAX with 1 <= MIN <= MAX (got '", s, "')");
  return r;
}

// One request as the client saw it.
struct Sample {
  bool ok = false;
  double ttft = 0;            // seconds from send to the first text chunk
  std::vector<double> itl;    // seconds between consecutive text chunks
  double first_at = 0;        // the first and last text chunks, seconds after the run began
  double last_at = 0;
  int64_t output_tokens = 0;  // from the usage chunk
  std::string error;
};

const char* kWords[] = {"the", "little", "dog", "ran", "to", "park", "and", "saw", "a", "big",
                        "red", "ball", "she", "was", "happy", "they", "played", "with", "tree", "sun"};

std::string make_prompt(std::mt19937_64& rng, const std::string& prefix, int32_t n_words) {
  std::string p = prefix + "Once upon a time";
  for (int32_t i = 0; i < n_words; ++i) p += std::string(" ") + kWords[rng() % std::size(kWords)];
  return p;
}

// Tokens after each request's first, divided by the time during which at
// least one request was between its first and last token: the rate decode
// runs at, without the prefill waits before first tokens (which TTFT shows).
double decode_tok_s(const std::vector<Sample>& samples) {
  std::vector<std::pair<double, double>> spans;
  int64_t tokens = 0;
  for (const Sample& s : samples)
    if (s.ok && s.output_tokens > 1) {
      spans.emplace_back(s.first_at, s.last_at);
      tokens += s.output_tokens - 1;
    }
  std::sort(spans.begin(), spans.end());
  double covered = 0, end = -1;
  for (const auto& [a, b] : spans) {
    if (b <= end) continue;
    covered += b - std::max(a, end);
    end = b;
  }
  return covered > 0 ? static_cast<double>(tokens) / covered : 0;
}

Sample run_one(const std::string& host, int port, const std::string& key, const json& body, Clock::time_point start) {
  Sample s;
  httplib::Client cli(host, port);
  cli.set_read_timeout(300, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  if (!key.empty()) req.set_header("Authorization", "Bearer " + key);
  const auto t0 = Clock::now();
  auto last = t0;
  bool first = true;
  std::string buf;
  std::string head;  // the body's start, for an error message
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (head.size() < 512) head.append(data, std::min<size_t>(n, 512 - head.size()));
    buf.append(data, n);
    size_t end;
    while ((end = buf.find("\n\n")) != std::string::npos) {
      const std::string event = buf.substr(0, end);
      buf.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]") continue;
      const auto parsed = parse_json(std::string_view(event).substr(6));
      if (!parsed.ok()) continue;
      const json& j = *parsed;
      if (j.contains("error")) s.error = j["error"].value("message", "error");
      if (j.contains("usage") && j["usage"].is_object()) s.output_tokens = j["usage"].value("completion_tokens", 0);
      if (!j.contains("choices") || j["choices"].empty()) continue;
      if (j["choices"][0].value("text", "").empty()) continue;
      const auto now = Clock::now();
      s.last_at = std::chrono::duration<double>(now - start).count();
      if (first) {
        s.ttft = std::chrono::duration<double>(now - t0).count();
        s.first_at = s.last_at;
      } else {
        s.itl.push_back(std::chrono::duration<double>(now - last).count());
      }
      first = false;
      last = now;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  if (!cli.send(req, res, error)) {
    s.error = "request failed: " + httplib::to_string(error);
    return s;
  }
  if (res.status != 200) {
    s.error = "HTTP " + std::to_string(res.status) + ": " + head;
    return s;
  }
  s.ok = s.error.empty() && !first;
  return s;
}

// Samples KV utilization from /metrics until `stop`.
struct KvSampler {
  int64_t stored = 0, slots = 0, samples = 0;
  void run(const std::string& host, int port, const std::string& key, const std::atomic<bool>& stop) {
    httplib::Client cli(host, port);
    httplib::Headers h;
    if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
    while (!stop) {
      if (auto r = cli.Get("/metrics", h); r && r->status == 200) {
        const auto value = [&](const std::string& name) -> int64_t {
          const size_t p = r->body.find("\n" + name + " ");
          return p == std::string::npos ? 0 : std::atoll(r->body.c_str() + p + name.size() + 2);
        };
        const int64_t sl = value("duet_kv_token_slots_used");
        if (sl > 0) {
          stored += value("duet_kv_tokens_stored");
          slots += sl;
          ++samples;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
};

// One concurrency's run of the whole request mix.
struct Level {
  int32_t clients = 0;
  std::vector<Sample> samples;
  double wall = 0;
  double kv_utilization = 0;
  int64_t kv_samples = 0;
  std::vector<double> ttft_ms, itl_ms;  // of the requests that succeeded
  int64_t ok = 0, tokens = 0;
  double output_tok_s = 0, decode_tok_s = 0;
  std::string first_error;

  json summary() const {
    return {{"clients", clients},
            {"requests_sent", samples.size()},
            {"requests_ok", ok},
            {"wall_s", wall},
            {"output_tokens", tokens},
            {"output_tok_s", output_tok_s},
            {"decode_tok_s", decode_tok_s},
            {"ttft_ms", {{"p50", percentile(ttft_ms, 50)}, {"p99", percentile(ttft_ms, 99)}}},
            {"itl_ms", {{"p50", percentile(itl_ms, 50)}, {"p99", percentile(itl_ms, 99)}}},
            {"kv_utilization", kv_utilization},
            {"kv_samples", kv_samples}};
  }
};

Level run_level(const std::string& host, int port, const BenchServeOptions& o, const std::vector<json>& bodies,
                int32_t n_clients) {
  Level l;
  l.clients = n_clients;
  std::atomic<bool> stop_sampler{false};
  KvSampler kv;
  std::thread sampler([&] { kv.run(host, port, o.api_key, stop_sampler); });
  std::atomic<int32_t> next{0};
  std::mutex mu;
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration<double>(o.duration_s);
  std::vector<std::thread> clients;
  for (int32_t c = 0; c < n_clients; ++c) {
    clients.emplace_back([&] {
      for (int32_t i; (i = next++) < o.requests && Clock::now() < deadline;) {
        Sample s = run_one(host, port, o.api_key, bodies[static_cast<size_t>(i)], t0);
        std::lock_guard lock(mu);
        l.samples.push_back(std::move(s));
      }
    });
  }
  for (auto& t : clients) t.join();
  l.wall = std::chrono::duration<double>(Clock::now() - t0).count();
  stop_sampler = true;
  sampler.join();

  for (const Sample& s : l.samples) {
    if (!s.ok) {
      if (l.first_error.empty()) l.first_error = s.error;
      continue;
    }
    ++l.ok;
    l.tokens += s.output_tokens;
    l.ttft_ms.push_back(s.ttft * 1e3);
    for (double d : s.itl) l.itl_ms.push_back(d * 1e3);
  }
  l.kv_utilization = kv.slots ? static_cast<double>(kv.stored) / static_cast<double>(kv.slots) : 0;
  l.kv_samples = kv.samples;
  l.output_tok_s = l.wall > 0 ? static_cast<double>(l.tokens) / l.wall : 0;
  l.decode_tok_s = decode_tok_s(l.samples);
  return l;
}

void report(const Level& l, bool json_only) {
  if (json_only) {
    std::printf("%s\n", l.summary().dump().c_str());
    return;
  }
  std::printf("clients %d, requests %zu sent, %lld ok, %.2f s\n", l.clients, l.samples.size(),
              static_cast<long long>(l.ok), l.wall);
  std::printf("output:        %lld tokens, %.1f tok/s\n", static_cast<long long>(l.tokens),
              l.output_tok_s);
  std::printf("decode:        %.1f tok/s while any request was past its first token\n",
              l.decode_tok_s);
  std::printf("TTFT p50/p99:  %.2f / %.2f ms\n", percentile(l.ttft_ms, 50), percentile(l.ttft_ms, 99));
  std::printf("ITL  p50/p99:  %.2f / %.2f ms\n", percentile(l.itl_ms, 50), percentile(l.itl_ms, 99));
  std::printf("KV utilization: %.1f %% of allocated token slots filled (%lld samples)\n", l.kv_utilization * 100,
              static_cast<long long>(l.kv_samples));
  std::printf("%s\n", l.summary().dump().c_str());
}

// The empirical distribution: the fraction of values at or below each one.
// Past 256 values, 256 evenly spaced ranks (the last included) draw the
// same curve in a file a hundred times smaller.
ChartSeries cdf(const std::string& name, std::vector<double> v) {
  constexpr size_t kMaxPoints = 256;
  std::sort(v.begin(), v.end());
  ChartSeries s{name, {}, ChartSeries::Style::Line, false};
  const size_t n = v.size(), shown = std::min(n, kMaxPoints);
  for (size_t k = 1; k <= shown; ++k) {
    const size_t i = k * n / shown - 1;
    s.points.emplace_back(v[i], static_cast<double>(i + 1) / static_cast<double>(n));
  }
  return s;
}

std::vector<Chart> serve_charts(const std::vector<Level>& levels) {
  Chart ttft{"time to first token", {"TTFT (ms)", true}, {"fraction of requests", false}, {}};
  Chart itl{"inter-token latency", {"ITL (ms)", true}, {"fraction of tokens", false}, {}};
  Chart rate{"throughput against concurrency", {"concurrent clients", false}, {"tokens/s", false}, {}};
  ChartSeries output{"output tok/s", {}, ChartSeries::Style::LineAndPoints, false};
  ChartSeries decode{"decode tok/s", {}, ChartSeries::Style::LineAndPoints, true};
  for (const Level& l : levels) {
    const std::string name = std::to_string(l.clients) + (l.clients == 1 ? " client" : " clients");
    ttft.series.push_back(cdf(name, l.ttft_ms));
    itl.series.push_back(cdf(name, l.itl_ms));
    output.points.emplace_back(l.clients, l.output_tok_s);
    decode.points.emplace_back(l.clients, l.decode_tok_s);
  }
  rate.series = {output, decode};
  return {ttft, itl, rate};
}

int bench_serve(const BenchServeOptions& o) {
  if (o.model.empty() == o.url.empty()) return fail(err("give either -m MODEL or --url URL"));
  if (o.clients.empty() || *std::min_element(o.clients.begin(), o.clients.end()) < 1 || o.requests < 1)
    return fail(err("--clients and --requests must be >= 1"));
  const int32_t max_clients = *std::max_element(o.clients.begin(), o.clients.end());
  auto prompt_words = parse_range(o.prompt_words, "--prompt-words");
  if (!prompt_words) return fail(prompt_words.error());
  auto output_tokens = parse_range(o.output_tokens, "--output-tokens");
  if (!output_tokens) return fail(output_tokens.error());

  // An in-process server when given a model.
  std::unique_ptr<Model> model;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<EngineLoop> loop;
  std::unique_ptr<server::OpenAiServer> srv;
  std::thread srv_thread;
  std::string host = "127.0.0.1";
  int port = 0;
  if (!o.model.empty()) {
    auto m = Model::load(o.model);
    if (!m) return fail(m.error());
    model = std::move(*m);
    EngineConfig config;
    config.n_threads = o.threads;
    config.ctx = o.ctx;
    config.scheduler.max_seqs = o.max_seqs;
    config.scheduler.max_batch_tokens = o.max_batch_tokens;
    config.scheduler.prefix_caching = !o.no_prefix_cache;
    engine = std::make_unique<Engine>(*model, config);
    loop = std::make_unique<EngineLoop>(*engine, o.max_seqs + max_clients + 8);
    server::ServerConfig sc;
    sc.port = 0;
    sc.model_name = std::filesystem::path(o.model).stem().string();
    sc.http_threads = max_clients + 8;
    // Every client (and the KV sampler) connects from loopback.
    sc.http.max_conns_per_address = std::max(sc.http.max_conns_per_address, max_clients + 8);
    srv = std::make_unique<server::OpenAiServer>(*model, *loop, sc);
    auto p = srv->bind();
    if (!p) return fail(p.error());
    port = *p;
    srv_thread = std::thread([&] { srv->listen(); });
  } else {
    char h[256] = {};
    if (std::sscanf(o.url.c_str(), "http://%255[^:/]:%d", h, &port) != 2)
      return fail(err("--url must look like http://HOST:PORT (got '", o.url, "')"));
    host = h;
  }

  // The same mix for a given seed: request i's lengths are fixed up front.
  std::mt19937_64 rng(o.seed);
  // A system-prompt-like prefix shared by every request, for the prefix cache.
  std::string prefix;
  for (int32_t i = 0; i < o.shared_prefix_words; ++i) prefix += std::string(kWords[rng() % std::size(kWords)]) + " ";
  std::vector<json> bodies;
  for (int32_t i = 0; i < o.requests; ++i) {
    const int32_t words = prompt_words->lo + static_cast<int32_t>(rng() % (prompt_words->hi - prompt_words->lo + 1));
    const int32_t out = output_tokens->lo + static_cast<int32_t>(rng() % (output_tokens->hi - output_tokens->lo + 1));
    bodies.push_back({{"prompt", make_prompt(rng, prefix, words)}, {"max_tokens", out}, {"temperature", 0.8},
                      {"seed", i}, {"ignore_eos", true}, {"stream", true},
                      {"stream_options", {{"include_usage", true}}}});
  }

  std::vector<Level> levels;
  for (int32_t clients : o.clients) levels.push_back(run_level(host, port, o, bodies, clients));
  if (srv) {
    srv->stop();
    srv_thread.join();
  }
  bool all_ok = true;
  for (const Level& l : levels) {
    report(l, o.json_out);
    all_ok = all_ok && l.ok == static_cast<int64_t>(l.samples.size());
    if (!l.first_error.empty()) std::fprintf(stderr, "duet: some requests failed, first: %s\n", l.first_error.c_str());
  }
  if (!o.svg.empty()) {
    if (auto st = write_svg(o.svg, serve_charts(levels)); !st) return fail(st.error());
    if (!o.json_out) std::printf("charts: %s\n", o.svg.c_str());
  }
  return all_ok ? 0 : 1;
}

const bool bench_serve_registered = register_command(
    "bench-serve", "Load-test the HTTP server with concurrent streaming clients", [](CLI::App& app) {
      auto o = std::make_shared<BenchServeOptions>();
      app.add_option("-m,--model", o->model, "Start a server in-process for this model (GGUF)");
      app.add_option("--url", o->url, "Target a running server instead (http://HOST:PORT)");
      app.add_option("--api-key", o->api_key, "Bearer key for --url");
      app.add_option("-c,--clients", o->clients, "Concurrent streaming clients; a list (1,4,16) runs each in turn")
          ->delimiter(',')
          ->capture_default_str();
      app.add_option("-n,--requests", o->requests, "Requests in all")->capture_default_str();
      app.add_option("--duration", o->duration_s, "Stop sending new requests after this many seconds")
          ->capture_default_str();
      app.add_option("--prompt-words", o->prompt_words, "Words per prompt, MIN:MAX")->capture_default_str();
      app.add_option("--output-tokens", o->output_tokens, "Tokens per response, MIN:MAX")->capture_default_str();
      app.add_option("-t,--threads", o->threads, "Engine threads (with -m)")->capture_default_str();
      app.add_option("--max-seqs", o->max_seqs, "Sequences decoded together (with -m)")->capture_default_str();
      app.add_option("--max-batch-tokens", o->max_batch_tokens, "Tokens per step (with -m)")->capture_default_str();
      app.add_option("--ctx", o->ctx, "Context length (with -m; 0: the model's)")->capture_default_str();
      app.add_option("--shared-prefix-words", o->shared_prefix_words,
                     "Words of a prefix every prompt starts with")->capture_default_str();
      app.add_flag("--no-prefix-cache", o->no_prefix_cache, "Disable the prefix cache (with -m)");
      app.add_option("--seed", o->seed, "Seed of the request mix")->capture_default_str();
      app.add_flag("--json", o->json_out, "Print only the JSON line (one per concurrency)");
      app.add_option("--svg", o->svg, "Draw TTFT and ITL distributions and throughput against concurrency (SVG)");
      return [o] { return bench_serve(*o); };
    });

}  // namespace
}  // namespace duet::cli
