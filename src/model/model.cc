#include "model/model.h"

#include "model/llama.h"

namespace duet {

Result<std::unique_ptr<Model>> Model::load(const std::string& path) {
  DUET_ASSIGN(GgufFile file, GgufFile::open(path));
  DUET_ASSIGN(ModelConfig config, read_model_config(file));
  DUET_ASSIGN(std::unique_ptr<Tokenizer> tokenizer, Tokenizer::from_gguf(file));
  // Embedding tables may be padded past the vocabulary, never shorter.
  if (tokenizer->n_vocab() > config.n_vocab)
    return err(path, ": tokenizer has ", tokenizer->n_vocab(), " tokens but token_embd.weight has ",
               config.n_vocab, " rows");
  return load_llama(std::move(file), std::move(config), std::move(tokenizer));
}

}  // namespace duet
