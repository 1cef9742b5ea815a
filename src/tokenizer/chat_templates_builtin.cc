#include "tokenizer/chat_templates_builtin.h"

#include <utility>

namespace duet {
namespace {

// meta-llama/Llama-2-7b-chat-hf: [INST] turns, the system prompt folded into
// the first user turn inside <<SYS>>, BOS before every user turn.
constexpr std::string_view kLlama2 =
    R"tmpl({% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %})tmpl";

// meta-llama/Meta-Llama-3-8B-Instruct: header tokens around each role, the
// content trimmed, <|eot_id|> after each turn. Its string literals hold
// real newlines.
constexpr std::string_view kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}";

// mistralai/Mistral-7B-Instruct-v0.2: strictly alternating user/assistant
// turns, no system role.
constexpr std::string_view kMistral =
    R"tmpl({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})tmpl";

// Qwen/Qwen2-7B-Instruct (ChatML): a default system prompt when none is given.
// Its string literals hold real newlines.
constexpr std::string_view kChatml =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful assistant<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>"
    "assistant\n' }}{% endif %}";

// google/gemma-7b-it: "model" for the assistant role, no system role.
constexpr std::string_view kGemma =
    R"tmpl({{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %})tmpl";

// microsoft/Phi-3-mini-4k-instruct: every user turn already opens the
// assistant's; system messages are dropped.
constexpr std::string_view kPhi3 =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '\n' + "
    "message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% elif (message['role'] == 'assistant') "
    "%}{{message['content'] + '<|end|>' + '\n'}}{% endif %}{% endfor %}";

constexpr std::pair<std::string_view, std::string_view> kTemplates[] = {
    {"llama2", kLlama2}, {"llama3", kLlama3}, {"mistral", kMistral},
    {"chatml", kChatml}, {"gemma", kGemma},   {"phi3", kPhi3},
};

}  // namespace

std::optional<std::string_view> builtin_chat_template(std::string_view name) {
  for (const auto& [n, source] : kTemplates)
    if (n == name) return source;
  return std::nullopt;
}

std::vector<std::string_view> builtin_chat_template_names() {
  std::vector<std::string_view> names;
  for (const auto& [n, _] : kTemplates) names.push_back(n);
  return names;
}

}  // namespace duet
