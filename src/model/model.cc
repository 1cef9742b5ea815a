#include "model/model.h"

#include <filesystem>

#include "formats/hf_import.h"
#include "model/decoder.h"

namespace duet {

namespace {

// A folder is a Hugging Face checkpoint (formats/hf_import.h), served as
// GGUF without writing a file.
Result<GgufFile> open_model_file(const std::string& path, LoadMode mode) {
  if (!std::filesystem::is_directory(path)) return GgufFile::open(path, mode);
  DUET_ASSIGN(std::shared_ptr<HfCheckpoint> ck, HfCheckpoint::open(path));
  return hf_as_gguf(std::move(ck));
}

}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& path, LoadMode mode, Communicator* comm) {
  DUET_ASSIGN(GgufFile file, open_model_file(path, mode));
  DUET_ASSIGN(ModelConfig config, read_model_config(file));
  DUET_ASSIGN(std::unique_ptr<Tokenizer> tokenizer, Tokenizer::from_gguf(file));
  // Embedding tables may be padded past the vocabulary, never shorter.
  if (tokenizer->n_vocab() > config.n_vocab)
    return err(path, ": tokenizer has ", tokenizer->n_vocab(), " tokens but token_embd.weight has ",
               config.n_vocab, " rows");
  return load_decoder(std::move(file), std::move(config), std::move(tokenizer), comm);
}

}  // namespace duet
