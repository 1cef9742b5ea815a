#include "cli/chat_session.h"

namespace duet::cli {
namespace {

EngineConfig engine_config(const ChatSessionConfig& c) {
  EngineConfig e;
  e.n_threads = c.n_threads;
  e.ctx = c.ctx;
  e.kv_type = c.kv_type;
  e.scheduler.max_seqs = 1;
  e.scheduler.prefix_caching = c.reuse_cache;
  return e;
}

}  // namespace

ChatSession::ChatSession(Model& model, ChatTemplate chat_template, const ChatSessionConfig& config)
    : tok_(model.tokenizer()),
      template_(std::move(chat_template)),
      sampling_(config.sampling),
      engine_(model, engine_config(config)) {}

Result<TurnStats> ChatSession::turn(const std::string& user_text, int32_t max_tokens,
                                    const std::function<void(std::string_view)>& on_text) {
  messages_.push_back({"user", user_text});
  auto prompt_text = template_.apply(messages_, /*add_generation_prompt=*/true);
  if (!prompt_text) {
    messages_.pop_back();
    return prompt_text.error();
  }
  // The template writes BOS itself where the model wants it (as text such as
  // "<s>"), so special-token text is parsed and no BOS is added, except for
  // a vocabulary that always starts with BOS and a template that left it out.
  std::vector<int32_t> prompt = tok_.encode(*prompt_text, /*add_bos=*/false, /*parse_special=*/true);
  if (tok_.add_bos_default() && tok_.bos_id() >= 0 && (prompt.empty() || prompt[0] != tok_.bos_id()))
    prompt.insert(prompt.begin(), tok_.bos_id());
  if (prompt.empty()) prompt.push_back(tok_.bos_id() >= 0 ? tok_.bos_id() : 0);

  RequestParams params;
  params.sampling = sampling_;
  params.max_tokens = max_tokens < 0 ? engine_.ctx() : max_tokens;
  params.continues_prompt = false;
  // Each turn draws on: one seed per conversation would repeat the first
  // turn's random stream in every turn.
  sampling_.seed += 1;

  TurnStats stats;
  std::vector<int32_t> reply;
  std::string error;
  auto id = engine_.submit(prompt, params, [&](const TokenEvent& ev) {
    if (ev.token >= 0 && !tok_.is_end_of_generation(ev.token)) reply.push_back(ev.token);
    on_text(ev.text);
    if (!ev.finished) return;
    const RequestTimings& t = *ev.timings;
    stats.prompt_tokens = t.n_prompt;
    stats.cached_tokens = t.n_cached;
    stats.prefill_tokens = t.n_prompt - t.n_cached;
    stats.generated_tokens = t.n_generated;
    stats.prefill_s = std::max(0.0, t.first_token);
    stats.decode_s = t.token_times.empty() ? 0 : t.token_times.back() - t.token_times.front();
    stats.finish = ev.reason;
    error = ev.error;
  });
  if (!id) {
    messages_.pop_back();
    return id.error();
  }
  DUET_TRY(engine_.run_until_idle());
  if (stats.finish == FinishReason::kError) return err(error);
  messages_.push_back({"assistant", tok_.decode(reply)});
  return stats;
}

}  // namespace duet::cli
