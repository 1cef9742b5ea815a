#include "server/openai_request.h"

#include <cmath>
#include <limits>
#include <random>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "server/chat_messages.h"
#include "server/json_fields.h"

namespace duet::server {

#define DUET_API_TRY(expr)              \
  do {                                  \
    if (auto e_ = (expr)) return e_;    \
  } while (0)

namespace {

using nlohmann::json;

std::optional<ApiError> read_number(Fields& f, const std::string& key, double lo, double hi,
                                    float& out) {
  const json* v = f.get(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) return wrong_type(key, "a number");
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi))
    return invalid("'" + key + "' must be between " + json(lo).dump() + " and " + json(hi).dump(), key);
  out = static_cast<float>(d);
  return std::nullopt;
}

std::optional<ApiError> read_int(Fields& f, const std::string& key, int64_t lo, int64_t hi,
                                 std::optional<int64_t>& out) {
  const json* v = f.get(key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) return wrong_type(key, "an integer");
  // An unsigned value above hi is out of range before it is read as int64
  // (where one above INT64_MAX would wrap to a negative number).
  const bool above = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi);
  const int64_t i = above ? hi : v->get<int64_t>();
  if (above || i < lo || i > hi)
    return invalid("'" + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi), key);
  out = i;
  return std::nullopt;
}

std::optional<ApiError> read_stop(Fields& f, std::vector<std::string>& out) {
  const json* v = f.get("stop");
  if (!v) return std::nullopt;
  if (v->is_string()) {
    out = {v->get<std::string>()};
    return std::nullopt;
  }
  if (!v->is_array()) return wrong_type("stop", "a string or an array of strings");
  if (v->size() > 4) return invalid("'stop' may hold at most 4 strings", "stop");
  for (const json& s : *v) {
    if (!s.is_string()) return wrong_type("stop", "a string or an array of strings");
    out.push_back(s.get<std::string>());
  }
  return std::nullopt;
}

// {"token id": bias}: ids as decimal strings (checked against the
// vocabulary once the model is known), biases in [-100, 100].
std::optional<ApiError> read_logit_bias(Fields& f, std::vector<TokenBias>& out) {
  const json* lb = f.get("logit_bias");
  if (!lb) return std::nullopt;
  if (!lb->is_object()) return wrong_type("logit_bias", "an object mapping token ids to biases");
  for (auto it = lb->begin(); it != lb->end(); ++it) {
    const std::string& key = it.key();
    // A token id as JSON writes an integer: digits, no leading zero ("05"
    // names no token the client could have meant for sure).
    const bool digits = !key.empty() && key.size() <= 9 &&
                        key.find_first_not_of("0123456789") == std::string::npos &&
                        (key.size() == 1 || key[0] != '0');
    if (!digits) return invalid("'logit_bias' key '" + key + "' is not a token id", "logit_bias");
    if (!it->is_number())
      return invalid("'logit_bias' value for token " + key + " must be a number", "logit_bias");
    const double bias = it->get<double>();
    if (!(bias >= -100 && bias <= 100))
      return invalid("'logit_bias' value for token " + key + " must be between -100 and 100", "logit_bias");
    out.push_back({std::stoi(key), static_cast<float>(bias)});
  }
  return std::nullopt;
}

std::optional<ApiError> read_prompt(Fields& f, GenerateRequest& out) {
  const json* v = f.get("prompt");
  if (!v) return invalid("'prompt' is required", "prompt");
  if (v->is_string()) {
    out.prompt = v->get<std::string>();
    return std::nullopt;
  }
  if (!v->is_array()) return wrong_type("prompt", "a string, an array of token ids or of one string");
  if (v->size() == 1 && (*v)[0].is_string()) {
    out.prompt = (*v)[0].get<std::string>();
    return std::nullopt;
  }
  if (!v->empty() && ((*v)[0].is_string() || (*v)[0].is_array()))
    return invalid("several prompts in one request are not supported", "prompt");
  for (const json& t : *v) {
    if (!t.is_number_integer()) return wrong_type("prompt", "a string, an array of token ids or of one string");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) return invalid("token id out of range in 'prompt'", "prompt");
    out.prompt_ids.push_back(static_cast<int32_t>(id));
  }
  out.prompt_is_ids = true;
  return std::nullopt;
}

// The schema at body.response_format[.json_schema].schema, in the client's
// key order.
std::string schema_text(const nlohmann::ordered_json& body, bool nested) {
  const auto& rf = body["response_format"];
  return (nested ? rf["json_schema"]["schema"] : rf["schema"]).dump();
}

std::optional<ApiError> compile_schema(const std::string& text, const std::string& param,
                                       std::shared_ptr<const Grammar>& out) {
  auto g = json_schema_to_grammar(text);
  if (!g.ok()) return invalid("'" + param + "' cannot be used: " + g.error().message, param);
  out = *g;
  return std::nullopt;
}

std::shared_ptr<const Grammar> any_object_grammar() {
  static const std::shared_ptr<const Grammar> g = [] {
    auto r = Grammar::from_gbnf(json_object_gbnf());
    return r.ok() ? *r : nullptr;
  }();
  return g;
}

std::optional<ApiError> read_response_format(Fields& f, const nlohmann::ordered_json& ordered,
                                             std::shared_ptr<const Grammar>& out) {
  const json* rf = f.get("response_format");
  if (!rf) return std::nullopt;
  if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
    return invalid("'response_format' must be an object with a string 'type'", "response_format");
  const std::string type = (*rf)["type"].get<std::string>();
  Fields rff(*rf);
  rff.get("type");
  if (type == "text") {
  } else if (type == "json_object") {
    if (rff.get("schema")) {
      DUET_API_TRY(compile_schema(schema_text(ordered, false), "response_format.schema", out));
    } else {
      out = any_object_grammar();
    }
  } else if (type == "json_schema") {
    const json* js = rff.get("json_schema");
    if (!js || !js->is_object())
      return invalid("'response_format.json_schema' must be an object with a 'schema'", "response_format.json_schema");
    Fields jf(*js);
    const json* name = jf.get("name");
    if (name && !name->is_string()) return wrong_type("response_format.json_schema.name", "a string");
    jf.get("description");
    const json* strict = jf.get("strict");
    if (strict && !strict->is_boolean()) return wrong_type("response_format.json_schema.strict", "a boolean");
    const json* schema = jf.get("schema");
    if (!schema)
      return invalid("'response_format.json_schema.schema' is required", "response_format.json_schema.schema");
    if (auto u = jf.unknown())
      return invalid("unknown field '" + *u + "' in response_format.json_schema", "response_format.json_schema." + *u);
    DUET_API_TRY(compile_schema(schema_text(ordered, true), "response_format.json_schema.schema", out));
  } else {
    return invalid("'response_format.type' must be 'text', 'json_object' or 'json_schema', not '" + type + "'",
                   "response_format.type");
  }
  if (auto u = rff.unknown()) return invalid("unknown field '" + *u + "' in response_format", "response_format." + *u);
  return std::nullopt;
}

// vLLM's and llama.cpp's chat_template_kwargs: variables for the template
// (Qwen3's enable_thinking).
std::optional<ApiError> read_template_kwargs(Fields& f, const nlohmann::ordered_json& ordered,
                                             nlohmann::ordered_json& out) {
  if (!f.get("chat_template_kwargs")) return std::nullopt;
  const auto& kw = ordered["chat_template_kwargs"];
  if (!kw.is_object()) return wrong_type("chat_template_kwargs", "an object");
  out = kw;
  return std::nullopt;
}

std::optional<ApiError> read_grammar(Fields& f, const nlohmann::ordered_json& ordered,
                                     std::shared_ptr<const Grammar>& out) {
  std::shared_ptr<const Grammar> from_format;
  DUET_API_TRY(read_response_format(f, ordered, from_format));
  if (const json* g = f.get("grammar")) {
    if (!g->is_string()) return wrong_type("grammar", "a string (GBNF)");
    if (from_format) return invalid("give either 'grammar' or a JSON 'response_format', not both", "grammar");
    auto compiled = Grammar::from_gbnf(g->get<std::string>());
    if (!compiled.ok()) return invalid("'grammar' cannot be used: " + compiled.error().message, "grammar");
    out = *compiled;
    return std::nullopt;
  }
  out = from_format;
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_generate_request(const json& body, const nlohmann::ordered_json& ordered, bool chat,
                                               GenerateRequest& out) {
  if (!body.is_object() || !ordered.is_object()) return invalid("the request body must be a JSON object");
  Fields f(body);
  out.chat = chat;
  if (const json* m = f.get("model")) {
    if (!m->is_string()) return wrong_type("model", "a string");
    out.model = m->get<std::string>();
  }
  // Chat's structured fields and schemas keep the client's key order
  // (templates print tool schemas as they came).
  if (chat) {
    f.get("messages");
    DUET_API_TRY(read_chat_messages(ordered, out.messages, out.template_messages));
  } else {
    DUET_API_TRY(read_prompt(f, out));
  }

  // OpenAI's defaults: plain softmax sampling at temperature 1.
  SamplingParams& s = out.params.sampling;
  s.temperature = 1.0f;
  s.top_p = 1.0f;
  s.top_k = 0;
  s.min_p = 0.0f;
  s.repeat_penalty = 1.0f;
  DUET_API_TRY(read_number(f, "temperature", 0, 2, s.temperature));
  DUET_API_TRY(read_number(f, "top_p", 0, 1, s.top_p));
  DUET_API_TRY(read_number(f, "frequency_penalty", -2, 2, s.frequency_penalty));
  DUET_API_TRY(read_number(f, "presence_penalty", -2, 2, s.presence_penalty));
  DUET_API_TRY(read_number(f, "min_p", 0, 1, s.min_p));
  DUET_API_TRY(read_number(f, "repetition_penalty", 0.01, 10, s.repeat_penalty));
  std::optional<int64_t> i;
  DUET_API_TRY(read_int(f, "top_k", -1, std::numeric_limits<int32_t>::max(), i));
  if (i) s.top_k = static_cast<int32_t>(*i);
  i.reset();
  DUET_API_TRY(read_int(f, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), i));
  s.seed = i ? static_cast<uint64_t>(*i) : std::random_device{}();

  i.reset();
  DUET_API_TRY(read_int(f, "max_tokens", 1, std::numeric_limits<int32_t>::max(), i));
  if (chat && !i) DUET_API_TRY(read_int(f, "max_completion_tokens", 1, std::numeric_limits<int32_t>::max(), i));
  if (chat && !i) f.get("max_completion_tokens");
  if (i) out.max_tokens = static_cast<int32_t>(*i);

  i.reset();
  DUET_API_TRY(read_int(f, "n", 1, std::numeric_limits<int32_t>::max(), i));
  if (i) out.params.n = static_cast<int32_t>(*i);
  if (!chat) {
    i.reset();
    DUET_API_TRY(read_int(f, "best_of", 1, std::numeric_limits<int32_t>::max(), i));
    // best_of = n returns every candidate: that is n.
    if (i && *i != out.params.n) return invalid("best_of other than n is not supported", "best_of");
    DUET_API_TRY(read_bool(f, "echo", out.echo));
    if (const json* s = f.get("suffix")) {
      if (!s->is_string()) return wrong_type("suffix", "a string");
      out.suffix = s->get<std::string>();
    }
  }

  DUET_API_TRY(read_bool(f, "stream", out.stream));
  if (const json* so = f.get("stream_options")) {
    if (!so->is_object()) return wrong_type("stream_options", "an object");
    if (!out.stream) return invalid("'stream_options' is only allowed with stream: true", "stream_options");
    Fields sf(*so);
    DUET_API_TRY(read_bool(sf, "include_usage", out.include_usage));
    if (auto u = sf.unknown()) return invalid("unknown field '" + *u + "' in stream_options", "stream_options." + *u);
  }
  DUET_API_TRY(read_stop(f, out.params.stop));
  DUET_API_TRY(read_bool(f, "ignore_eos", out.params.ignore_eos));

  if (chat) {
    bool want = false;
    DUET_API_TRY(read_bool(f, "logprobs", want));
    i.reset();
    DUET_API_TRY(read_int(f, "top_logprobs", 0, 20, i));
    if (i && !want) return invalid("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    if (want) out.logprobs = i ? static_cast<int32_t>(*i) : 0;
  } else {
    i.reset();
    DUET_API_TRY(read_int(f, "logprobs", 0, 5, i));
    if (i) out.logprobs = static_cast<int32_t>(*i);
  }
  out.params.logprobs = out.logprobs;

  if (out.echo && out.logprobs >= 0)
    return invalid("'echo' with 'logprobs' is not supported: duet does not score the prompt's tokens", "echo");
  DUET_API_TRY(read_logit_bias(f, s.logit_bias));
  if (const json* u = f.get("user"); u && !u->is_string()) return wrong_type("user", "a string");
  if (chat) {
    for (const char* k : {"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"}) f.get(k);
    DUET_API_TRY(read_chat_tools(ordered, out.tools));
    DUET_API_TRY(read_template_kwargs(f, ordered, out.template_kwargs));
  }
  DUET_API_TRY(read_grammar(f, ordered, out.params.grammar));
  if (auto u = f.unknown()) return invalid("unknown field '" + *u + "'", *u);
  return std::nullopt;
}

std::optional<ApiError> parse_generate_body(std::string_view body, bool chat, GenerateRequest& out) {
  json j;
  DUET_API_TRY(parse_body(body, j));
  nlohmann::ordered_json ordered;
  DUET_API_TRY(parse_body(body, ordered));
  return parse_generate_request(j, ordered, chat, out);
}

}  // namespace duet::server
