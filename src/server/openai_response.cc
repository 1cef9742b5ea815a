#include "server/openai_response.h"

#include "server/chat_response.h"

namespace duet::server {

using nlohmann::json;

const char* openai_finish_reason(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength:
    case FinishReason::kContext: return "length";
    default: return nullptr;
  }
}

json usage_json(const RequestTimings& t) {
  return {{"prompt_tokens", t.n_prompt},
          {"completion_tokens", t.n_generated},
          {"total_tokens", t.n_prompt + t.n_generated},
          {"prompt_tokens_details", {{"cached_tokens", t.n_cached}}}};
}

RequestTimings total_usage(const std::vector<RequestTimings>& choices) {
  if (choices.empty()) return {};
  // The times (TTFT, each token's) stay the first choice's: the choices share
  // one prefill and decode in the same steps. The counts are the request's.
  RequestTimings t = choices[0];
  for (size_t i = 1; i < choices.size(); ++i) {
    const RequestTimings& c = choices[i];
    t.n_generated += c.n_generated;
    t.n_preemptions += c.n_preemptions;
    t.n_drafted += c.n_drafted;
    t.n_accepted += c.n_accepted;
    t.n_passes += c.n_passes;
  }
  return t;
}

namespace {

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

void LogprobsBuilder::add(const TokenEvent& ev) {
  const Tokenizer& tok = *shape_.tokenizer;
  const std::string piece = tok.decode_piece(ev.token);
  ++n_;
  if (shape_.chat) {
    json top = json::array();
    for (const TokenLogprob& t : ev.top_logprobs) {
      const std::string p = tok.decode_piece(t.token);
      top.push_back({{"token", p}, {"logprob", t.logprob}, {"bytes", bytes_of(p)}});
    }
    content_.push_back({{"token", piece}, {"logprob", ev.logprob}, {"bytes", bytes_of(piece)},
                        {"top_logprobs", top}});
    return;
  }
  json top = json::object();
  for (const TokenLogprob& t : ev.top_logprobs) {
    const std::string p = tok.decode_piece(t.token);
    if (!top.contains(p)) top[p] = t.logprob;
  }
  tokens_.push_back(piece);
  token_logprobs_.push_back(ev.logprob);
  top_.push_back(top);
  offsets_.push_back(offset_);
  offset_ += static_cast<int64_t>(piece.size());
}

json LogprobsBuilder::take() {
  json out;
  if (shape_.chat) {
    out = {{"content", std::move(content_)}};
    content_ = json::array();
  } else {
    out = {{"tokens", std::move(tokens_)},
           {"token_logprobs", std::move(token_logprobs_)},
           {"top_logprobs", std::move(top_)},
           {"text_offset", std::move(offsets_)}};
    tokens_ = token_logprobs_ = top_ = offsets_ = json::array();
  }
  n_ = 0;
  return out;
}

namespace {

json finish_json(FinishReason r) {
  const char* s = openai_finish_reason(r);
  return s ? json(s) : json(nullptr);
}

}  // namespace

json whole_choice(const ResponseShape& shape, const std::string& text, FinishReason reason, json logprobs) {
  json choice = {{"index", shape.index}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish_json(reason)}};
  if (shape.chat && shape.parser) {
    shape.parser->finish(text);  // knowing nothing follows: calls are parsed whole
    const ParsedMessage& m = shape.parser->message();
    choice["message"] = chat_message_json(m);
    const char* r = chat_finish_reason(m, reason);
    choice["finish_reason"] = r ? json(r) : json(nullptr);
  } else if (shape.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = shape.echo + text;
  }
  return choice;
}

json full_response(const ResponseShape& shape, json choices, const RequestTimings& usage) {
  json out = {{"id", shape.id},
              {"object", shape.chat ? "chat.completion" : "text_completion"},
              {"created", shape.created},
              {"model", shape.model},
              {"choices", std::move(choices)},
              {"usage", usage_json(usage)}};
  if (shape.roofline) out["timings"] = request_stats_json(usage, *shape.roofline);
  return out;
}

json stream_chunk(const ResponseShape& shape, const std::string& text, bool first,
                  FinishReason finish, json logprobs) {
  json choice = {{"index", shape.index}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish_json(finish)}};
  if (shape.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (first || !text.empty() || finish == FinishReason::kNone) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  return {{"id", shape.id},
          {"object", shape.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", shape.created},
          {"model", shape.model},
          {"choices", json::array({choice})}};
}

namespace {

json chunk_with(const ResponseShape& shape, json choice) {
  return {{"id", shape.id},
          {"object", "chat.completion.chunk"},
          {"created", shape.created},
          {"model", shape.model},
          {"choices", json::array({std::move(choice)})}};
}

}  // namespace

std::vector<json> stream_chunks(const ResponseShape& shape, const std::string& text, FinishReason finish,
                                json logprobs) {
  if (!shape.chat || !shape.parser) {
    std::vector<json> out;
    if (!text.empty() || !logprobs.is_null()) out.push_back(stream_chunk(shape, text, false, FinishReason::kNone, logprobs));
    if (finish != FinishReason::kNone) out.push_back(stream_chunk(shape, "", false, finish, nullptr));
    return out;
  }
  std::vector<ChatDelta> deltas =
      finish == FinishReason::kNone ? shape.parser->feed(text) : shape.parser->finish(text);
  std::vector<json> delta_json = chat_delta_json(deltas);
  // Logprobs ride on the first chunk; text held back still reports them.
  if (delta_json.empty() && !logprobs.is_null()) delta_json.push_back({{"content", ""}});
  std::vector<json> out;
  for (json& d : delta_json) {
    out.push_back(chunk_with(shape, {{"index", shape.index}, {"delta", std::move(d)}, {"logprobs", std::move(logprobs)},
                                     {"finish_reason", nullptr}}));
    logprobs = nullptr;
  }
  if (finish != FinishReason::kNone) {
    const char* r = chat_finish_reason(shape.parser->message(), finish);
    out.push_back(chunk_with(shape, {{"index", shape.index}, {"delta", json::object()}, {"logprobs", nullptr},
                                     {"finish_reason", r ? json(r) : json(nullptr)}}));
  }
  return out;
}

json usage_chunk(const ResponseShape& shape, const RequestTimings& timings) {
  json out = {{"id", shape.id},
              {"object", shape.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", shape.created},
              {"model", shape.model},
              {"choices", json::array()},
              {"usage", usage_json(timings)}};
  if (shape.roofline) out["timings"] = request_stats_json(timings, *shape.roofline);
  return out;
}

}  // namespace duet::server
