// duet serve: the OpenAI-compatible HTTP server over one model.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/chat_template_option.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/target_model.h"
#include "cli/engine_options.h"
#include "engine/engine_loop.h"
#include "server/openai_server.h"

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
  int read_timeout = 10;
  bool no_prefix_cache = false;
  EngineOptions engine;
};

server::OpenAiServer* g_server = nullptr;

void on_signal(int) {
  // httplib's stop() only shuts the listening socket: safe enough here.
  if (g_server) g_server->stop();
}

int serve(const ServeOptions& o) {
  if (o.max_seqs < 1) return fail(err("--max-seqs must be >= 1"));
  if (o.max_batch_tokens < 1) return fail(err("--max-batch-tokens must be >= 1"));
  if (o.max_queue < 0) return fail(err("--max-queue must be >= 0"));
  if (o.kv_mem_mib < 0) return fail(err("--kv-mem must be >= 0"));
  if (o.kv_mem_mib > 0 && o.kv_blocks > 0) return fail(err("give --kv-mem or --kv-blocks, not both"));
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
  EngineLoop loop(engine, o.max_seqs + o.max_queue);

  server::ServerConfig sc;
  sc.host = o.host;
  sc.port = o.port;
  sc.api_key = o.api_key;
  if (!o.api_key_file.empty()) {
    if (!o.api_key.empty()) return fail(err("give --api-key or --api-key-file, not both"));
    auto text = read_text(o.api_key_file);
    if (!text) return fail(text.error());
    sc.api_key = text->substr(0, text->find_first_of("\r\n"));
    if (sc.api_key.empty()) return fail(err(o.api_key_file, ": the API key file's first line is empty"));
  }
  sc.model_name = std::filesystem::path(o.model).stem().string();
  sc.read_timeout_s = o.read_timeout;
  sc.http_threads = o.max_seqs + o.max_queue + 8;
  // An explicit --chat-template must resolve; otherwise the model's own
  // template is used when it parses, and the built-in Llama 2 format if not.
  auto tmpl = resolve_chat_template(o.chat_template, **model);
  if (tmpl) sc.chat_template = std::make_shared<const ChatTemplate>(std::move(*tmpl));
  else if (!o.chat_template.empty()) return fail(tmpl.error());
  server::OpenAiServer srv(**model, loop, sc);
  auto port = srv.bind();
  if (!port) return fail(port.error());
  g_server = &srv;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  std::fprintf(stderr,
               "duet: serving %s on http://%s:%d (context %d, %d KV blocks of %s, %.1f MiB, "
               "%zu bytes/token, up to %d sequences)\n",
               sc.model_name.c_str(), o.host.c_str(), *port, engine.ctx(),
               engine.cache().pool().n_blocks(), std::string(kv_type_name(engine.cache().type())).c_str(),
               static_cast<double>(engine.cache().bytes_total()) / (1024.0 * 1024.0),
               engine.cache().bytes_per_token(), o.max_seqs);
  std::fflush(stderr);
  const bool ok = srv.listen();
  g_server = nullptr;
  return ok ? 0 : fail(err("the server stopped with an error"));
}

const bool registered = register_command(
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
      app.add_option("--max-queue", o->max_queue, "Requests waiting beyond --max-seqs before 503")
          ->capture_default_str();
      app.add_option("--kv-blocks", o->kv_blocks, "KV cache blocks of 16 tokens (0: max-seqs full contexts)")
          ->capture_default_str();
      app.add_option("--kv-mem", o->kv_mem_mib, "KV cache memory in MiB (0: from --kv-blocks); "
                     "a smaller --kv-type fits more tokens in it")
          ->capture_default_str();
      app.add_option("--read-timeout", o->read_timeout, "Seconds a client may stall mid-request")
          ->capture_default_str();
      app.add_flag("--no-prefix-cache", o->no_prefix_cache, "Do not reuse KV blocks of shared prefixes");
      add_engine_options(app, &o->engine);
      return [o] { return serve(*o); };
    });

}  // namespace
}  // namespace duet::cli
