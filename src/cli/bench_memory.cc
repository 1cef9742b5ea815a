#include "cli/bench_memory.h"

#include <cstdio>

#include "core/memory_info.h"

namespace duet::cli {

nlohmann::json memory_report(const Model& m, const Engine& engine, bool no_mmap) {
  size_t weights = 0;
  for (const TensorView& t : m.file().tensors()) weights += t.nbytes;
  const Model::WeightCopies copies = m.weight_copies();
  // A --no-mmap copy keeps the bytes packing replaced; a mapping gives them back.
  const size_t replaced = no_mmap ? 0 : copies.file_bytes_replaced;
  const size_t kv = engine.cache().bytes_total();
  const double expected = static_cast<double>(weights - replaced + copies.bytes + kv);
  const ResidentMemory rss = resident_memory();
  return {{"weight_bytes", weights},      {"packed_bytes", copies.bytes},
          {"packed_replaced_bytes", replaced}, {"kv_bytes", kv},
          {"expected_bytes", expected},   {"rss_bytes", rss.total},
          {"rss_anon_bytes", rss.anon},   {"rss_file_bytes", rss.file},
          {"rss_over_expected", expected > 0 ? static_cast<double>(rss.total) / expected : 0.0}};
}

std::string memory_line(const std::string& name, const nlohmann::json& j) {
  const auto mib = [&](const char* key) { return j[key].get<double>() / (1 << 20); };
  char line[512];
  std::snprintf(line, sizeof line,
                "memory %s: resident %.0f MiB (file-backed %.0f, anonymous %.0f) = %.2fx the %.0f MiB expected "
                "(weights %.0f, of which %.0f replaced by %.0f packed; KV %.0f)\n",
                name.c_str(), mib("rss_bytes"), mib("rss_file_bytes"), mib("rss_anon_bytes"),
                j["rss_over_expected"].get<double>(), mib("expected_bytes"), mib("weight_bytes"),
                mib("packed_replaced_bytes"), mib("packed_bytes"), mib("kv_bytes"));
  return line;
}

}  // namespace duet::cli
