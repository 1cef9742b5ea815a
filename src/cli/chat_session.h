// One conversation with a model, its KV cache kept between turns. Each turn
// renders the whole conversation through the chat template, reuses the
// cached tokens that the new rendering starts with, prefills only the rest,
// then decodes the reply. Where the rendering of an earlier reply differs
// from the tokens that were generated (a template that trims, a different
// tokenization of the same text), the cache is cut at the first difference
// and recomputed from there.
//
// The engine frees a sequence's blocks when its request finishes, so this
// drives Model::forward directly with its own cache, block table and sampler.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/sampler.h"
#include "kv/block_table.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"

namespace duet::cli {

struct ChatSessionConfig {
  SamplingParams sampling;
  int32_t ctx = 0;        // 0: the model's trained context
  int32_t n_threads = 0;  // 0: all cores
  KvType kv_type = KvType::F32;
  bool reuse_cache = true;  // false: prefill the whole conversation every turn
};

struct TurnStats {
  int32_t prompt_tokens = 0;  // the rendered conversation
  int32_t cached_tokens = 0;  // of those, reused from the cache
  int32_t prefill_tokens = 0; // computed this turn: prompt_tokens - cached_tokens
  int32_t generated_tokens = 0;
  double prefill_s = 0;       // prefill until the first token's logits
  double decode_s = 0;        // the rest
  const char* stop = "";      // "end", "length" or "context"
};

class ChatSession {
 public:
  ChatSession(Model& model, ChatTemplate chat_template, const ChatSessionConfig& config);

  void add_system(std::string text) { messages_.push_back({"system", std::move(text)}); }

  // Adds the user's message, generates the reply (at most max_tokens; < 0:
  // until the end token or the context), streams its text to on_text, and
  // adds it to the conversation.
  Result<TurnStats> turn(const std::string& user_text, int32_t max_tokens,
                         const std::function<void(std::string_view)>& on_text);

  int32_t ctx() const { return ctx_; }

 private:
  // Runs `tokens` through the model at the positions after the cached ones
  // and adds them to the cache; leaves the logits of the last in logits_.
  Status extend(std::span<const int32_t> tokens);

  Model& model_;
  const Tokenizer& tok_;
  ChatTemplate template_;
  ChatSessionConfig config_;
  int32_t ctx_;
  ThreadPool pool_;
  KvCache cache_;
  BlockTable table_;
  Sampler sampler_;
  std::vector<ChatMessage> messages_;
  std::vector<int32_t> cached_;  // tokens whose K/V the cache holds, positions 0..
  std::vector<float> logits_;    // [n_vocab] of the last token run
};

}  // namespace duet::cli
