#include "cli/chat_session.h"

#include <algorithm>
#include <chrono>

namespace duet::cli {
namespace {

// Prompt tokens per forward pass while prefilling: bounds the activations.
constexpr size_t kPrefillChunk = 512;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

ChatSession::ChatSession(Model& model, ChatTemplate chat_template, const ChatSessionConfig& config)
    : model_(model),
      tok_(model.tokenizer()),
      template_(std::move(chat_template)),
      config_(config),
      ctx_(config.ctx > 0 ? config.ctx : model.config().ctx_len),
      pool_(config.n_threads),
      cache_(model.kv_shape(), blocks_for_tokens(ctx_), config.kv_type),
      sampler_(config.sampling),
      logits_(static_cast<size_t>(model.config().n_vocab)) {}

Status ChatSession::extend(std::span<const int32_t> tokens) {
  const size_t total = cached_.size() + tokens.size();
  if (!table_.reserve(cache_.pool(), static_cast<int32_t>(total)))
    return err("the KV cache has no room for ", total, " tokens");
  Batch batch;
  for (size_t start = 0; start < tokens.size(); start += kPrefillChunk) {
    const size_t end = std::min(tokens.size(), start + kPrefillChunk);
    batch.clear();
    const int32_t seq = batch.add_sequence(&table_);
    for (size_t i = start; i < end; ++i)
      batch.add(tokens[i], static_cast<int32_t>(cached_.size() + i - start), seq, /*logits=*/i + 1 == tokens.size());
    DUET_TRY(model_.forward(batch, cache_, pool_, logits_.data()));
    cached_.insert(cached_.end(), tokens.begin() + static_cast<std::ptrdiff_t>(start),
                   tokens.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return {};
}

Result<TurnStats> ChatSession::turn(const std::string& user_text, int32_t max_tokens,
                                    const std::function<void(std::string_view)>& on_text) {
  const auto t0 = std::chrono::steady_clock::now();
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
  if (static_cast<int64_t>(prompt.size()) >= ctx_) {
    messages_.pop_back();
    return err("the conversation has ", prompt.size(), " tokens, which fills the context of ", ctx_);
  }

  // Keep the cached prefix the new prompt starts with; at least its last
  // token is run again so that there are logits to sample from.
  size_t keep = 0;
  if (config_.reuse_cache) {
    while (keep < cached_.size() && keep < prompt.size() && cached_[keep] == prompt[keep]) ++keep;
    keep = std::min(keep, prompt.size() - 1);
  }
  cached_.resize(keep);
  table_.truncate(cache_.pool(), static_cast<int32_t>(keep));

  TurnStats stats;
  stats.prompt_tokens = static_cast<int32_t>(prompt.size());
  stats.cached_tokens = static_cast<int32_t>(keep);
  stats.prefill_tokens = stats.prompt_tokens - stats.cached_tokens;
  if (Status st = extend(std::span<const int32_t>(prompt).subspan(keep)); !st) {
    messages_.pop_back();
    return st.error();
  }
  stats.prefill_s = seconds_since(t0);

  const auto t1 = std::chrono::steady_clock::now();
  StreamDetokenizer detok(tok_, /*first_is_start=*/true);
  std::vector<int32_t> reply;
  stats.stop = "length";
  while (max_tokens < 0 || static_cast<int32_t>(reply.size()) < max_tokens) {
    const int32_t token = sampler_.sample(logits_.data(), model_.config().n_vocab, cached_);
    if (tok_.is_end_of_generation(token)) {
      stats.stop = "end";
      break;
    }
    reply.push_back(token);
    on_text(detok.push(token));
    if (static_cast<int32_t>(cached_.size()) + 1 >= ctx_) {
      stats.stop = "context";
      break;
    }
    if (max_tokens >= 0 && static_cast<int32_t>(reply.size()) >= max_tokens) break;
    DUET_TRY(extend(std::span<const int32_t>(&token, 1)));
  }
  on_text(detok.flush());
  stats.generated_tokens = static_cast<int32_t>(reply.size());
  stats.decode_s = seconds_since(t1);
  messages_.push_back({"assistant", tok_.decode(reply)});
  return stats;
}

}  // namespace duet::cli
