#include "formats/type_mix.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace duet {

std::vector<TypeShare> type_mix(std::span<const TensorView> tensors) {
  std::map<uint32_t, TypeShare> by_type;
  for (const TensorView& t : tensors) {
    TypeShare& s = by_type.try_emplace(static_cast<uint32_t>(t.dtype), TypeShare{t.dtype}).first->second;
    ++s.tensors;
    s.bytes += t.nbytes;
  }
  std::vector<TypeShare> mix;
  for (const auto& [id, s] : by_type) mix.push_back(s);
  std::stable_sort(mix.begin(), mix.end(), [](const TypeShare& a, const TypeShare& b) { return a.bytes > b.bytes; });
  return mix;
}

std::string format_type_mix(const std::vector<TypeShare>& mix) {
  uint64_t total = 0;
  for (const TypeShare& s : mix) total += s.bytes;
  std::string out;
  for (const TypeShare& s : mix) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s%s %lld tensor%s %.2f MiB (%.0f%%)", out.empty() ? "" : ", ",
                  std::string(dtype_name(s.type)).c_str(), static_cast<long long>(s.tensors), s.tensors == 1 ? "" : "s",
                  static_cast<double>(s.bytes) / (1024.0 * 1024.0),
                  total ? 100.0 * static_cast<double>(s.bytes) / static_cast<double>(total) : 0.0);
    out += buf;
  }
  return out;
}

}  // namespace duet
