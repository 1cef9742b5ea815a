#include "server/tokenize_api.h"

#include <nlohmann/json.hpp>

#include "core/utf8.h"
#include "server/json_fields.h"

namespace duet::server {

namespace {

using nlohmann::json;

std::optional<ApiError> parse_object(std::string_view body, json& out) { return parse_body(body, out); }

std::optional<ApiError> no_unknown(const Fields& f) {
  if (auto key = f.unknown()) return invalid("unknown field '" + *key + "'", *key);
  return std::nullopt;
}

// What a token shows as: its text for control tokens (which decode to
// nothing), else the bytes it decodes to, as a JSON string where they are
// whole UTF-8 and as an array of byte values where not; appended to `out`.
void append_piece(const Tokenizer& tok, int32_t id, std::string& out) {
  const std::string piece = tok.token_type(id) == TokenType::kControl ? tok.token_text(id) : tok.decode_piece(id);
  if (utf8::is_valid(piece)) {
    out += json(piece).dump();
    return;
  }
  out += '[';
  for (size_t i = 0; i < piece.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(static_cast<unsigned char>(piece[i]));
  }
  out += ']';
}

// {"tokens": [...]} written straight into text: a DOM of one object per
// token held ~10x the response's bytes while it was built.
std::string tokens_text(const Tokenizer& tok, const std::vector<int32_t>& ids, bool with_pieces) {
  std::string out = "{\"tokens\":[";
  out.reserve(out.size() + ids.size() * (with_pieces ? 24 : 6));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    if (!with_pieces) {
      out += std::to_string(ids[i]);
      continue;
    }
    out += "{\"id\":" + std::to_string(ids[i]) + ",\"piece\":";
    append_piece(tok, ids[i], out);
    out += '}';
  }
  out += "]}";
  return out;
}

}  // namespace

std::optional<ApiError> tokenize_body(std::string_view body, const Tokenizer& tok, size_t max_tokens,
                                      std::string& out) {
  json j;
  if (auto e = parse_object(body, j)) return e;
  Fields f(j);
  const json* content = f.get("content");
  if (!content) return invalid("'content' is required", "content");
  if (!content->is_string()) return wrong_type("content", "a string");
  bool add_special = false, parse_special = true, with_pieces = false;
  if (auto e = read_bool(f, "add_special", add_special)) return e;
  if (auto e = read_bool(f, "parse_special", parse_special)) return e;
  if (auto e = read_bool(f, "with_pieces", with_pieces)) return e;
  if (auto e = no_unknown(f)) return e;

  const std::vector<int32_t> ids =
      tok.encode(content->get_ref<const std::string&>(), add_special && tok.add_bos_default(), parse_special);
  if (max_tokens > 0 && ids.size() > max_tokens)
    return invalid("'content' is " + std::to_string(ids.size()) + " tokens, more than the " +
                       std::to_string(max_tokens) + " one request may tokenize",
                   "content", "too_many_tokens");
  out = tokens_text(tok, ids, with_pieces);
  return std::nullopt;
}

std::optional<ApiError> detokenize_body(std::string_view body, const Tokenizer& tok, std::string& out) {
  json j;
  if (auto e = parse_object(body, j)) return e;
  Fields f(j);
  const json* tokens = f.get("tokens");
  if (!tokens) return invalid("'tokens' is required", "tokens");
  if (!tokens->is_array()) return wrong_type("tokens", "an array of token ids");
  if (auto e = no_unknown(f)) return e;
  std::vector<int32_t> ids;
  for (const json& t : *tokens) {
    if (!t.is_number_integer()) return wrong_type("tokens", "an array of token ids");
    const bool negative = t.is_number_integer() && !t.is_number_unsigned() && t.get<int64_t>() < 0;
    if (negative || t.get<uint64_t>() >= static_cast<uint64_t>(tok.n_vocab()))
      return invalid("token id " + t.dump() + " is out of range (the vocabulary has " +
                         std::to_string(tok.n_vocab()) + " tokens)",
                     "tokens");
    ids.push_back(t.get<int32_t>());
  }
  out = dump({{"content", utf8::sanitize(tok.decode(ids))}});
  return std::nullopt;
}

}  // namespace duet::server
