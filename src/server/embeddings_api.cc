#include "server/embeddings_api.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "server/json_fields.h"

namespace duet::server {

namespace {

using nlohmann::json;

constexpr const char* kInputTypes = "a string, an array of strings, an array of token ids or an array of such arrays";

std::optional<ApiError> read_ids(const json& arr, const std::string& where, std::vector<int32_t>& out) {
  if (arr.empty()) return invalid(where + " is an empty array of token ids", "input");
  for (const json& t : arr) {
    if (!t.is_number_integer()) return invalid(where + " must hold only token ids (integers)", "input");
    const bool fits = t.is_number_unsigned() ? t.get<uint64_t>() <= std::numeric_limits<int32_t>::max()
                                             : t.get<int64_t>() >= std::numeric_limits<int32_t>::min();
    if (!fits) return invalid("token id " + t.dump() + " in " + where + " is out of range", "input");
    out.push_back(t.get<int32_t>());
  }
  return std::nullopt;
}

std::optional<ApiError> read_text(const json& s, const std::string& where, const Tokenizer& tok,
                                  std::vector<int32_t>& out) {
  const auto& text = s.get_ref<const std::string&>();
  if (text.empty()) return invalid(where + " is an empty string", "input");
  out = tok.encode(text, tok.add_bos_default());
  if (out.empty()) return invalid(where + " has no tokens", "input");
  return std::nullopt;
}

// The tokens read so far against the limit, once each input is read.
std::optional<ApiError> count_tokens(const EmbeddingsRequest& out, const EmbeddingLimits& limits, int64_t& total) {
  total += static_cast<int64_t>(out.inputs.back().size());
  if (total <= limits.max_tokens) return std::nullopt;
  return invalid("'input' has more than " + std::to_string(limits.max_tokens) +
                     " tokens; this server accepts at most " + std::to_string(limits.max_tokens) + " per request",
                 "input", "too_many_tokens");
}

std::optional<ApiError> read_one(const json& v, const std::string& where, const Tokenizer& tok,
                                 std::vector<int32_t>& out) {
  return v.is_string() ? read_text(v, where, tok, out) : read_ids(v, where, out);
}

std::optional<ApiError> read_inputs(const json& v, const Tokenizer& tok, const EmbeddingLimits& limits,
                                    EmbeddingsRequest& out) {
  int64_t total = 0;
  if (!v.is_string() && !v.is_array()) return wrong_type("input", kInputTypes);
  if (v.is_array() && v.empty()) return invalid("'input' is an empty array", "input");
  // A string or one array of ids is one input; otherwise each element is one.
  if (v.is_string() || v[0].is_number()) {
    out.inputs.emplace_back();
    if (auto e = read_one(v, "'input'", tok, out.inputs.back())) return e;
    return count_tokens(out, limits, total);
  }
  if (v.size() > limits.max_inputs)
    return invalid("'input' has " + std::to_string(v.size()) + " inputs; this server accepts at most " +
                       std::to_string(limits.max_inputs) + " per request",
                   "input", "too_many_inputs");
  const bool strings = v[0].is_string();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string where = "input[" + std::to_string(i) + "]";
    if (strings ? !v[i].is_string() : !v[i].is_array())
      return invalid("'input' mixes kinds at " + where + ": it must be " + kInputTypes, "input");
    out.inputs.emplace_back();
    if (auto e = read_one(v[i], where, tok, out.inputs.back())) return e;
    if (auto e = count_tokens(out, limits, total)) return e;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_embeddings_body(std::string_view body, const Tokenizer& tok, int32_t dim,
                                              const EmbeddingLimits& limits, EmbeddingsRequest& out) {
  json j;
  if (auto e = parse_body(body, j)) return e;
  Fields f(j);
  if (const json* m = f.get("model")) {
    if (!m->is_string()) return wrong_type("model", "a string");
    out.model = m->get<std::string>();
  }
  if (const json* e = f.get("encoding_format")) {
    if (!e->is_string() || (*e != "float" && *e != "base64"))
      return invalid("'encoding_format' must be \"float\" or \"base64\"", "encoding_format");
    out.base64 = *e == "base64";
  }
  if (const json* d = f.get("dimensions")) {
    if (!d->is_number_integer()) return wrong_type("dimensions", "an integer");
    if (!d->is_number_unsigned() || d->get<uint64_t>() != static_cast<uint64_t>(dim))
      return invalid("'dimensions' is " + d->dump() + ", but this model's embeddings have " + std::to_string(dim) +
                         " dimensions and it was not trained to give shorter ones",
                     "dimensions");
  }
  if (const json* u = f.get("user"); u && !u->is_string()) return wrong_type("user", "a string");
  const json* input = f.get("input");
  if (auto key = f.unknown()) return invalid("unknown field '" + *key + "'", *key);
  if (!input) return invalid("'input' is required", "input");
  return read_inputs(*input, tok, limits, out);
}

std::string base64_floats(const std::vector<float>& v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * sizeof(float), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u = std::bit_cast<uint32_t>(v[i]);
    for (size_t b = 0; b < 4; ++b, u >>= 8) bytes[i * 4 + b] = static_cast<char>(u & 0xFF);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t group = 0;
    for (size_t k = 0; k < 3; ++k)
      group = (group << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k)
      out += k <= n ? kAlphabet[(group >> (18 - 6 * k)) & 0x3F] : '=';
  }
  return out;
}

json embeddings_response(const EmbeddingsRequest& req, const Embeddings& vectors, const std::string& model) {
  json data = json::array();
  int64_t n_tokens = 0;
  for (size_t i = 0; i < vectors.size(); ++i) {
    json e = {{"object", "embedding"}, {"index", i}};
    if (req.base64) e["embedding"] = base64_floats(vectors[i]);
    else e["embedding"] = vectors[i];
    data.push_back(std::move(e));
    n_tokens += static_cast<int64_t>(req.inputs[i].size());
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}};
}

}  // namespace duet::server
