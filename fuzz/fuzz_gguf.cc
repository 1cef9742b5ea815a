// A GGUF file from untrusted bytes, loaded as `duet run` loads one up to the
// weights: the header, metadata and tensor table (GgufFile::open), every key
// through the typed getters, the model's hyper-parameters and its tokenizer,
// which then encodes and decodes a short text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/gguf.h"
#include "formats/model_config.h"
#include "memfd_file.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static duet::fuzz::MemFile file;
  auto gguf = duet::GgufFile::open(file.write(data, size));
  if (!gguf) return 0;
  const duet::GgufFile& f = *gguf;
  for (const std::string& key : f.keys()) {
    (void)f.get_uint(key);
    (void)f.get_float(key);
    (void)f.get_string(key);
    (void)f.get_bool(key);
    (void)f.get_strings(key);
    (void)f.get_floats(key);
    (void)f.get_ints(key);
  }
  for (const duet::TensorView& t : f.tensors()) (void)f.tensor(t.name);
  (void)duet::read_model_config(f);
  auto tok = duet::Tokenizer::from_gguf(f);
  if (!tok) return 0;
  const std::string text = "Hello <s> world\n\t 123 ünï 🦙 </s><|im_start|>";
  for (bool special : {false, true}) {
    const auto ids = (*tok)->encode(text, /*add_bos=*/true, special);
    (void)(*tok)->decode(ids);
    duet::StreamDetokenizer stream(**tok);
    for (int32_t id : ids) (void)stream.push(id);
    (void)stream.flush();
  }
  return 0;
}
