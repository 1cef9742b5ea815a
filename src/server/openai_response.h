// The JSON of OpenAI's responses: whole completions, streaming chunks,
// logprobs in the completions and the chat shapes, usage.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/chat_output_parser.h"
#include "server/request_stats.h"
#include "tokenizer/tokenizer.h"

namespace duet::server {

// Everything that is the same across one choice's chunks.
struct ResponseShape {
  int32_t index = 0;  // the choice (RequestParams::n)
  bool chat = false;
  std::string id;
  int64_t created = 0;
  std::string model;
  bool logprobs = false;
  const Tokenizer* tokenizer = nullptr;
  // Chat: splits the reply into content, reasoning and tool calls (null:
  // all of it is content). One per response, fed by whichever of the
  // whole or the streamed path serves it.
  std::shared_ptr<ChatOutputParser> parser;
  std::string echo;  // completions with echo: the prompt's text, before the choice's
  // Set: the response carries "timings" (request_stats.h) beside "usage".
  const RooflineBasis* roofline = nullptr;
};

// "stop" or "length"; nullptr for reasons that are not a normal end.
const char* openai_finish_reason(FinishReason r);

nlohmann::json usage_json(const RequestTimings& t);
// The usage of a request's choices: its prompt once, their completions
// summed, and the first choice's times.
RequestTimings total_usage(const std::vector<RequestTimings>& choices);

// Collects logprobs of successive tokens in the endpoint's shape.
class LogprobsBuilder {
 public:
  explicit LogprobsBuilder(const ResponseShape& shape) : shape_(shape) {}
  void add(const TokenEvent& ev);
  bool empty() const { return n_ == 0; }
  // The collected entries; starts afresh (text offsets keep counting).
  nlohmann::json take();

 private:
  const ResponseShape& shape_;
  nlohmann::json tokens_ = nlohmann::json::array(), token_logprobs_ = nlohmann::json::array(),
                 top_ = nlohmann::json::array(), offsets_ = nlohmann::json::array(),
                 content_ = nlohmann::json::array();
  int64_t offset_ = 0;
  int32_t n_ = 0;
};

// One choice of a whole (non-streamed) response.
nlohmann::json whole_choice(const ResponseShape& shape, const std::string& text, FinishReason reason,
                            nlohmann::json logprobs);
// A whole response of these choices.
nlohmann::json full_response(const ResponseShape& shape, nlohmann::json choices, const RequestTimings& usage);

// One streamed chunk; finish may be kNone (finish_reason null).
nlohmann::json stream_chunk(const ResponseShape& shape, const std::string& text, bool first,
                            FinishReason finish, nlohmann::json logprobs);
// The chunks for the next `text` of a response (chat: as many as the
// parser's deltas, possibly none while it holds text back), and with
// `finish` set, the rest of the reply and the chunk with the finish reason.
std::vector<nlohmann::json> stream_chunks(const ResponseShape& shape, const std::string& text, FinishReason finish,
                                          nlohmann::json logprobs);
// The last chunk with stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk(const ResponseShape& shape, const RequestTimings& timings);

}  // namespace duet::server
