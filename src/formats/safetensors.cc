#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/json_parse.h"
#include "formats/checked_math.h"

namespace duet {
namespace {

using nlohmann::json;

// Far beyond any real tensor's rank; keeps hostile shapes cheap to check.
constexpr size_t kMaxRank = 8;

Result<DType> parse_st_dtype(const std::string& path, const std::string& name,
                             const std::string& dtype) {
  if (dtype == "F32") return DType::F32;
  if (dtype == "F16") return DType::F16;
  if (dtype == "BF16") return DType::BF16;
  if (dtype == "I32") return DType::I32;
  if (dtype == "F8_E4M3") return DType::I8;  // one byte each; the caller marks it fp8_e4m3
  return err(path, ": tensor '", name, "' has dtype ", dtype,
             " which duet does not read (supported: F32, F16, BF16, I32, F8_E4M3)");
}

Result<uint64_t> get_u64(const json& v, const std::string& path, const std::string& what) {
  if (!v.is_number_unsigned()) {
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<uint64_t>();
    return err(path, ": ", what, " must be a non-negative integer, not ", v.dump());
  }
  return v.get<uint64_t>();
}

Result<SafetensorsTensor> parse_entry(const std::string& path, const std::string& name,
                                      const json& e, uint64_t data_size, uint64_t* begin) {
  if (!e.is_object()) return err(path, ": header entry '", name, "' is not an object");
  const auto dtype_it = e.find("dtype");
  const auto shape_it = e.find("shape");
  const auto offs_it = e.find("data_offsets");
  if (dtype_it == e.end() || !dtype_it->is_string())
    return err(path, ": tensor '", name, "' has no dtype string");
  if (shape_it == e.end() || !shape_it->is_array())
    return err(path, ": tensor '", name, "' has no shape array");
  if (offs_it == e.end() || !offs_it->is_array() || offs_it->size() != 2)
    return err(path, ": tensor '", name, "' needs data_offsets [begin, end]");

  SafetensorsTensor t;
  t.name = name;
  DUET_ASSIGN(t.dtype, parse_st_dtype(path, name, dtype_it->get<std::string>()));
  t.fp8_e4m3 = *dtype_it == "F8_E4M3";
  if (shape_it->size() > kMaxRank)
    return err(path, ": tensor '", name, "' has rank ", shape_it->size(), " (limit ", kMaxRank, ")");
  uint64_t elements = 1;
  for (const json& d : *shape_it) {
    DUET_ASSIGN(uint64_t n, get_u64(d, path, "shape of tensor '" + name + "'"));
    if (!checked_mul(elements, n, &elements) || elements > (1ull << 62))
      return err(path, ": tensor '", name, "' shape ", shape_it->dump(), " overflows");
    t.shape.push_back(static_cast<int64_t>(n));
  }
  DUET_ASSIGN(uint64_t b, get_u64((*offs_it)[0], path, "data_offsets of '" + name + "'"));
  DUET_ASSIGN(uint64_t end, get_u64((*offs_it)[1], path, "data_offsets of '" + name + "'"));
  if (b > end || end > data_size)
    return err(path, ": tensor '", name, "' data_offsets [", b, ", ", end,
               ") are outside the data region of ", data_size, " bytes");
  uint64_t expected = 0;
  if (!checked_mul(elements, traits(t.dtype).block_bytes, &expected) || expected != end - b)
    return err(path, ": tensor '", name, "' spans ", end - b, " bytes but shape ", shape_it->dump(),
               " of ", dtype_it->get<std::string>(), " needs ", elements, " elements of ",
               traits(t.dtype).block_bytes, " bytes");
  t.nbytes = static_cast<size_t>(end - b);
  *begin = b;
  return t;
}

}  // namespace

int64_t SafetensorsTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  DUET_ASSIGN(f.file_, MappedFile::open(path));
  DUET_TRY(f.parse());
  return f;
}

Status SafetensorsFile::parse() {
  const std::string& path = file_.path();
  const uint64_t size = file_.size();
  if (size < 8) return err(path, ": ", size, " bytes is too short for a safetensors header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file_.data()[i];
  if (header_len > size - 8)
    return err(path, ": header length ", header_len, " exceeds the ", size - 8,
               " bytes after the length field");
  if (header_len > kMaxHeaderBytes)
    return err(path, ": header length ", header_len, " exceeds the limit of ", kMaxHeaderBytes);
  const char* text = reinterpret_cast<const char*>(file_.data() + 8);
  auto parsed = parse_json(std::string_view(text, header_len));
  if (!parsed.ok()) return err(path, ": header is ", parsed.error().message);
  const json& header = *parsed;
  if (!header.is_object()) return err(path, ": header is not a JSON object");

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;
  std::vector<std::pair<uint64_t, size_t>> ranges;  // (begin, tensor index), to find overlaps
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return err(path, ": __metadata__ is not an object");
      continue;
    }
    uint64_t begin = 0;
    DUET_ASSIGN(SafetensorsTensor t, parse_entry(path, name, entry, data_size, &begin));
    t.data = file_.data() + data_start + begin;
    ranges.emplace_back(begin, tensors_.size());
    index_.emplace(name, tensors_.size());  // JSON object keys are already unique
    tensors_.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    const SafetensorsTensor& prev = tensors_[ranges[i - 1].second];
    const uint64_t prev_end = ranges[i - 1].first + prev.nbytes;
    if (ranges[i].first < prev_end)
      return err(path, ": tensors '", prev.name, "' and '", tensors_[ranges[i].second].name,
                 "' overlap (bytes ", ranges[i].first, "..", prev_end, " of the data region)");
  }
  return {};
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::open_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  SafetensorsCheckpoint ck;
  ck.dir_ = dir;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single = fs::path(dir) / "model.safetensors";
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  std::vector<std::string> shard_names;
  if (fs::exists(index_path)) {
    std::ifstream in(index_path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const auto parsed = parse_json(ss.str());
    const json index = parsed.ok() ? *parsed : json();
    if (!index.is_object())
      return err(index_path.string(), ": not a valid JSON object");
    const auto wm = index.find("weight_map");
    if (wm == index.end() || !wm->is_object())
      return err(index_path.string(), ": no weight_map object");
    std::set<std::string> seen;
    for (const auto& [name, shard] : wm->items()) {
      if (!shard.is_string()) return err(index_path.string(), ": weight_map['", name, "'] is not a string");
      const std::string s = shard.get<std::string>();
      // Shards must be plain file names inside the folder.
      if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
        return err(index_path.string(), ": shard name '", s, "' is not a file in the folder");
      weight_map[name] = s;
      if (seen.insert(s).second) shard_names.push_back(s);
    }
    if (shard_names.empty()) return err(index_path.string(), ": weight_map is empty");
  } else if (fs::exists(single)) {
    shard_names.push_back("model.safetensors");
  } else {
    return err(dir, ": no model.safetensors or model.safetensors.index.json");
  }

  ck.shards_.reserve(shard_names.size());
  for (const std::string& s : shard_names) {
    DUET_ASSIGN(SafetensorsFile f, SafetensorsFile::open((fs::path(dir) / s).string()));
    ck.shards_.push_back(std::move(f));
  }
  std::map<std::string, const std::string*> holder;  // tensor -> the shard that holds it
  for (size_t i = 0; i < ck.shards_.size(); ++i) {
    for (const SafetensorsTensor& t : ck.shards_[i].tensors()) {
      if (!ck.index_.emplace(t.name, &t).second)
        return err(dir, ": tensor '", t.name, "' appears in more than one shard (again in ",
                   ck.shards_[i].path(), ")");
      holder[t.name] = &shard_names[i];
    }
  }
  for (const auto& [name, shard] : weight_map) {
    const auto it = holder.find(name);
    if (it == holder.end() || *it->second != shard)
      return err(index_path.string(), ": tensor '", name, "' is listed in ", shard,
                 it == holder.end() ? " but no shard holds it" : " but is found in " + *it->second);
  }
  return ck;
}

const SafetensorsTensor* SafetensorsCheckpoint::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

std::vector<const SafetensorsTensor*> SafetensorsCheckpoint::tensors() const {
  std::vector<const SafetensorsTensor*> out;
  for (const SafetensorsFile& f : shards_)
    for (const SafetensorsTensor& t : f.tensors()) out.push_back(&t);
  return out;
}

}  // namespace duet
