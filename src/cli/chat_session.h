// One conversation with a model. Each turn renders the whole conversation
// through the chat template and submits it to the engine as a new request;
// the engine's prefix cache finds the blocks the earlier turns left, so a
// turn prefills little more than what is new. Where the rendering of an
// earlier reply differs from the tokens generated (a template that trims,
// another tokenization of the same text), the cache matches up to the
// first difference and the rest is computed again.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "engine/engine.h"
#include "tokenizer/chat_template.h"

namespace duet::cli {

struct ChatSessionConfig {
  SamplingParams sampling;
  int32_t ctx = 0;        // 0: the model's trained context
  int32_t n_threads = 0;  // 0: all cores
  KvType kv_type = KvType::F16;
  bool reuse_cache = true;  // false: prefill the whole conversation every turn
};

struct TurnStats {
  int32_t prompt_tokens = 0;  // the rendered conversation
  int32_t cached_tokens = 0;  // of those, reused from the cache
  int32_t prefill_tokens = 0; // computed this turn: prompt_tokens - cached_tokens
  int32_t generated_tokens = 0;
  double prefill_s = 0;       // until the first token
  double decode_s = 0;        // the rest
  FinishReason finish = FinishReason::kNone;
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

  int32_t ctx() const { return engine_.ctx(); }

 private:
  std::vector<int32_t> render() const;

  const Tokenizer& tok_;
  ChatTemplate template_;
  SamplingParams sampling_;
  Engine engine_;
  std::vector<ChatMessage> messages_;
};

}  // namespace duet::cli
