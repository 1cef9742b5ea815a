// `duet synth`: writes a random-weight llama GGUF of a preset or custom shape.
#include <memory>
#include <string>

#include "cli/command.h"
#include "formats/llama_synth.h"

namespace duet::cli {
namespace {

struct SynthArgs {
  std::string like;
  std::string vocab;
  std::string dtype = "f32";
  uint64_t seed = 0;
  std::string out;
  LlamaShape shape;  // explicit flags; each applied only when given
};

const bool registered = register_command(
    "synth", "write a random-weight llama model of a real or custom shape", [](CLI::App& app) {
      auto a = std::make_shared<SynthArgs>();
      app.add_option("--like", a->like, "shape preset: tinyllama-1.1b, stories110m, stories15m");
      app.add_option("--vocab", a->vocab, "GGUF whose tokenizer (and vocab size) is copied");
      app.add_option("--dtype", a->dtype, "f32, f16 or bf16 (norms are always f32)");
      app.add_option("--seed", a->seed, "random seed");
      app.add_option("-o,--output", a->out, "output GGUF")->required();
      LlamaShape& s = a->shape;
      CLI::Option* dim = app.add_option("--dim", s.dim, "embedding length");
      CLI::Option* ffn = app.add_option("--ffn", s.ffn, "feed-forward length");
      CLI::Option* layers = app.add_option("--layers", s.layers, "blocks");
      CLI::Option* heads = app.add_option("--heads", s.heads, "query heads");
      CLI::Option* kv = app.add_option("--kv-heads", s.kv_heads, "key/value heads (default with --heads: as many)");
      CLI::Option* hd = app.add_option("--head-dim", s.head_dim, "head dimension (default dim/heads)");
      CLI::Option* vs = app.add_option("--vocab-size", s.vocab_size, "vocabulary size");
      CLI::Option* ctx = app.add_option("--ctx", s.ctx, "context length");
      CLI::Option* rope = app.add_option("--rope-base", s.rope_base, "RoPE frequency base");
      CLI::Option* eps = app.add_option("--rms-eps", s.rms_eps, "RMSNorm epsilon");
      CLI::Option* tied = app.add_flag("--tied", s.tied, "share the output head with the embedding");
      return [=]() -> int {
        LlamaShape shape;
        std::string name = "synth-custom";
        if (!a->like.empty()) {
          auto preset = llama_preset(a->like);
          if (!preset) return fail(preset.error());
          shape = *preset;
          name = "synth-" + a->like;
        } else {
          shape.ctx = 2048;  // a custom shape need not name every field
        }
        const LlamaShape& g = a->shape;
        if (*dim) shape.dim = g.dim;
        if (*ffn) shape.ffn = g.ffn;
        if (*layers) shape.layers = g.layers;
        if (*heads) shape.heads = g.heads;
        if (*kv) shape.kv_heads = g.kv_heads;
        else if (*heads) shape.kv_heads = g.heads;  // --heads alone means no GQA
        if (*hd) shape.head_dim = g.head_dim;
        if (*ctx) shape.ctx = g.ctx;
        if (*rope) shape.rope_base = g.rope_base;
        if (*eps) shape.rms_eps = g.rms_eps;
        if (*tied) shape.tied = g.tied;
        // --vocab supplies the size; --vocab-size then only has to agree with it.
        if (*vs) shape.vocab_size = g.vocab_size;
        else if (!a->vocab.empty()) shape.vocab_size = 0;

        auto dtype = parse_dtype(a->dtype);
        if (!dtype) return fail(dtype.error());
        SynthOptions opt{.name = name, .shape = shape, .dtype = *dtype, .seed = a->seed,
                         .vocab_from = a->vocab};
        if (Status st = synth_llama(opt, a->out); !st) return fail(st.error());
        return 0;
      };
    });

}  // namespace
}  // namespace duet::cli
