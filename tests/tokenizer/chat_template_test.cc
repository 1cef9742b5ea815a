// The real chat templates of Llama 2, Llama 3, Mistral, Qwen2 (ChatML), Qwen3,
// Gemma, Gemma 3 and Phi-3 give byte-identical prompts to the published
// formats, with and without a system message and a generation prompt, and
// Qwen3's with tools, tool calls and thinking; the built-ins match the
// templates shipped in real model files. (tests/reference/test_chat_template.py
// renders the same templates with Python's Jinja2 on many more conversations.)
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/chat_templates_builtin.h"
#include "tokenizer/jinja/json_value.h"

namespace duet {
namespace {

// The assistant's reply carries a space on each side: templates that trim
// (Llama 2, Llama 3, Gemma) drop it, the others keep it.
const std::vector<ChatMessage> kChat = {
    {"user", "Hello"},
    {"assistant", " Hi there "},
    {"user", "Who are you?"},
};

std::vector<ChatMessage> with_system() {
  std::vector<ChatMessage> m = {{"system", "You are terse."}};
  m.insert(m.end(), kChat.begin(), kChat.end());
  return m;
}

ChatTemplate builtin(const char* name, const char* bos, const char* eos) {
  const auto source = builtin_chat_template(name);
  EXPECT_TRUE(source.has_value()) << name;
  auto t = ChatTemplate::parse(*source, bos, eos);
  EXPECT_TRUE(t.ok()) << name << ": " << (t.ok() ? "" : t.error().message);
  return std::move(*t);
}

std::string apply(const ChatTemplate& t, const std::vector<ChatMessage>& m, bool gen) {
  auto r = t.apply(m, gen);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : "<error>";
}

std::string apply_error(const ChatTemplate& t, const std::vector<ChatMessage>& m) {
  return testing::failure_message(t.apply(m, true));
}

TEST(ChatTemplate, Llama2) {
  const ChatTemplate t = builtin("llama2", "<s>", "</s>");
  const std::string plain = "<s>[INST] Hello [/INST] Hi there </s><s>[INST] Who are you? [/INST]";
  EXPECT_EQ(apply(t, kChat, true), plain);
  EXPECT_EQ(apply(t, kChat, false), plain);  // the template has no generation prompt of its own
  EXPECT_EQ(apply(t, with_system(), true),
            "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHello [/INST] Hi there </s><s>[INST] Who are you? [/INST]");
  EXPECT_EQ(apply_error(t, {{"user", "a"}, {"user", "b"}}),
            "chat template: template error: Conversation roles must alternate user/assistant/user/assistant/...");
}

TEST(ChatTemplate, Llama3) {
  const ChatTemplate t = builtin("llama3", "<|begin_of_text|>", "<|eot_id|>");
  const std::string turns =
      "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>";
  const std::string gen = "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(apply(t, kChat, true), "<|begin_of_text|>" + turns + gen);
  EXPECT_EQ(apply(t, kChat, false), "<|begin_of_text|>" + turns);
  const std::string sys = "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>";
  EXPECT_EQ(apply(t, with_system(), true), "<|begin_of_text|>" + sys + turns + gen);
  EXPECT_EQ(apply(t, with_system(), false), "<|begin_of_text|>" + sys + turns);
}

TEST(ChatTemplate, Mistral) {
  const ChatTemplate t = builtin("mistral", "<s>", "</s>");
  const std::string plain = "<s>[INST] Hello [/INST] Hi there </s>[INST] Who are you? [/INST]";
  EXPECT_EQ(apply(t, kChat, true), plain);
  EXPECT_EQ(apply(t, kChat, false), plain);
  // Mistral Instruct v0.2 has no system role: its template refuses one.
  EXPECT_EQ(apply_error(t, with_system()),
            "chat template: template error: Conversation roles must alternate user/assistant/user/assistant/...");
  EXPECT_EQ(apply_error(t, {{"user", "a"}, {"tool", "b"}}),
            "chat template: template error: Only user and assistant roles are supported!");
}

TEST(ChatTemplate, ChatmlQwen2) {
  const ChatTemplate t = builtin("chatml", "", "<|im_end|>");
  const std::string turns =
      "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n Hi there <|im_end|>\n"
      "<|im_start|>user\nWho are you?<|im_end|>\n";
  const std::string default_sys = "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n";
  const std::string sys = "<|im_start|>system\nYou are terse.<|im_end|>\n";
  const std::string gen = "<|im_start|>assistant\n";
  EXPECT_EQ(apply(t, kChat, true), default_sys + turns + gen);
  EXPECT_EQ(apply(t, kChat, false), default_sys + turns);
  EXPECT_EQ(apply(t, with_system(), true), sys + turns + gen);
  EXPECT_EQ(apply(t, with_system(), false), sys + turns);
}

TEST(ChatTemplate, Gemma) {
  const ChatTemplate t = builtin("gemma", "<bos>", "<eos>");
  const std::string turns =
      "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n"
      "<start_of_turn>user\nWho are you?<end_of_turn>\n";
  EXPECT_EQ(apply(t, kChat, true), turns + "<start_of_turn>model\n");
  EXPECT_EQ(apply(t, kChat, false), turns);
  EXPECT_EQ(apply_error(t, with_system()), "chat template: template error: System role not supported");
}

TEST(ChatTemplate, Phi3) {
  const ChatTemplate t = builtin("phi3", "<s>", "<|endoftext|>");
  const std::string plain =
      "<s><|user|>\nHello<|end|>\n<|assistant|>\n Hi there <|end|>\n<|user|>\nWho are you?<|end|>\n<|assistant|>\n";
  EXPECT_EQ(apply(t, kChat, true), plain);
  EXPECT_EQ(apply(t, kChat, false), plain);
  EXPECT_EQ(apply(t, with_system(), true), plain);  // this Phi-3 template drops system messages
}

// Phi-3.5 keeps a non-empty system message as its own turn; without a
// generation prompt the text ends with EOS.
TEST(ChatTemplate, Phi35) {
  const ChatTemplate t = builtin("phi3.5", "<s>", "<|endoftext|>");
  const std::string turns =
      "<|user|>\nHello<|end|>\n<|assistant|>\n Hi there <|end|>\n<|user|>\nWho are you?<|end|>\n";
  EXPECT_EQ(apply(t, with_system(), true), "<|system|>\nYou are terse.<|end|>\n" + turns + "<|assistant|>\n");
  EXPECT_EQ(apply(t, kChat, false), turns + "<|endoftext|>");
  EXPECT_EQ(apply(t, {{"system", ""}, {"user", "Hello"}}, true), "<|user|>\nHello<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplate, UnknownBuiltinAndBadTemplate) {
  EXPECT_FALSE(builtin_chat_template("vicuna").has_value());
  EXPECT_EQ(builtin_chat_template_names().size(), 9u);
  auto bad = ChatTemplate::parse("{% for m in messages %}{% filter upper %}x{% endfilter %}{% endfor %}", "", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "chat template: unsupported template tag '{% filter %}' at line 1:24");
}

std::string gguf_template(const std::string& file) {
  auto f = GgufFile::open(testing::shared_path("tokenizers/llama.cpp-vocab/" + file));
  EXPECT_TRUE(f.ok());
  auto s = f->get_string("tokenizer.chat_template");
  EXPECT_TRUE(s.ok());
  return s.ok() ? *s : "";
}

std::string config_template(const std::string& dir) {
  std::ifstream in(testing::shared_path("tokenizers/" + dir + "/tokenizer_config.json"));
  return nlohmann::json::parse(in).at("chat_template").get<std::string>();
}

// The ChatML and Phi-3 built-ins are the very templates of the Qwen2 and
// Phi-3 files llama.cpp ships.
TEST(ChatTemplate, BuiltinsMatchRealModelFiles) {
  EXPECT_EQ(gguf_template("ggml-vocab-qwen2.gguf"), *builtin_chat_template("chatml"));
  EXPECT_EQ(gguf_template("ggml-vocab-phi-3.gguf"), *builtin_chat_template("phi3"));
  EXPECT_EQ(config_template("qwen3"), *builtin_chat_template("qwen3"));
}

// Meta's Llama 3 base-model tokenizer_config always ends with the assistant
// header; otherwise it renders as the instruct template does.
TEST(ChatTemplate, Llama3ConfigTemplate) {
  auto t = ChatTemplate::parse(config_template("llama3"), "<|begin_of_text|>", "<|end_of_text|>");
  ASSERT_TRUE(t.ok()) << t.error().message;
  const ChatTemplate instruct = builtin("llama3", "<|begin_of_text|>", "<|end_of_text|>");
  EXPECT_EQ(apply(*t, with_system(), false), apply(instruct, with_system(), true));
}

// Qwen3's template: namespace(), a reversed loop, split/lstrip/rstrip, `is
// defined`, tool-call branches, thinking blocks.
TEST(ChatTemplate, Qwen3ConfigTemplate) {
  auto t = ChatTemplate::parse(config_template("qwen3"), "", "<|im_end|>");
  ASSERT_TRUE(t.ok()) << t.error().message;
  const std::vector<ChatMessage> chat = {
      {"system", "You are terse."},
      {"user", "Hello"},
      {"assistant", "<think>\nthinking\n</think>\n\nHi there"},
      {"user", "Who are you?"},
  };
  EXPECT_EQ(apply(*t, chat, true),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you?<|im_end|>\n"
            "<|im_start|>assistant\n");
  // The thinking of the last assistant turn (after the last user query) is kept.
  const std::vector<ChatMessage> last = {{"user", "Hello"}, {"assistant", "<think>\nhmm\n</think>\n\nHi"}};
  EXPECT_EQ(apply(*t, last, false),
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nHi<|im_end|>\n");
}

// Gemma 3 folds a system message into the first user turn, followed by a
// blank line; without one it renders as Gemma's template does.
TEST(ChatTemplate, Gemma3FoldsTheSystemPrompt) {
  const ChatTemplate t = builtin("gemma3", "<bos>", "<eos>");
  const std::string rest =
      "Hello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n"
      "<start_of_turn>user\nWho are you?<end_of_turn>\n";
  EXPECT_EQ(apply(t, with_system(), true),
            "<bos><start_of_turn>user\nYou are terse.\n\n" + rest + "<start_of_turn>model\n");
  EXPECT_EQ(apply(t, kChat, false), "<bos><start_of_turn>user\n" + rest);
  EXPECT_EQ(apply(t, kChat, true), apply(builtin("gemma", "<bos>", "<eos>"), kChat, true));
  EXPECT_EQ(apply_error(t, {{"user", "a"}, {"user", "b"}}),
            "chat template: template error: Conversation roles must alternate user/assistant/user/assistant/...");
}

ChatInput chat_input(const char* json_text) {
  const auto j = nlohmann::ordered_json::parse(json_text);
  ChatInput in;
  in.messages = jinja::value_from_json(j.at("messages"));
  if (j.contains("tools")) in.tools = jinja::value_from_json(j.at("tools"));
  if (j.contains("enable_thinking")) in.variables.set("enable_thinking", jinja::value_from_json(j.at("enable_thinking")));
  in.add_generation_prompt = true;
  return in;
}

std::string render(const ChatTemplate& t, const ChatInput& in) {
  auto r = t.render(in);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : "<error>";
}

// Qwen3: enable_thinking=false opens the reply with an empty <think> block;
// unset or true leaves the reply open.
TEST(ChatTemplate, Qwen3EnableThinking) {
  const ChatTemplate t = builtin("qwen3", "", "<|im_end|>");
  const std::string prompt = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(render(t, chat_input(R"({"messages": [{"role": "user", "content": "Hi"}]})")), prompt);
  EXPECT_EQ(render(t, chat_input(R"({"messages": [{"role": "user", "content": "Hi"}], "enable_thinking": true})")),
            prompt);
  EXPECT_EQ(render(t, chat_input(R"({"messages": [{"role": "user", "content": "Hi"}], "enable_thinking": false})")),
            prompt + "<think>\n\n</think>\n\n");
}

// Qwen3 with tools: their schemas in the system turn, the assistant's calls
// as <tool_call> JSON (dict arguments printed as JSON, string arguments as
// given), consecutive tool results in one user turn; the thinking of the
// turn after the last real user query is kept, reasoning_content included.
TEST(ChatTemplate, Qwen3Tools) {
  const ChatTemplate t = builtin("qwen3", "", "<|im_end|>");
  const ChatInput in = chat_input(R"({
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"b": 1, "a": [true, null]}}}],
    "messages": [
      {"role": "system", "content": "Be terse."},
      {"role": "user", "content": "Go"},
      {"role": "assistant", "content": "", "reasoning_content": "Call f.",
       "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": "é"}}},
                      {"name": "f", "arguments": "{\"x\": 2}"}]},
      {"role": "tool", "content": "1"},
      {"role": "tool", "content": "2"}]})");
  EXPECT_EQ(render(t, in),
            "<|im_start|>system\nBe terse.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
            "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"b\": 1, \"a\": [true, null]}}}\n"
            "</tools>\n\nFor each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
            "<args-json-object>}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\nGo<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nCall f.\n</think>\n\n"
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": \"é\"}}\n</tool_call>\n"
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 2}}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n1\n</tool_response>\n<tool_response>\n2\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
}

}  // namespace
}  // namespace duet
