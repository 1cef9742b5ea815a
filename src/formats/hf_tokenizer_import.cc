#include "formats/hf_tokenizer_import.h"

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/json_parse.h"
#include "formats/llama_names.h"

namespace duet {
namespace {

using nlohmann::json;
namespace n = gguf_names;

constexpr int64_t kMaxVocab = 1 << 24;
// Ids no token has become placeholders; a few reserved ids are normal, but
// a lone id near kMaxVocab would make a 100-byte file allocate gigabytes.
constexpr int64_t kMaxVocabHoles = 1 << 16;
// GGUF token types (SentencePiece's numbering).
constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

// The Split regexes of the families duet's pre-tokenizers implement, as their
// tokenizer.json files spell them; they differ only in how digits group.
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return err(path, ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<json> parse_object(std::string_view text, const std::string& path) {
  auto j = parse_json(text);
  if (!j.ok()) return err(path, ": ", j.error().message);
  if (!j->is_object()) return err(path, ": not a JSON object");
  return j;
}

// obj[key] when it is a string, else "" (json::value would throw for any
// other type).
std::string string_or_empty(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The llama.cpp name of the pre-tokenizer (tokenizer.ggml.pre).
Result<std::string> pre_tokenizer_name(const json& pre, const std::string& path) {
  std::vector<const json*> steps;
  if (pre.is_object() && string_or_empty(pre, "type") == "Sequence" && pre.contains("pretokenizers") &&
      pre["pretokenizers"].is_array()) {
    for (const json& s : pre["pretokenizers"]) steps.push_back(&s);
  } else if (pre.is_object()) {
    steps.push_back(&pre);
  }
  const json* split = nullptr;
  const json* byte_level = nullptr;
  for (const json* s : steps) {
    if (!s->is_object()) continue;
    const std::string type = string_or_empty(*s, "type");
    if (type == "Split" && !split) split = s;
    else if (type == "ByteLevel") byte_level = s;
    else return err(path, ": pre_tokenizer step '", type, "' is not supported");
  }
  if (!byte_level) return err(path, ": pre_tokenizer is not byte-level (no ByteLevel step)");
  if (!split) {
    const auto use_regex = byte_level->find("use_regex");
    if (use_regex == byte_level->end() || *use_regex == true) return std::string("gpt-2");
    return err(path, ": pre_tokenizer has no splitting rule");
  }
  const auto pattern = split->find("pattern");
  std::string regex;
  if (pattern != split->end() && pattern->is_object() && pattern->contains("Regex") &&
      (*pattern)["Regex"].is_string())
    regex = (*pattern)["Regex"].get<std::string>();
  if (regex == kLlama3Regex) return std::string("llama-bpe");
  if (regex == kQwen2Regex) return std::string("qwen2");
  return err(path, ": pre_tokenizer Split regex ",
             pattern == split->end() ? std::string("(none)") : pattern->dump(),
             " is not one duet implements (GPT-2, Llama 3, Qwen2)");
}

// "a b" or ["a", "b"] -> "a b" (GGUF's form).
Result<std::string> merge_text(const json& m, size_t i, const std::string& path) {
  if (m.is_string()) return m.get<std::string>();
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    const std::string a = m[0].get<std::string>(), b = m[1].get<std::string>();
    if (a.find(' ') != std::string::npos || b.find(' ') != std::string::npos)
      return err(path, ": model.merges[", i, "] has a space inside a token, which GGUF's \"a b\" form cannot hold");
    return a + " " + b;
  }
  return err(path, ": model.merges[", i, "] is neither \"a b\" nor [\"a\", \"b\"]");
}

// A special token in tokenizer_config.json: "text" or {"content": "text", ...}.
std::string special_text(const json& cfg, const char* key) {
  const auto it = cfg.find(key);
  if (it == cfg.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return {};
}

// The first special token a TemplateProcessing post-processor puts before a
// single sequence (Llama 3's BOS), or "" when it puts none.
std::string template_prefix(const json& post) {
  if (!post.is_object()) return {};
  if (string_or_empty(post, "type") == "Sequence" && post.contains("processors") &&
      post["processors"].is_array()) {
    for (const json& p : post["processors"])
      if (std::string s = template_prefix(p); !s.empty()) return s;
    return {};
  }
  if (string_or_empty(post, "type") != "TemplateProcessing") return {};
  const auto single = post.find("single");
  if (single == post.end() || !single->is_array() || single->empty()) return {};
  const json& first = (*single)[0];
  if (first.is_object() && first.contains("SpecialToken") && first["SpecialToken"].is_object())
    return string_or_empty(first["SpecialToken"], "id");
  return {};
}

}  // namespace

Status set_hf_tokenizer_metadata(GgufWriter& w, const HfTokenizerFiles& files) {
  DUET_ASSIGN(const std::string tokenizer_text, read_text(files.tokenizer_json));
  std::string config_text;
  if (!files.tokenizer_config.empty()) {
    DUET_ASSIGN(config_text, read_text(files.tokenizer_config));
  }
  return set_hf_tokenizer_metadata_from_text(w, files, tokenizer_text, config_text);
}

Status set_hf_tokenizer_metadata_from_text(GgufWriter& w, const HfTokenizerFiles& files,
                                           std::string_view tokenizer_text, std::string_view config_text) {
  const std::string& path = files.tokenizer_json;
  DUET_ASSIGN(const json tok, parse_object(tokenizer_text, path));
  const auto model = tok.find("model");
  if (model == tok.end() || !model->is_object()) return err(path, ": no \"model\" object");
  if (string_or_empty(*model, "type") != "BPE")
    return err(path, ": model type ", model->contains("type") ? (*model)["type"].dump() : "(none)",
               " is not supported (BPE only)");
  const auto vocab = model->find("vocab");
  const auto merges = model->find("merges");
  if (vocab == model->end() || !vocab->is_object()) return err(path, ": model.vocab is not an object");
  if (merges == model->end() || !merges->is_array()) return err(path, ": model.merges is not an array");
  const auto pre = tok.find("pre_tokenizer");
  DUET_ASSIGN(const std::string pre_name,
              pre_tokenizer_name(pre == tok.end() ? json() : *pre, path));

  std::map<int64_t, std::pair<std::string, int32_t>> by_id;  // id -> (text, type)
  for (const auto& [text, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxVocab)
      return err(path, ": model.vocab['", text, "'] = ", id.dump(), " is not a token id");
    if (!by_id.emplace(id.get<int64_t>(), std::make_pair(text, kNormal)).second)
      return err(path, ": model.vocab gives id ", id.get<int64_t>(), " to two tokens");
  }
  if (const auto added = tok.find("added_tokens"); added != tok.end() && added->is_array()) {
    for (const json& a : *added) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string())
        return err(path, ": added_tokens entry ", a.dump(), " needs an integer id and a content string");
      const int64_t id = a["id"].get<int64_t>();
      if (id < 0 || id >= kMaxVocab) return err(path, ": added token id ", id, " out of range");
      const auto special = a.find("special");
      if (special != a.end() && !special->is_boolean())
        return err(path, ": added_tokens entry ", a.dump(), ": \"special\" must be true or false");
      const int32_t type = special != a.end() && special->get<bool>() ? kControl : kUserDefined;
      by_id[id] = {a["content"].get<std::string>(), type};  // may re-type a vocab entry
    }
  }
  if (by_id.empty()) return err(path, ": the vocabulary is empty");

  // GGUF needs ids 0..n-1; holes (reserved ids) become unused placeholders.
  const int64_t n_vocab = by_id.rbegin()->first + 1;
  if (n_vocab - static_cast<int64_t>(by_id.size()) > kMaxVocabHoles)
    return err(path, ": token ids go up to ", n_vocab - 1, " but only ", by_id.size(),
               " are given: more than ", kMaxVocabHoles, " ids would have no token");
  std::vector<std::string> tokens(static_cast<size_t>(n_vocab));
  std::vector<int32_t> types(static_cast<size_t>(n_vocab), kUnused);
  std::map<std::string, int64_t> id_of;
  for (int64_t i = 0; i < n_vocab; ++i) tokens[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";
  for (auto& [id, entry] : by_id) {
    tokens[static_cast<size_t>(id)] = entry.first;
    types[static_cast<size_t>(id)] = entry.second;
    id_of.emplace(entry.first, id);
  }

  std::vector<std::string> merge_list;
  merge_list.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    DUET_ASSIGN(std::string m, merge_text((*merges)[i], i, path));
    merge_list.push_back(std::move(m));
  }

  json cfg = json::object();
  if (!files.tokenizer_config.empty()) {
    DUET_ASSIGN(cfg, parse_object(config_text, files.tokenizer_config));
  }
  auto lookup = [&](const std::string& text, int64_t fallback) -> int64_t {
    if (text.empty()) return fallback;
    const auto it = id_of.find(text);
    return it == id_of.end() ? fallback : it->second;
  };
  const auto post = tok.find("post_processor");
  const std::string prefix = post == tok.end() ? std::string() : template_prefix(*post);
  const int64_t bos = lookup(special_text(cfg, "bos_token"), lookup(prefix, files.bos_id));
  const int64_t eos = lookup(special_text(cfg, "eos_token"), files.eos_id);
  bool add_bos = !prefix.empty();
  if (const auto it = cfg.find("add_bos_token"); it != cfg.end() && it->is_boolean()) add_bos = *it;
  bool add_eos = false;
  if (const auto it = cfg.find("add_eos_token"); it != cfg.end() && it->is_boolean()) add_eos = *it;
  for (const auto& [key, id] : {std::pair{n::kTokBos, bos}, std::pair{n::kTokEos, eos}})
    if (id >= n_vocab) return err(path, ": ", key, " ", id, " is outside the vocabulary of ", n_vocab);

  w.set(n::kTokModel, GgufValue::of_string("gpt2"));
  w.set(n::kTokPre, GgufValue::of_string(pre_name));
  w.set(n::kTokTokens, GgufValue::of_strings(std::move(tokens)));
  w.set(n::kTokTypes, GgufValue::of_i32s(types));
  w.set(n::kTokMerges, GgufValue::of_strings(std::move(merge_list)));
  if (bos >= 0) w.set(n::kTokBos, GgufValue::of_u32(static_cast<uint32_t>(bos)));
  if (eos >= 0) w.set(n::kTokEos, GgufValue::of_u32(static_cast<uint32_t>(eos)));
  w.set(n::kTokAddBos, GgufValue::of_bool(add_bos));
  w.set(n::kTokAddEos, GgufValue::of_bool(add_eos));
  if (const auto it = cfg.find("chat_template"); it != cfg.end() && it->is_string())
    w.set(n::kChatTemplate, GgufValue::of_string(it->get<std::string>()));
  return {};
}

}  // namespace duet
