// duet serve: the OpenAI-compatible HTTP server over one model.
#include <pthread.h>
#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cli/chat_template_option.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/target_model.h"
#include "dist/communicator.h"
#include "cli/engine_options.h"
#include "cli/malloc_arenas.h"
#include "cli/phase_ceilings.h"
#include "engine/engine_loop.h"
#include "server/openai_server.h"
#include "server/startup_server.h"

namespace duet::cli {
namespace {

struct ServeOptions {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string api_key_file;
  std::string chat_template;  // --chat-template NAME|FILE
  int32_t max_seqs = 16;
  int32_t max_batch_tokens = 512;
  int32_t max_queue = 64;
  int32_t kv_blocks = 0;
  double kv_mem_mib = 0;
  server::HttpLimits http;
  double header_timeout = 10;
  double body_timeout = 30;
  int32_t max_tokens = 0;
  int32_t max_prompt_tokens = 0;
  int32_t max_n = 16;
  int32_t max_tokenize_tokens = server::ServerConfig{}.max_tokenize_tokens;
  server::EmbeddingLimits embeddings;
  double request_timeout = 600;
  double shutdown_timeout = 20;
  bool no_prefix_cache = false;
  bool no_warmup = false;
  std::vector<std::string> cors_origins;  // --cors-origin, repeatable or comma-separated
  std::string pooling;                    // --pooling; empty: the model's
  int32_t probe_mib = 256;                // --probe-mib
  EngineOptions engine;
};

// The server the signal thread drains; null once it has stopped.
std::mutex g_server_mu;
server::OpenAiServer* g_server = nullptr;

// SIGINT and SIGTERM are blocked in every thread (so set before any starts)
// and taken by this one: the first drains the server, letting running
// requests finish for the grace period; a second exits at once.
void watch_signals(sigset_t set, std::chrono::milliseconds grace) {
  int sig = 0;
  if (sigwait(&set, &sig) != 0) return;
  std::fprintf(stderr, "duet: %s: new requests get 503; running ones have %.1f s to finish (again: exit now)\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", static_cast<double>(grace.count()) / 1e3);
  {
    std::lock_guard lock(g_server_mu);
    if (g_server) g_server->drain(grace);
  }
  if (sigwait(&set, &sig) != 0) return;
  std::fprintf(stderr, "duet: second signal: exiting now\n");
  std::_Exit(128 + sig);
}

// Every connection is a descriptor: the soft limit (often 1024) would cap
// the server far below what the event loop holds, so take the hard one.
void raise_fd_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

Result<Pooling> parse_pooling(const std::string& name) {
  for (Pooling p : {Pooling::kMean, Pooling::kCls, Pooling::kLast})
    if (name == pooling_name(p)) return p;
  return err("--pooling must be mean, cls or last, not '", name, "'");
}

int serve(const ServeOptions& o) {
  limit_malloc_arenas();
  map_large_allocations();
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();
  if (o.max_seqs < 1) return fail(err("--max-seqs must be >= 1"));
  if (o.max_batch_tokens < 1) return fail(err("--max-batch-tokens must be >= 1"));
  if (o.max_queue < 0) return fail(err("--max-queue must be >= 0"));
  if (o.kv_mem_mib < 0) return fail(err("--kv-mem must be >= 0"));
  if (o.header_timeout <= 0 || o.body_timeout <= 0) return fail(err("--header-timeout and --body-timeout must be > 0"));
  if (o.max_tokens < 0 || o.max_prompt_tokens < 0 || o.request_timeout < 0 || o.shutdown_timeout < 0)
    return fail(err("--max-tokens, --max-prompt-tokens, --request-timeout and --shutdown-timeout must be >= 0"));
  if (o.max_n < 1) return fail(err("--max-n must be >= 1"));
  if (o.max_tokenize_tokens < 0) return fail(err("--max-tokenize-tokens must be >= 0"));
  if (o.embeddings.max_inputs < 1 || o.embeddings.max_tokens < 1)
    return fail(err("--max-embedding-inputs and --max-embedding-tokens must be >= 1"));
  if (o.http.max_conns < 1 || o.http.max_conns_per_address < 1)
    return fail(err("--max-conns and --max-conns-per-client must be >= 1"));
  if (o.kv_mem_mib > 0 && o.kv_blocks > 0) return fail(err("give --kv-mem or --kv-blocks, not both"));
  auto cors = server::parse_cors_origins(o.cors_origins);
  if (!cors) return fail(cors.error());
  std::optional<Pooling> pooling;
  if (!o.pooling.empty()) {
    auto p = parse_pooling(o.pooling);
    if (!p) return fail(p.error());
    pooling = *p;
  }
  if (o.probe_mib < 0) return fail(err("--probe-mib must be >= 0"));
  // The port answers from the start: 503 "loading" until the model is ready.
  // Only rank 0 listens: the other ranks of a tensor-parallel run never
  // return from loading (load_target_model), and a second bind of a fixed
  // port would fail.
  server::StartupServer startup(o.http);
  auto early_port = world().leads() ? startup.start(o.host, o.port) : Result<int>(0);
  if (!early_port) return fail(early_port.error());
  auto model = load_target_model(o.model, load_mode(o.engine.no_mmap), o.engine.threads);
  if (!model) return fail(model.error());

  EngineConfig config;
  if (Status st = apply_engine_options(o.engine, **model, config); !st) return fail(st.error());
  config.n_kv_blocks = o.kv_blocks;
  config.kv_bytes = static_cast<size_t>(o.kv_mem_mib * 1024 * 1024);
  config.scheduler.max_seqs = o.max_seqs;
  config.scheduler.max_batch_tokens = o.max_batch_tokens;
  config.scheduler.prefix_caching = !o.no_prefix_cache;
  Engine engine(**model, config);
  std::unique_ptr<Model> draft;
  if (Status st = enable_spec(engine, o.engine.spec, draft); !st) return fail(st.error());
  if (!o.no_warmup) {  // before the loop's thread takes the engine
    const int32_t bos = (*model)->tokenizer().bos_id();
    if (Status st = engine.warm_up(bos >= 0 ? bos : 0); !st) return fail(st.error());
  }
  EngineLoop loop(engine, o.max_seqs + o.max_queue);

  server::ServerConfig sc;
  sc.host = o.host;
  sc.port = *early_port;
  sc.cors = std::move(*cors);
  sc.pooling = pooling;
  sc.api_key = o.api_key;
  if (!o.api_key_file.empty()) {
    if (!o.api_key.empty()) return fail(err("give --api-key or --api-key-file, not both"));
    auto text = read_text(o.api_key_file);
    if (!text) return fail(text.error());
    sc.api_key = text->substr(0, text->find_first_of("\r\n"));
    if (sc.api_key.empty()) return fail(err(o.api_key_file, ": the API key file's first line is empty"));
  }
  sc.model_name = std::filesystem::path(o.model).stem().string();
  sc.http = o.http;
  sc.http.header_timeout_ms = static_cast<int32_t>(o.header_timeout * 1000);
  sc.http.body_timeout_ms = static_cast<int32_t>(o.body_timeout * 1000);
  // Every request in flight may hold a worker (streams do), plus a few for
  // quick ones (/health, /metrics, refusals) meanwhile.
  sc.http_threads = o.max_seqs + o.max_queue + 8;
  sc.max_tokens_limit = o.max_tokens;
  sc.max_prompt_tokens = o.max_prompt_tokens;
  sc.max_n = o.max_n;
  sc.max_tokenize_tokens = o.max_tokenize_tokens;
  sc.embeddings = o.embeddings;
  sc.request_timeout_ms = static_cast<int32_t>(o.request_timeout * 1000);
  // An explicit --chat-template must resolve; otherwise the model's own
  // template is used when it parses, and the built-in Llama 2 format if not.
  auto tmpl = resolve_chat_template(o.chat_template, **model);
  if (tmpl) sc.chat_template = std::make_shared<const ChatTemplate>(std::move(*tmpl));
  else if (!o.chat_template.empty()) return fail(tmpl.error());
  // Once every option has been checked, and while the loop has no request
  // (only the stand-in answers) so the threads are idle: the ceilings
  // each answer's timings are judged against.
  if (o.probe_mib > 0) sc.roofline = measure_serve_roofline(**model, engine, o.probe_mib);
  server::OpenAiServer srv(**model, loop, sc);
  // The same listening socket: a client connecting during the switch waits
  // in its backlog for the real server.
  auto port = srv.adopt(startup.hand_over());
  if (!port) return fail(port.error());
  {
    std::lock_guard lock(g_server_mu);
    g_server = &srv;
  }
  std::thread(watch_signals, signals,
              std::chrono::milliseconds(static_cast<int64_t>(o.shutdown_timeout * 1000)))
      .detach();
  std::fprintf(stderr,
               "duet: serving %s on http://%s:%d (context %d, %d KV blocks of %s, %.1f MiB, "
               "%zu bytes/token, up to %d sequences)\n",
               sc.model_name.c_str(), o.host.c_str(), *port, engine.ctx(),
               engine.cache().pool().n_blocks(), std::string(kv_type_name(engine.cache().type())).c_str(),
               static_cast<double>(engine.cache().bytes_total()) / (1024.0 * 1024.0),
               engine.cache().bytes_per_token(), o.max_seqs);
  std::fprintf(stderr, "duet: chat in a browser: http://%s:%d/", o.host.c_str(), *port);
  if (o.probe_mib > 0)
    std::fprintf(stderr, " (answers judged against read %.1f GB/s, compute %.1f G op/s, measured now)",
                 sc.roofline.read_gb_s, sc.roofline.compute_gop_s);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  const bool ok = srv.listen();
  {
    std::lock_guard lock(g_server_mu);
    g_server = nullptr;
  }
  return ok ? 0 : fail(err("the server stopped with an error"));
}

const bool serve_registered = register_command(
    "serve", "Serve the OpenAI-compatible HTTP API", [](CLI::App& app) {
      auto o = std::make_shared<ServeOptions>();
      app.add_option("-m,--model", o->model, "Model file (GGUF)")->required();
      app.add_option("--host", o->host, "Address to listen on")->capture_default_str();
      app.add_option("--port", o->port, "Port (0: any free port, printed at start)")->capture_default_str();
      app.add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' (visible in ps: prefer the file "
                     "or the environment)")
          ->envname("DUET_API_KEY");
      app.add_option("--api-key-file", o->api_key_file, "Read the API key from this file (its first line)");
      app.add_option("--chat-template", o->chat_template, chat_template_option_help());
      app.add_option("--max-seqs", o->max_seqs, "Sequences decoded together")->capture_default_str();
      app.add_option("--max-batch-tokens", o->max_batch_tokens, "Tokens per engine step")->capture_default_str();
      app.add_option("--max-queue", o->max_queue, "Requests waiting beyond --max-seqs; more get 429 with Retry-After")
          ->capture_default_str();
      app.add_option("--kv-blocks", o->kv_blocks, "KV cache blocks of 16 tokens (0: max-seqs full contexts)")
          ->capture_default_str();
      app.add_option("--kv-mem", o->kv_mem_mib, "KV cache memory in MiB (0: from --kv-blocks); "
                     "a smaller --kv-type fits more tokens in it")
          ->capture_default_str();
      app.add_option("--header-timeout", o->header_timeout,
                     "Seconds a client has to send a request's head (and an idle keep-alive connection lasts)")
          ->capture_default_str();
      app.add_option("--body-timeout", o->body_timeout, "Seconds a client has to send a request's body")
          ->capture_default_str();
      app.add_option("--max-header-bytes", o->http.max_header_bytes, "Largest request head; more get 431")
          ->capture_default_str();
      app.add_option("--max-body-bytes", o->http.max_body_bytes, "Largest request body; more get 413")
          ->capture_default_str();
      app.add_option("--max-conns", o->http.max_conns,
                     "Open connections in all; more get 503 with Retry-After and are closed")
          ->capture_default_str();
      app.add_option("--max-conns-per-client", o->http.max_conns_per_address,
                     "Open connections from one client address; more get 429 and are closed")
          ->capture_default_str();
      app.add_option("--max-tokens", o->max_tokens, "Largest max_tokens a request may ask (0: no cap)")
          ->capture_default_str();
      app.add_option("--max-prompt-tokens", o->max_prompt_tokens, "Longest prompt in tokens (0: the context)")
          ->capture_default_str();
      app.add_option("--max-n", o->max_n, "Most choices (n) one request may ask; more get 400")
          ->capture_default_str();
      app.add_option("--max-tokenize-tokens", o->max_tokenize_tokens,
                     "Most tokens /tokenize returns for one request; more get 400 (0: no cap)")
          ->capture_default_str();
      app.add_option("--max-embedding-inputs", o->embeddings.max_inputs,
                     "Most inputs one /v1/embeddings request may hold; more get 400")
          ->capture_default_str();
      app.add_option("--max-embedding-tokens", o->embeddings.max_tokens,
                     "Most tokens, over all its inputs, one /v1/embeddings request may hold; more get 400")
          ->capture_default_str();
      app.add_option("--request-timeout", o->request_timeout,
                     "Seconds a request may run; then it ends with an error (0: no limit)")
          ->capture_default_str();
      app.add_option("--shutdown-timeout", o->shutdown_timeout,
                     "Seconds running requests may go on after SIGTERM/SIGINT before they are ended")
          ->capture_default_str();
      app.add_flag("--no-prefix-cache", o->no_prefix_cache, "Do not reuse KV blocks of shared prefixes");
      app.add_flag("--no-warmup", o->no_warmup,
                   "Skip the one-token pass before serving (then the first request's TTFT includes it); "
                   "/metrics does not count it either way");
      app.add_option("--cors-origin", o->cors_origins,
                     "Let browser pages of this origin call the API (scheme://host[:port], or * for any); "
                     "repeatable or comma-separated. Without it no CORS headers are sent");
      app.add_option("--pooling", o->pooling,
                     "How /v1/embeddings pools the hidden states: mean, cls or last (default: the model's "
                     "pooling_type, mean where it names none)");
      app.add_option("--probe-mib", o->probe_mib,
                     "MiB read by the bandwidth probe at start, for each answer's verdict (0: no probes; "
                     "the verdict then compares times alone)")
          ->capture_default_str();
      add_engine_options(app, &o->engine);
      return [o] { return serve(*o); };
    });

}  // namespace
}  // namespace duet::cli
