// Nested JSON at every field of every API that takes JSON. The input is a
// small program that builds a JSON value: arrays and objects opened one at a
// time or by the thousand, scalars, closes, and raw bytes now and then; the
// first byte picks where the value goes (a completion's prompt, a chat
// message's content, a response_format schema, a tool's parameters,
// chat_template_kwargs, tool-call arguments inside a string, an embeddings
// input, /tokenize, /detokenize, a model's tool call, or parse_json alone).
// The body is parsed as the server does it and, when accepted, rendered
// through a chat template that prints tools and arguments with tojson.
// Beyond not crashing, it checks the bound itself: a well-formed value
// deeper than kMaxJsonDepth is never accepted, and one within it is never
// called too deep. Values stay under 64 KiB and a few thousand levels: the
// sanitized build parses ~1 MB/s, and past the bound every depth takes the
// same path (the unit tests parse 1 MiB and 500 k levels once).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "byte_vocab.h"
#include "core/json_parse.h"
#include "server/chat_output_parser.h"
#include "server/embeddings_api.h"
#include "server/openai_request.h"
#include "server/tokenize_api.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/chat_templates_builtin.h"
#include "tokenizer/jinja/json_value.h"

namespace {

constexpr size_t kMaxText = 64 << 10;

// The value the program builds, its deepest nesting, and whether raw bytes
// went into it (then it need not be JSON at all).
struct Built {
  std::string text;
  int depth = 0;
  bool raw = false;
};

class Builder {
 public:
  Built run(std::string_view program) {
    for (size_t i = 0; i < program.size() && out_.text.size() < kMaxText; ++i) step(static_cast<uint8_t>(program[i]));
    while (!open_.empty()) close();
    if (out_.text.empty()) out_.text = "0";
    return std::move(out_);
  }

 private:
  void step(uint8_t b) {
    const int count = 1 + (b >> 3) * (b >> 3) * 4;  // up to ~3.8 k at once
    switch (b & 7) {
      case 0: return repeat(count, [this] { open('['); });
      case 1: return repeat(count, [this] { open('{'); });
      case 2: return repeat(std::min(count, 64), [this] { close(); });
      case 3: return scalar(b >> 3);
      case 4: return repeat(count, [this, b] { open(b & 8 ? '[' : '{'); });
      case 5: return atom("\"s\\u00e9\"");
      case 6: return atom(std::to_string(static_cast<int>(b) - 128));
      default:
        out_.raw = true;
        out_.text += static_cast<char>(b >> 3);
    }
  }
  template <class F>
  void repeat(int n, F f) {
    for (int i = 0; i < n && out_.text.size() < kMaxText; ++i) f();
  }
  // Before a value: a comma after a sibling, a key inside an object.
  void value_start() {
    if (open_.empty()) {
      if (!out_.text.empty()) out_.raw = true;  // a second top-level value
      return;
    }
    if (has_items_.back()) out_.text += ',';
    has_items_.back() = true;
    if (open_.back() == '{') out_.text += "\"k\":";
  }
  void open(char c) {
    value_start();
    out_.text += c;
    open_.push_back(c);
    has_items_.push_back(false);
    out_.depth = std::max(out_.depth, static_cast<int>(open_.size()));
  }
  void close() {
    if (open_.empty()) return;
    out_.text += open_.back() == '[' ? ']' : '}';
    open_.pop_back();
    has_items_.pop_back();
  }
  void atom(const std::string& text) {
    value_start();
    out_.text += text;
  }
  void scalar(int kind) {
    static const char* const kScalars[] = {"null", "true", "1.5e3", "\"x\"", "{}", "[]", "-0", "\"\\\"\""};
    atom(kScalars[kind % 8]);
  }

  Built out_;
  std::string open_;
  std::vector<bool> has_items_;
};

// parse_json's promise, for a value built without raw bytes.
void check_bound(const Built& b) {
  const auto r = duet::parse_json(b.text);
  if (b.raw) return;
  const bool too_deep = !r.ok() && r.error().code == "json_too_deep";
  if (b.depth > duet::kMaxJsonDepth && r.ok()) __builtin_trap();
  if (b.depth <= duet::kMaxJsonDepth && !r.ok()) __builtin_trap();
  if (b.depth > duet::kMaxJsonDepth && !too_deep) __builtin_trap();
}

std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

std::string body_for(unsigned place, const std::string& v) {
  const std::string user = R"({"role": "user", "content": "hi"})";
  const std::string chat = R"({"max_tokens": 2, "messages": [)" + user + "]";
  switch (place) {
    case 0: return R"({"prompt": )" + v + "}";
    case 1: return R"({"messages": [{"role": "user", "content": )" + v + "}]}";
    case 2: return chat + R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": )" + v + "}}}";
    case 3: return chat + R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": )" + v + "}}]}";
    case 4: return chat + R"(, "chat_template_kwargs": {"x": )" + v + "}}";
    default:
      return R"({"messages": [)" + user + R"(, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
              "function": {"name": "f", "arguments": )" + quoted(v) + R"(}}]}, {"role": "tool", "tool_call_id": "c",
              "content": "ok"}]})";
  }
}

// A chat request as the server would render it, through a template that
// prints tools and tool-call arguments with tojson.
void render(const duet::server::GenerateRequest& r) {
  static const duet::ChatTemplate qwen3 = [] {
    auto t = duet::ChatTemplate::parse(*duet::builtin_chat_template("qwen3"), "<s>", "</s>");
    if (!t) __builtin_trap();
    return std::move(t).value();
  }();
  duet::ChatInput input;
  input.messages = duet::jinja::value_from_json(r.template_messages);
  if (r.tools.offered()) input.tools = duet::jinja::value_from_json(r.tools.tools);
  const duet::jinja::Value kwargs = duet::jinja::value_from_json(r.template_kwargs);
  if (kwargs.is_dict()) input.variables = kwargs.dict();
  input.add_generation_prompt = true;
  (void)qwen3.render(input);
}

void generate(unsigned place, const std::string& v) {
  duet::server::GenerateRequest r;
  const bool chat = place != 0;
  if (auto e = duet::server::parse_generate_body(body_for(place, v), chat, r)) {
    (void)e->to_json();
    return;
  }
  if (chat) render(r);
}

void model_output(const std::string& v) {
  duet::server::ChatFormat f;
  f.tools = duet::server::ToolCallStyle::kHermes;
  duet::server::ChatOutputParser p(f, /*tools_offered=*/true, [] { return std::string("id"); }, false);
  (void)p.finish("<tool_call>\n{\"name\": \"f\", \"arguments\": " + v + "}\n</tool_call>");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<duet::Tokenizer> tok = duet::fuzz::byte_level_vocab();
  if (size == 0) return 0;
  const Built b = Builder().run(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  const unsigned place = data[0] % 11;
  std::string out;
  std::optional<duet::server::ApiError> e;
  switch (place) {
    case 6: {
      duet::server::EmbeddingsRequest r;
      e = duet::server::parse_embeddings_body(R"({"input": )" + b.text + "}", *tok, /*dim=*/64, {}, r);
      break;
    }
    case 7:
      e = duet::server::tokenize_body(R"({"content": )" + b.text + "}", *tok, 4096, out);
      break;
    case 8:
      e = duet::server::detokenize_body(R"({"tokens": )" + b.text + "}", *tok, out);
      break;
    case 9:
      model_output(b.text);
      break;
    case 10:
      check_bound(b);
      break;
    default: generate(place, b.text);
  }
  if (e) (void)e->to_json();
  return 0;
}
