// duet chat: an interactive conversation in the terminal (or from piped
// stdin, one user message per line), replies streamed, the KV cache kept
// between turns so each turn prefills only what is new.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "cli/chat_session.h"
#include "cli/chat_template_option.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/target_model.h"
#include "cli/engine_options.h"

namespace duet::cli {
namespace {

struct ChatOptions {
  std::string model;
  std::string chat_template;
  std::string system;
  int32_t n_predict = -1;
  SamplingOptions sampling;
  int32_t threads = 0;
  int32_t ctx = 0;
  std::string kv_type = "f16";
  bool verbose = false;
  bool no_cache_reuse = false;
};

const char* stop_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "end";
    case FinishReason::kContext: return "context";
    default: return "length";
  }
}

void print_turn_stats(int turn, const TurnStats& s) {
  const double prefill_tps = s.prefill_s > 0 ? s.prefill_tokens / s.prefill_s : 0;
  const double decode_tps = s.decode_s > 0 ? s.generated_tokens / s.decode_s : 0;
  std::fprintf(stderr,
               "[turn %d] prompt %d tokens: %d cached, %d prefilled (%.1f ms, %.1f tok/s); "
               "generated %d tokens (%s, %.1f tok/s)\n",
               turn, s.prompt_tokens, s.cached_tokens, s.prefill_tokens, s.prefill_s * 1e3, prefill_tps,
               s.generated_tokens, stop_name(s.finish), decode_tps);
}

int chat(ChatOptions o) {
  auto model = load_target_model(o.model, LoadMode::kMap, o.threads);
  if (!model) return fail(model.error());
  auto tmpl = resolve_chat_template(o.chat_template, **model);
  if (!tmpl) return fail(tmpl.error());
  auto kv_type = kv_type_option(o.kv_type, (*model)->kv_shape());
  if (!kv_type) return fail(kv_type.error());

  ChatSessionConfig config;
  config.sampling = o.sampling.resolved();
  config.ctx = o.ctx;
  config.n_threads = o.threads;
  config.kv_type = *kv_type;
  config.reuse_cache = !o.no_cache_reuse;
  ChatSession session(**model, std::move(*tmpl), config);
  if (!o.system.empty()) session.add_system(o.system);

  const bool interactive = isatty(STDIN_FILENO);
  if (interactive) std::fprintf(stderr, "duet chat: one message per line; Ctrl-D ends.\n");
  std::string line;
  int turn = 0;
  while (true) {
    if (interactive) {
      std::fprintf(stderr, "> ");
      std::fflush(stderr);
    }
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    ++turn;
    auto stats = session.turn(line, o.n_predict, [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    });
    if (!stats) return fail(stats.error());
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (o.verbose) print_turn_stats(turn, *stats);
    if (stats->finish == FinishReason::kContext) {
      std::fprintf(stderr, "duet: the context of %d tokens is full; the conversation ends\n", session.ctx());
      break;
    }
  }
  return 0;
}

const bool chat_registered = register_command(
    "chat", "Chat with a model in the terminal, keeping the KV cache between turns", [](CLI::App& app) {
      auto o = std::make_shared<ChatOptions>();
      app.add_option("-m,--model", o->model, "Model file (GGUF)")->required();
      app.add_option("--chat-template", o->chat_template, chat_template_option_help());
      app.add_option("--system", o->system, "System message");
      app.add_option("-n,--n-predict", o->n_predict, "Most tokens per reply (-1: until the end token)")
          ->capture_default_str();
      add_sampling_options(app, &o->sampling);
      app.add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str();
      app.add_option("-c,--ctx", o->ctx, "Context length (0: the model's)")->capture_default_str();
      add_kv_type_option(app, o->kv_type);
      app.add_flag("-v,--verbose", o->verbose, "Print each turn's token counts and speeds on stderr");
      app.add_flag("--no-cache-reuse", o->no_cache_reuse,
                   "Prefill the whole conversation every turn (to check that reuse changes nothing)");
      return [o] { return chat(*o); };
    });

}  // namespace
}  // namespace duet::cli
