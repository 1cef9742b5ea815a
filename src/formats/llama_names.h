// GGUF naming conventions for the llama architecture (tensor names and
// metadata keys as llama.cpp's converters write them), shared by every
// writer and by the loader so files interchange with other GGUF tools.
#pragma once

#include <string>

namespace duet::gguf_names {

inline const std::string kArchitecture = "general.architecture";
inline const std::string kName = "general.name";
inline const std::string kAlignment = "general.alignment";
inline const std::string kFileType = "general.file_type";

// Architecture-scoped keys: key(arch, "context_length") -> "llama.context_length".
inline std::string key(const std::string& arch, const std::string& suffix) {
  return arch + "." + suffix;
}
inline const std::string kContextLength = "context_length";
inline const std::string kEmbeddingLength = "embedding_length";
inline const std::string kBlockCount = "block_count";
inline const std::string kFeedForwardLength = "feed_forward_length";
inline const std::string kHeadCount = "attention.head_count";
inline const std::string kHeadCountKv = "attention.head_count_kv";
inline const std::string kKeyLength = "attention.key_length";
inline const std::string kValueLength = "attention.value_length";
inline const std::string kRmsEps = "attention.layer_norm_rms_epsilon";
inline const std::string kRopeDimCount = "rope.dimension_count";
inline const std::string kRopeFreqBase = "rope.freq_base";
inline const std::string kVocabSize = "vocab_size";
inline const std::string kRopeScalingType = "rope.scaling.type";
inline const std::string kRopeScalingFactor = "rope.scaling.factor";
inline const std::string kRopeScalingOrigCtx = "rope.scaling.original_context_length";
inline const std::string kRopeScalingAttnFactor = "rope.scaling.attn_factor";
// YaRN: the ramp's rotation bounds, and DeepSeek-V2's attention multiplier
// (the scale grows by (1 + log_mul * ln factor)^2).
inline const std::string kRopeScalingYarnBetaFast = "rope.scaling.yarn_beta_fast";
inline const std::string kRopeScalingYarnBetaSlow = "rope.scaling.yarn_beta_slow";
inline const std::string kRopeScalingYarnLogMul = "rope.scaling.yarn_log_multiplier";
inline const std::string kSlidingWindow = "attention.sliding_window";
inline const std::string kAttnScale = "attention.scale";  // multiplies q·k (else 1/sqrt(head_dim))
inline const std::string kAttnSoftcap = "attn_logit_softcapping";
inline const std::string kFinalSoftcap = "final_logit_softcapping";
inline const std::string kPoolingType = "pooling_type";  // 0 none, 1 mean, 2 cls, 3 last, 4 rank
// Mixture of experts: experts per layer, experts each token uses, each
// expert's FFN width (Qwen3-MoE; Mixtral's is feed_forward_length), and
// whether the chosen experts' weights are renormalised to sum to 1.
inline const std::string kExpertCount = "expert_count";
inline const std::string kExpertUsedCount = "expert_used_count";
inline const std::string kExpertFfnLength = "expert_feed_forward_length";
inline const std::string kExpertWeightsNorm = "expert_weights_norm";
inline const std::string kExpertSharedFfnLength = "expert_shared_feed_forward_length";
// DeepSeek-V2: shared experts (count, each expert_feed_forward_length wide),
// the routed sum's scale, the leading dense layers, the scoring function
// (1 softmax, 2 sigmoid), and multi-head latent attention's ranks.
inline const std::string kExpertSharedCount = "expert_shared_count";
inline const std::string kExpertWeightsScale = "expert_weights_scale";
inline const std::string kExpertGatingFunc = "expert_gating_func";
inline const std::string kLeadingDenseBlockCount = "leading_dense_block_count";
inline const std::string kQLoraRank = "attention.q_lora_rank";
inline const std::string kKvLoraRank = "attention.kv_lora_rank";

inline const std::string kTokModel = "tokenizer.ggml.model";
inline const std::string kTokPre = "tokenizer.ggml.pre";
inline const std::string kTokTokens = "tokenizer.ggml.tokens";
inline const std::string kTokScores = "tokenizer.ggml.scores";
inline const std::string kTokTypes = "tokenizer.ggml.token_type";
inline const std::string kTokMerges = "tokenizer.ggml.merges";
inline const std::string kTokBos = "tokenizer.ggml.bos_token_id";
inline const std::string kTokEos = "tokenizer.ggml.eos_token_id";
inline const std::string kTokUnk = "tokenizer.ggml.unknown_token_id";
inline const std::string kTokPad = "tokenizer.ggml.padding_token_id";
inline const std::string kTokEot = "tokenizer.ggml.eot_token_id";
inline const std::string kTokAddBos = "tokenizer.ggml.add_bos_token";
inline const std::string kTokAddEos = "tokenizer.ggml.add_eos_token";
inline const std::string kTokAddSpacePrefix = "tokenizer.ggml.add_space_prefix";
inline const std::string kChatTemplate = "tokenizer.chat_template";

inline const std::string kTokenEmbd = "token_embd.weight";
inline const std::string kOutputNorm = "output_norm.weight";
inline const std::string kOutput = "output.weight";
// Per-dimension divisors of RoPE frequencies (Llama 3.1-style scaling), F32 [rope_dim/2].
inline const std::string kRopeFreqs = "rope_freqs.weight";
// LongRoPE (Phi-3 128k): divisors [rope_dim/2] for contexts up to and past
// rope.scaling.original_context_length.
inline const std::string kRopeFactorsShort = "rope_factors_short.weight";
inline const std::string kRopeFactorsLong = "rope_factors_long.weight";

// Per-block tensors: blk(3, "attn_q") -> "blk.3.attn_q.weight".
inline std::string blk(int layer, const std::string& what) {
  return "blk." + std::to_string(layer) + "." + what + ".weight";
}
inline std::string blk_bias(int layer, const std::string& what) {
  return "blk." + std::to_string(layer) + "." + what + ".bias";
}
inline const std::string kAttnNorm = "attn_norm";
inline const std::string kAttnQ = "attn_q";
inline const std::string kAttnK = "attn_k";
inline const std::string kAttnV = "attn_v";
inline const std::string kAttnOut = "attn_output";
inline const std::string kFfnNorm = "ffn_norm";
inline const std::string kFfnGate = "ffn_gate";
inline const std::string kFfnUp = "ffn_up";
inline const std::string kFfnDown = "ffn_down";
inline const std::string kAttnQNorm = "attn_q_norm";             // Qwen3, Gemma 3: [head_dim]
inline const std::string kAttnKNorm = "attn_k_norm";
inline const std::string kPostAttnNorm = "post_attention_norm";  // Gemma 2/3
inline const std::string kPostFfnNorm = "post_ffw_norm";
inline const std::string kAttnQkv = "attn_qkv";                  // Phi-3: q, k, v rows fused
// Phi-3's ffn_up holds the gate's rows, then the up projection's.
// Mixture of experts: the router [dim -> n_expert] and the experts' FFN
// matrices stacked [n_expert][rows][cols] (ffn_gate_exps ...), or, in older
// Mixtral files and in a Hugging Face folder served in place, one tensor
// per expert: blk.L.ffn_gate.E.weight.
inline const std::string kFfnRouter = "ffn_gate_inp";
inline const std::string kFfnGateExps = "ffn_gate_exps";
inline const std::string kFfnUpExps = "ffn_up_exps";
inline const std::string kFfnDownExps = "ffn_down_exps";
// Qwen2-MoE's shared expert, which every token runs beside its routed
// ones, scaled by sigmoid(x · ffn_gate_inp_shexp).
inline const std::string kFfnGateShexp = "ffn_gate_shexp";
inline const std::string kFfnUpShexp = "ffn_up_shexp";
inline const std::string kFfnDownShexp = "ffn_down_shexp";
inline const std::string kFfnRouterShexp = "ffn_gate_inp_shexp";
// Multi-head latent attention (DeepSeek-V2): q directly (attn_q) or through
// a low-rank bottleneck (attn_q_a [dim -> q_lora], attn_q_a_norm, attn_q_b);
// the latent and the shared RoPE key (attn_kv_a_mqa [dim -> kv_lora + rope]),
// the latent's norm (attn_kv_a_norm [kv_lora]) and its per-head
// decompression (attn_kv_b [kv_lora -> heads * (nope + v)], each head's
// nope key rows then its value rows).
inline const std::string kAttnQA = "attn_q_a";
inline const std::string kAttnQANorm = "attn_q_a_norm";
inline const std::string kAttnQB = "attn_q_b";
inline const std::string kAttnKvA = "attn_kv_a_mqa";
inline const std::string kAttnKvANorm = "attn_kv_a_norm";
inline const std::string kAttnKvB = "attn_kv_b";
inline std::string blk_expert(int layer, const std::string& what, int expert) {
  return "blk." + std::to_string(layer) + "." + what + "." + std::to_string(expert) + ".weight";
}

}  // namespace duet::gguf_names
