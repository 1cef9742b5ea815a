// GGUF v2/v3: the native model format. The reader validates everything it
// exposes (counts, string lengths, tensor shapes, offsets and sizes against
// the file) and returns views into the memory-mapped file; nothing is copied.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/progress_fn.h"
#include "core/tensor.h"

namespace duet {

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

// Arrays nest at most this deep, in files read and written: no converter
// goes deeper, and deeper nesting would only serve to exhaust the stack.
inline constexpr int kGgufMaxArrayDepth = 8;

std::string_view gguf_type_name(GgufType t);
bool is_integer_type(GgufType t);

// One metadata value. Scalars of every integer width are widened into i64/u64
// (both filled when representable), floats into f64. An array keeps its
// element type and its items (arrays may nest).
struct GgufValue {
  GgufType type = GgufType::UINT32;
  uint64_t u64 = 0;
  int64_t i64 = 0;
  double f64 = 0;
  bool b = false;
  std::string str;
  GgufType elem_type = GgufType::UINT32;  // for ARRAY
  std::vector<GgufValue> items;           // for ARRAY

  bool is_integer() const;
  bool is_signed() const;  // INT8..INT64: i64 holds the value, u64 is 0 if negative
  bool is_float() const { return type == GgufType::FLOAT32 || type == GgufType::FLOAT64; }

  static GgufValue of_u8(uint8_t v);
  static GgufValue of_i8(int8_t v);
  static GgufValue of_u16(uint16_t v);
  static GgufValue of_i16(int16_t v);
  static GgufValue of_u32(uint32_t v);
  static GgufValue of_i32(int32_t v);
  static GgufValue of_u64(uint64_t v);
  static GgufValue of_i64(int64_t v);
  static GgufValue of_f32(float v);
  static GgufValue of_f64(double v);
  static GgufValue of_bool(bool v);
  static GgufValue of_string(std::string v);
  static GgufValue of_strings(std::vector<std::string> v);
  static GgufValue of_f32s(const std::vector<float>& v);
  static GgufValue of_i32s(const std::vector<int32_t>& v);
  // An array of items that each have type elem_type (ARRAY items may nest).
  static GgufValue of_array(GgufType elem_type, std::vector<GgufValue> items);
};

class GgufFile {
 public:
  // kRead copies the file into (huge-page) memory instead of mapping it.
  static Result<GgufFile> open(const std::string& path, LoadMode mode = LoadMode::kMap);
  // Metadata and tensor views whose bytes live elsewhere (a Hugging Face
  // folder's mapped safetensors, rows an import rearranged): the same
  // interface as a file, so models and tokenizers load from either. `backing`
  // owns the memory the views point into and lives as long as this object.
  static Result<GgufFile> assemble(std::string path,
                                   std::vector<std::pair<std::string, GgufValue>> kv,
                                   std::vector<TensorView> tensors,
                                   std::shared_ptr<const void> backing);

  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  const std::string& path() const { return path_; }
  size_t file_size() const { return file_.size(); }
  // Lets the kernel reclaim a tensor's pages when they are mapped from the
  // file (see MappedFile::drop_pages); reading the tensor later still works.
  void drop_pages(const TensorView& t) const { file_.drop_pages(t.data, t.nbytes); }
  size_t data_offset() const { return data_offset_; }

  // Keys in file order.
  const std::vector<std::string>& keys() const { return key_order_; }
  const GgufValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }

  // Typed getters: an error names the key and what was wrong (missing, type).
  Result<uint64_t> get_uint(const std::string& key) const;  // any integer type, >= 0
  Result<double> get_float(const std::string& key) const;   // any float or integer type
  Result<std::string> get_string(const std::string& key) const;
  Result<bool> get_bool(const std::string& key) const;
  Result<std::vector<std::string>> get_strings(const std::string& key) const;
  Result<std::vector<float>> get_floats(const std::string& key) const;
  Result<std::vector<int32_t>> get_ints(const std::string& key) const;

  // Optional variants: the default when absent, an error only for a wrong type.
  Result<uint64_t> get_uint_or(const std::string& key, uint64_t fallback) const;
  Result<double> get_float_or(const std::string& key, double fallback) const;

  // Tensors in file order; data points into the mapping.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* tensor(const std::string& name) const;
  // Where a tensor's data starts in the file (data_offset() + its own offset).
  size_t file_offset(const TensorView& t) const {
    return static_cast<size_t>(static_cast<const uint8_t*>(t.data) - file_.data());
  }

 private:
  MappedFile file_;
  std::string path_;
  std::shared_ptr<const void> backing_;  // for assembled files
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<std::string> key_order_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t> tensor_index_;
  friend class GgufReader;
};

// Builds a GGUF v3 file: metadata in insertion order, then tensor infos, then
// tensor data padded to general.alignment (default 32).
class GgufWriter {
 public:
  void set(const std::string& key, GgufValue value);  // replaces an existing key
  // Adds a tensor; `data` is copied. ne follows ggml order (ne[0] = row length).
  Status add_tensor(const std::string& name, DType dtype, std::vector<int64_t> ne,
                    const void* data, size_t nbytes);
  // Writes the file to a temporary name beside `path` and renames it into
  // place once complete, so `path` is never a half-written model (an
  // interrupted convert or quantize leaves at most the temporary behind).
  // `progress` (may be empty) hears the tensor bytes written.
  Status write(const std::string& path, const ProgressFn& progress = {}) const;
  // Metadata set so far, in insertion order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }

 private:
  Status write_body(const std::string& tmp, const std::string& path, const std::vector<uint8_t>& header,
                    uint64_t alignment, const ProgressFn& progress) const;

  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace duet
