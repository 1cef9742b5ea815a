// `duet convert`: other formats to GGUF.
//   --from llama2c  a llama2.c checkpoint (--model X.bin) with its tokenizer
//                   (--tokenizer tokenizer.bin, or a SentencePiece .model)
//   --from spm      a SentencePiece tokenizer.model, as a vocab-only GGUF
//                   (--vocab-only) or with a llama2.c checkpoint (--model)
//   --from hf       a Hugging Face model folder (positional MODEL_DIR or
//                   --model): config.json, safetensors, tokenizer; --dtype
//                   f32|f16|bf16 for the matrices (default: as stored)
// A new source format is one more entry in kSources and one more branch in
// convert().
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cli/command.h"
#include "cli/progress.h"
#include "formats/gguf.h"
#include "formats/hf_import.h"
#include "formats/llama2c.h"
#include "formats/llama_import.h"
#include "formats/spm_model.h"

namespace duet::cli {
namespace {

constexpr const char* kSources = "llama2c, spm, hf";

struct ConvertArgs {
  std::string from;
  std::string model;
  std::string tokenizer;
  std::string output;
  std::string name;
  std::string dtype;
  bool vocab_only = false;
};

bool is_spm_model_file(const std::string& path) {
  return std::filesystem::path(path).extension() == ".model";
}

// tokenizer.bin is llama2.c's; a .model file is SentencePiece's protobuf.
// The extension decides: the two formats cannot be told apart by content
// (a tokenizer.bin with max_token_length 10 starts with a valid protobuf tag).
Result<LlamaVocab> load_vocab(const std::string& path, bool spm) {
  if (spm) {
    DUET_ASSIGN(const SpmModel m, read_spm_model(path));
    return vocab_from_spm(m, path);
  }
  DUET_ASSIGN(const Llama2cTokenizer t, read_llama2c_tokenizer(path));
  return vocab_from_llama2c(t);
}

// One line on what was written, the same for every source.
void print_written(const std::string& path, const ModelConfig& c, std::string_view source,
                   std::string_view dtypes) {
  std::printf("wrote %s: %s (%.*s), dim %d, %d layers, %d heads (%d kv, head_dim %d), vocab %d, "
              "context %d, %.*s%s\n",
              path.c_str(), c.arch_name(), static_cast<int>(source.size()), source.data(), c.dim,
              c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.n_vocab, c.ctx_len,
              static_cast<int>(dtypes.size()), dtypes.data(), c.tied_output ? ", tied output" : "");
}

std::string stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

Status convert_hf(const ConvertArgs& a) {
  if (a.model.empty()) return err("--from hf needs the model folder (MODEL_DIR or --model)");
  if (a.vocab_only || !a.tokenizer.empty() || !a.name.empty())
    return err("--from hf takes its tokenizer and name from the folder; drop --vocab-only, --tokenizer, --name");
  std::optional<DType> dtype;
  if (!a.dtype.empty()) {
    DUET_ASSIGN(const DType t, parse_dtype(a.dtype));
    if (t != DType::F32 && t != DType::F16 && t != DType::BF16)
      return err("--dtype ", a.dtype, ": --from hf writes f32, f16 or bf16 (quantize the result with duet quantize)");
    dtype = t;
  }
  DUET_ASSIGN(const std::shared_ptr<HfCheckpoint> ck, HfCheckpoint::open(a.model));
  DUET_ASSIGN(const GgufWriter w, hf_to_gguf(*ck, dtype, progress_bar_fn("convert", "tensors")));
  DUET_TRY(w.write(a.output, progress_bar_fn("write", "MiB", 1.0 / (1 << 20))));
  const HfQuantization& q = ck->config().quant;
  // A quantized folder's layers are repacked, not kept as stored; say which way.
  const std::string repacked = q.name + " layers repacked to Q4_0/Q4_1/Q8_0";
  print_written(a.output, ck->config().model, ck->config().hf_architecture,
                dtype ? dtype_name(*dtype)
                      : q.method == HfQuantMethod::kNone ? std::string_view("dtypes as stored") : repacked);
  return {};
}

Status convert(const ConvertArgs& a) {
  if (a.from == "hf") return convert_hf(a);
  if (!a.dtype.empty()) return err("--dtype applies to --from hf only");
  bool spm_tokenizer = false;
  if (a.tokenizer.empty()) return err("--from ", a.from, " needs --tokenizer");
  if (a.from == "llama2c") {
    spm_tokenizer = is_spm_model_file(a.tokenizer);
    if (a.model.empty() && !a.vocab_only)
      return err("--from llama2c needs --model CHECKPOINT.bin (or --vocab-only)");
  } else if (a.from == "spm") {
    spm_tokenizer = true;
    if (a.model.empty() && !a.vocab_only)
      return err("--from spm needs --vocab-only, or --model CHECKPOINT.bin (a llama2.c checkpoint)");
  } else {
    return err("unknown --from '", a.from, "' (supported: ", kSources, ")");
  }
  if (a.vocab_only && !a.model.empty()) return err("--vocab-only writes no tensors; drop --model");

  DUET_ASSIGN(const LlamaVocab vocab, load_vocab(a.tokenizer, spm_tokenizer));
  if (a.vocab_only) {
    const GgufWriter w = vocab_only_gguf(vocab, a.name.empty() ? stem(a.tokenizer) : a.name);
    DUET_TRY(w.write(a.output));
    std::printf("wrote %s: vocab only, %zu tokens\n", a.output.c_str(), vocab.tokens.size());
    return {};
  }
  DUET_ASSIGN(const Llama2cCheckpoint ck, read_llama2c_checkpoint(a.model));
  DUET_ASSIGN(const GgufWriter w, llama2c_gguf(ck, vocab, a.name.empty() ? stem(a.model) : a.name));
  DUET_TRY(w.write(a.output, progress_bar_fn("write", "MiB", 1.0 / (1 << 20))));
  print_written(a.output, ck.config, "llama2.c", "F32");
  return {};
}

const bool convert_registered = register_command(
    "convert", "Convert a Hugging Face folder, llama2.c checkpoint or SentencePiece tokenizer to GGUF",
    [](CLI::App& app) {
      auto a = std::make_shared<ConvertArgs>();
      app.add_option("--from", a->from, std::string("source format: ") + kSources)->required();
      app.add_option("--model,model", a->model,
                     "checkpoint to convert (llama2.c .bin, or the Hugging Face folder)");
      app.add_option("--tokenizer", a->tokenizer, "tokenizer.bin (llama2.c) or tokenizer.model (SentencePiece)");
      app.add_option("--dtype", a->dtype, "--from hf: f32, f16 or bf16 for the matrices (default: as stored)");
      app.add_option("-o,--output", a->output, "GGUF file to write")->required();
      app.add_option("--name", a->name, "general.name (default: the input file's stem)");
      app.add_flag("--vocab-only", a->vocab_only, "write only the tokenizer metadata, no tensors");
      return [a]() -> int {
        const Status s = convert(*a);
        return s.ok() ? 0 : fail(s.error());
      };
    });

}  // namespace
}  // namespace duet::cli
