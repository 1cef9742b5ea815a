// GGUF v3 writer. It checks what it is given (value ranges against their
// declared types, tensor shapes against byte counts) so that every file it
// writes is one the reader accepts.

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "core/keyed_list.h"
#include "core/remove_on_signal.h"
#include "formats/checked_math.h"
#include "formats/gguf.h"

namespace duet {

namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;

class Encoder {
 public:
  template <class T>
  void pod(T v) {
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));  // the host is little-endian like GGUF
  }
  void string(const std::string& s) {
    pod<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }

  // Writes the payload of `v` (not its type tag); `where` names it in errors.
  Status value(const GgufValue& v, const std::string& where, int depth) {
    switch (v.type) {
      case GgufType::UINT8: return unsigned_int<uint8_t>(v, where);
      case GgufType::UINT16: return unsigned_int<uint16_t>(v, where);
      case GgufType::UINT32: return unsigned_int<uint32_t>(v, where);
      case GgufType::UINT64: return unsigned_int<uint64_t>(v, where);
      case GgufType::INT8: return signed_int<int8_t>(v, where);
      case GgufType::INT16: return signed_int<int16_t>(v, where);
      case GgufType::INT32: return signed_int<int32_t>(v, where);
      case GgufType::INT64: return signed_int<int64_t>(v, where);
      case GgufType::FLOAT32: pod<float>(static_cast<float>(v.f64)); return {};
      case GgufType::FLOAT64: pod<double>(v.f64); return {};
      case GgufType::BOOL: pod<uint8_t>(v.b ? 1 : 0); return {};
      case GgufType::STRING: string(v.str); return {};
      case GgufType::ARRAY: return array(v, where, depth + 1);
    }
    return err(where, ": unknown value type ", static_cast<uint32_t>(v.type));
  }

  const std::vector<uint8_t>& bytes() const { return out_; }

 private:
  template <class T>
  Status unsigned_int(const GgufValue& v, const std::string& where) {
    if (v.u64 > std::numeric_limits<T>::max())
      return err(where, ": value ", v.u64, " does not fit in ", gguf_type_name(v.type));
    pod<T>(static_cast<T>(v.u64));
    return {};
  }
  template <class T>
  Status signed_int(const GgufValue& v, const std::string& where) {
    if (v.i64 < std::numeric_limits<T>::min() || v.i64 > std::numeric_limits<T>::max())
      return err(where, ": value ", v.i64, " does not fit in ", gguf_type_name(v.type));
    pod<T>(static_cast<T>(v.i64));
    return {};
  }

  Status array(const GgufValue& v, const std::string& where, int depth) {
    if (depth > kGgufMaxArrayDepth)
      return err(where, ": arrays nested deeper than ", kGgufMaxArrayDepth);
    pod<uint32_t>(static_cast<uint32_t>(v.elem_type));
    pod<uint64_t>(v.items.size());
    for (size_t i = 0; i < v.items.size(); ++i) {
      const GgufValue& item = v.items[i];
      if (item.type != v.elem_type)
        return err(where, ": item ", i, " has type ", gguf_type_name(item.type),
                   " in an array of ", gguf_type_name(v.elem_type));
      DUET_TRY(value(item, where, depth));
    }
    return {};
  }

  std::vector<uint8_t> out_;
};

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) { set_keyed(kv_, key, std::move(value)); }

Status GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> ne,
                              const void* data, size_t nbytes) {
  for (const Tensor& t : tensors_)
    if (t.name == name) return err("tensor '", name, "' added twice");
  if (ne.empty() || ne.size() > 4)
    return err("tensor '", name, "': ", ne.size(), " dimensions (must be 1..4)");
  for (size_t d = 0; d < ne.size(); ++d)
    if (ne[d] <= 0) return err("tensor '", name, "': dimension ", d, " is ", ne[d]);
  auto row = row_bytes(dtype, ne[0]);
  if (!row.ok()) return err("tensor '", name, "': ", row.error().message);
  const DTypeTraits& tr = traits(dtype);
  uint64_t expected = 0;
  bool fits = checked_mul(static_cast<uint64_t>(ne[0] / tr.block_elems),
                          static_cast<uint64_t>(tr.block_bytes), &expected);
  for (size_t d = 1; d < ne.size() && fits; ++d)
    fits = checked_mul(expected, static_cast<uint64_t>(ne[d]), &expected);
  if (!fits) return err("tensor '", name, "': shape overflows");
  if (expected != nbytes)
    return err("tensor '", name, "': shape needs ", expected, " bytes of ", dtype_name(dtype),
               " but ", nbytes, " were given");
  const auto* p = static_cast<const uint8_t*>(data);
  tensors_.push_back(Tensor{name, dtype, std::move(ne), std::vector<uint8_t>(p, p + nbytes)});
  return {};
}

Status GgufWriter::write(const std::string& path, const ProgressFn& progress) const {
  uint64_t alignment = kDefaultAlignment;
  Encoder header;
  header.pod<uint32_t>(0x46554747);  // "GGUF" read as a little-endian uint32
  header.pod<uint32_t>(kVersion);
  header.pod<uint64_t>(tensors_.size());
  header.pod<uint64_t>(kv_.size());
  for (const auto& [key, v] : kv_) {
    if (key.empty()) return err(path, ": empty metadata key");
    if (key == "general.alignment") {
      if (v.type != GgufType::UINT32 || v.u64 == 0 || (v.u64 & (v.u64 - 1)) != 0)
        return err(path, ": general.alignment must be a u32 power of two");
      alignment = v.u64;
    }
    header.string(key);
    header.pod<uint32_t>(static_cast<uint32_t>(v.type));
    DUET_TRY(header.value(v, path + ": key '" + key + "'", 0));
  }

  // Offsets are relative to the data section; each tensor starts aligned.
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const Tensor& t : tensors_) {
    offsets.push_back(offset);
    header.string(t.name);
    header.pod<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) header.pod<uint64_t>(static_cast<uint64_t>(n));
    header.pod<uint32_t>(static_cast<uint32_t>(t.dtype));
    header.pod<uint64_t>(offset);
    if (!align_up(offset + t.data.size(), alignment, &offset))
      return err(path, ": tensor data too large");
  }

  remove_stale_partials(path);
  const std::string tmp = partial_path(path);
  const RemoveOnSignal interrupted(tmp);
  Status st = write_body(tmp, path, header.bytes(), alignment, progress);
  if (st && std::rename(tmp.c_str(), path.c_str()) != 0) st = err(path, ": cannot rename ", tmp, " into place: ", std::strerror(errno));
  if (!st) std::remove(tmp.c_str());
  return st;
}

Status GgufWriter::write_body(const std::string& tmp, const std::string& path, const std::vector<uint8_t>& header,
                              uint64_t alignment, const ProgressFn& progress) const {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(tmp.c_str(), "wb"));
  if (!f) return err(path, ": cannot create: ", std::strerror(errno));
  const std::vector<uint8_t> zeros(alignment, 0);
  auto put = [&](const void* p, size_t n) { return std::fwrite(p, 1, n, f.get()) == n; };
  auto pad_to = [&](uint64_t written) {
    const uint64_t pad = (alignment - written % alignment) % alignment;
    return put(zeros.data(), pad);
  };

  uint64_t total = 0, done = 0;
  for (const Tensor& t : tensors_) total += t.data.size();
  bool ok = put(header.data(), header.size()) && pad_to(header.size());
  for (const Tensor& t : tensors_) {
    if (!ok) break;
    ok = put(t.data.data(), t.data.size()) && pad_to(t.data.size());
    done += t.data.size();
    if (progress) progress(done, total);
  }
  if (!ok) return err(path, ": write failed: ", std::strerror(errno));
  if (std::fclose(f.release()) != 0) return err(path, ": close failed: ", std::strerror(errno));
  return {};
}

}  // namespace duet
