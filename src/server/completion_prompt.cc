#include "server/completion_prompt.h"

namespace duet::server {

namespace {

// [BOS] <fim_pre> prefix <fim_suf> suffix <fim_mid>: the prefix-suffix-middle
// order most FIM models (CodeLlama, StarCoder, Qwen2.5-Coder) are trained on.
std::vector<int32_t> fim_prompt(const Tokenizer& tok, const std::vector<int32_t>& prefix, const std::string& suffix) {
  std::vector<int32_t> ids;
  if (tok.add_bos_default() && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  ids.push_back(tok.fim_pre_id());
  ids.insert(ids.end(), prefix.begin(), prefix.end());
  ids.push_back(tok.fim_suf_id());
  const std::vector<int32_t> s = tok.encode(suffix, /*add_bos=*/false);
  ids.insert(ids.end(), s.begin(), s.end());
  ids.push_back(tok.fim_mid_id());
  return ids;
}

}  // namespace

std::optional<ApiError> completion_prompt(const Tokenizer& tok, GenerateRequest& r, std::vector<int32_t>& prompt) {
  if (r.prompt_is_ids && r.echo) r.prompt = tok.decode(r.prompt_ids);
  if (!r.suffix) {
    prompt = r.prompt_is_ids ? std::move(r.prompt_ids) : tok.encode(r.prompt, tok.add_bos_default());
    return std::nullopt;
  }
  if (!tok.has_fim())
    return invalid("'suffix' needs a model with fill-in-the-middle tokens (tokenizer.ggml.fim_pre_token_id, "
                   "fim_suf_token_id and fim_mid_token_id); this model has none",
                   "suffix", "fim_not_supported");
  const std::vector<int32_t> prefix = r.prompt_is_ids ? r.prompt_ids : tok.encode(r.prompt, /*add_bos=*/false);
  prompt = fim_prompt(tok, prefix, *r.suffix);
  return std::nullopt;
}

}  // namespace duet::server
