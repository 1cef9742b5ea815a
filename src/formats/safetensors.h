// safetensors: an 8-byte little-endian header length, a JSON header naming
// each tensor's dtype, shape and [begin, end) byte range in the data region
// that follows, then the raw data. The reader validates the whole header
// before exposing anything; tensors are views into the memory-mapped file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"

namespace duet {

struct SafetensorsTensor {
  std::string name;
  // F32, F16, BF16; I32 (the packed nibbles of GPTQ/AWQ); I8 for F8_E4M3,
  // which GGUF has no type for: its bytes are E4M3 floats, and fp8_e4m3 says so.
  DType dtype = DType::F32;
  bool fp8_e4m3 = false;
  std::vector<int64_t> shape;    // row-major as stored: shape.back() is contiguous
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  int64_t elements() const;
};

class SafetensorsFile {
 public:
  // A header larger than this is refused before it is parsed.
  static constexpr uint64_t kMaxHeaderBytes = 100u << 20;

  static Result<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // Tensors in header order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;

 private:
  Status parse();

  MappedFile file_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;
};

// The weights of a Hugging Face model folder: model.safetensors, or the shards
// listed by model.safetensors.index.json (every listed tensor must be found in
// the shard the index names; a name in two shards is an error).
class SafetensorsCheckpoint {
 public:
  static Result<SafetensorsCheckpoint> open_dir(const std::string& dir);

  const SafetensorsTensor* find(const std::string& name) const;
  // Every tensor of every shard, shard by shard in header order.
  std::vector<const SafetensorsTensor*> tensors() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, const SafetensorsTensor*> index_;
};

}  // namespace duet
