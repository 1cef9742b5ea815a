// `duet synth`: writes a random-weight GGUF of a preset or custom shape.
#include <memory>
#include <string>

#include "cli/command.h"
#include "formats/arch/arch.h"
#include "formats/llama_synth.h"

namespace duet::cli {
namespace {

struct SynthArgs {
  std::string like;
  std::string arch;
  std::string vocab;
  std::string dtype = "f32";
  uint64_t seed = 0;
  int32_t shared_experts = 0;
  std::string out;
  ModelConfig shape;  // explicit flags; each applied only when given
};

// A shape flag and the field it sets.
template <class T>
struct ShapeFlag {
  const char* name;
  T ModelConfig::*field;
  const char* help;
};

constexpr ShapeFlag<int32_t> kIntFlags[] = {
    {"--dim", &ModelConfig::dim, "embedding length"},
    {"--ffn", &ModelConfig::ffn_dim, "feed-forward length"},
    {"--layers", &ModelConfig::n_layers, "blocks"},
    {"--heads", &ModelConfig::n_heads, "query heads"},
    {"--kv-heads", &ModelConfig::n_kv_heads, "key/value heads (default with --heads: as many)"},
    {"--head-dim", &ModelConfig::head_dim, "head dimension (default dim/heads)"},
    {"--vocab-size", &ModelConfig::n_vocab, "vocabulary size"},
    {"--ctx", &ModelConfig::ctx_len, "context length"},
    {"--experts", &ModelConfig::n_experts, "experts per layer (a mixture of experts)"},
    {"--experts-used", &ModelConfig::n_experts_used, "experts each token uses"},
    {"--expert-ffn", &ModelConfig::expert_ffn_dim, "each expert's feed-forward length"},
    {"--rope-dim", &ModelConfig::rope_dim, "dims of each head RoPE rotates (deepseek2: the rope part, last)"},
    {"--kv-lora-rank", &ModelConfig::kv_lora_rank, "deepseek2: width of the cached latent"},
    {"--q-lora-rank", &ModelConfig::q_lora_rank, "deepseek2: q's bottleneck (0: q projected directly)"},
    {"--v-head-dim", &ModelConfig::v_head_dim, "deepseek2: each head's value width"},
    {"--dense-layers", &ModelConfig::n_dense_leading, "deepseek2: leading layers with a dense FFN"},
    {"--window", &ModelConfig::sliding_window, "sliding window of the layers that slide (gemma2, gemma3; llama: all)"},
};
constexpr ShapeFlag<float> kFloatFlags[] = {
    {"--rope-base", &ModelConfig::rope_base, "RoPE frequency base"},
    {"--rms-eps", &ModelConfig::rms_eps, "RMSNorm epsilon"},
};

// The preset (or a custom shape's defaults) with the flags given on top.
Result<ModelConfig> requested_shape(const SynthArgs& a, const CLI::App& app) {
  // A custom shape need not name every field.
  ModelConfig shape{.name = "synth-custom", .ctx_len = 2048};
  if (!a.like.empty()) {
    DUET_ASSIGN(shape, model_preset(a.like));
  }
  const auto given = [&](const char* flag) { return app.count(flag) > 0; };
  // Shared experts are a count of experts, each --expert-ffn wide, which
  // keep their count when the width changes.
  int32_t shared = shape.expert_ffn_dim > 0 ? shape.shared_expert_ffn_dim / shape.expert_ffn_dim : 0;
  for (const auto& f : kIntFlags)
    if (given(f.name)) shape.*f.field = a.shape.*f.field;
  for (const auto& f : kFloatFlags)
    if (given(f.name)) shape.*f.field = a.shape.*f.field;
  if (given("--tied")) shape.tied_output = true;
  if (given("--arch")) {
    const ArchRecord* record = find_arch(a.arch);
    if (!record) return err("synth: architecture '", a.arch, "' is not supported (", supported_architectures(), ")");
    shape.arch = record->arch;
  }
  if (given("--heads") && !given("--kv-heads")) shape.n_kv_heads = a.shape.n_heads;  // no GQA
  if (given("--shared-experts")) shared = a.shared_experts;
  if (given("--expert-ffn") || given("--shared-experts")) shape.shared_expert_ffn_dim = shared * shape.expert_ffn_dim;
  if (arch_traits(shape.arch).latent_attention) shape.n_kv_heads = shape.n_heads;  // each head decompresses its own
  // --vocab supplies the size; --vocab-size then only has to agree with it.
  if (!a.vocab.empty() && !given("--vocab-size")) shape.n_vocab = 0;
  return shape;
}

int run(const SynthArgs& a, const CLI::App& app) {
  auto shape = requested_shape(a, app);
  if (!shape) return fail(shape.error());
  auto dtype = parse_dtype(a.dtype);
  if (!dtype) return fail(dtype.error());
  const SynthOptions opt{.shape = *shape, .dtype = *dtype, .seed = a.seed, .vocab_from = a.vocab};
  if (Status st = synth_model(opt, a.out); !st) return fail(st.error());
  return 0;
}

const bool synth_registered = register_command(
    "synth", "write a random-weight model of a real or custom shape", [](CLI::App& app) {
      auto a = std::make_shared<SynthArgs>();
      app.add_option("--like", a->like,
                     "shape preset: tinyllama-1.1b, stories110m, stories15m, qwen3-0.6b, gemma3-1b, gemma2-2b, phi4-mini, "
                     "mixtral-8x7b, qwen3-30b-a3b, olmoe-1b-7b, olmo2-1b, deepseek-v2-lite");
      app.add_option("--arch", a->arch,
                     "architecture of the tensors: " + supported_architectures() +
                         " (default: the preset's; e.g. --like qwen3-0.6b --arch llama is a Llama of Qwen3's "
                         "shape and bytes)");
      app.add_option("--vocab", a->vocab, "GGUF whose tokenizer (and vocab size) is copied");
      app.add_option("--dtype", a->dtype, "f32, f16 or bf16 (norms are always f32)");
      app.add_option("--seed", a->seed, "random seed");
      app.add_option("-o,--output", a->out, "output GGUF")->required();
      for (const auto& f : kIntFlags) app.add_option(f.name, a->shape.*f.field, f.help);
      for (const auto& f : kFloatFlags) app.add_option(f.name, a->shape.*f.field, f.help);
      app.add_option("--shared-experts", a->shared_experts, "shared experts, each --expert-ffn wide (deepseek2)");
      app.add_flag("--tied", a->shape.tied_output, "share the output head with the embedding");
      return [a, &app] { return run(*a, app); };
    });

}  // namespace
}  // namespace duet::cli
