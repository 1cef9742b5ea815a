// Models by name, the way llama.cpp's -hf and Ollama's pull find them: a
// GGUF file in a Hugging Face repository, chosen by its quant type, fetched
// once into a cache directory and reused after. The endpoint comes from
// HF_ENDPOINT like the Hugging Face tools (tests point it at a local server
// that answers the hub's file listing and resolve URLs), a token from
// HF_TOKEN.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace duet::cli {

struct HubFile {
  std::string path;    // inside the repository
  int64_t size = 0;
  std::string sha256;  // of the content, from the listing (LFS files); empty if unknown
};

struct ModelRef {
  std::string repo;   // owner/name
  std::string quant;  // e.g. Q4_K_M
};

// "owner/name[:QUANT]"; QUANT defaults to Q4_K_M.
Result<ModelRef> parse_model_ref(const std::string& text);

// The quant type a GGUF file's name carries ("Q4_K_M", "IQ4_XS", "F16"), or
// "" when it names none.
std::string quant_in_name(const std::string& file_name);

// The one GGUF whose name carries `quant` (case-insensitive). A missing quant
// is an error that lists the ones the repository has.
Result<HubFile> pick_gguf(const std::vector<HubFile>& files, const ModelRef& ref);

struct HubConfig {
  std::string endpoint;   // scheme://host[:port], no trailing slash
  std::string token;      // bearer token, may be empty
  std::string cache_dir;  // where pulled files live
};

// HF_ENDPOINT (default https://huggingface.co), HF_TOKEN, and DUET_CACHE
// (default ~/.cache/duet).
HubConfig hub_config_from_env();

// The cached path of `ref`, downloading it first unless a complete copy is
// already there (with resume of a partial one and the checksum checked);
// progress on stderr when it is a terminal.
Result<std::string> pull_model(const HubConfig& hub, const ModelRef& ref);

}  // namespace duet::cli
