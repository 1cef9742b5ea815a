// `duet inspect FILE`: what a GGUF file holds — header, metadata, and a table
// of tensors — so a user can see why a model loads (or does not) without
// another tool. `duet inspect --kernels`: which kernel this CPU runs for each
// operation and type (kernels/registry.h), so a slow run can be told from a
// slow machine.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include "cli/command.h"
#include "formats/gguf.h"
#include "formats/type_mix.h"
#include "kernels/registry.h"

namespace duet::cli {
namespace {

constexpr size_t kMaxStringChars = 64;  // longer strings (chat templates) are cut
constexpr size_t kArrayPreview = 6;     // items shown of an array

// A string as one printable line: control and non-ASCII bytes escaped.
std::string quote(const std::string& s) {
  std::string out = "\"";
  size_t n = std::min(s.size(), kMaxStringChars);
  // Cut at a character boundary, not inside a UTF-8 sequence.
  while (n < s.size() && n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);  // UTF-8 passes through for the terminal to show
    }
  }
  out += '"';
  if (s.size() > n) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string format_value(const GgufValue& v) {
  std::ostringstream os;
  switch (v.type) {
    case GgufType::STRING: return quote(v.str);
    case GgufType::BOOL: return v.b ? "true" : "false";
    case GgufType::FLOAT32: os.precision(9); os << v.f64; return os.str();
    case GgufType::FLOAT64: os.precision(17); os << v.f64; return os.str();
    case GgufType::ARRAY: {
      os << "[" << gguf_type_name(v.elem_type) << " x " << v.items.size() << "]";
      const size_t shown = std::min(v.items.size(), kArrayPreview);
      for (size_t i = 0; i < shown; ++i) os << (i ? ", " : " ") << format_value(v.items[i]);
      if (shown < v.items.size()) os << ", ...";
      return os.str();
    }
    default:
      if (v.is_signed()) return std::to_string(v.i64);
      return std::to_string(v.u64);
  }
}

std::string format_shape(const TensorView& t) {
  std::string s;
  for (int d = 0; d < t.n_dims; ++d) s += (d ? " x " : "") + std::to_string(t.ne[d]);
  return s;
}

// Tensors and bytes per element type, most bytes first: what a quant mix
// such as Q4_K_M is made of.
void print_type_mix(const GgufFile& f) {
  const std::vector<TypeShare> mix = type_mix(f.tensors());
  uint64_t total = 0;
  for (const TypeShare& s : mix) total += s.bytes;
  std::printf("type mix:\n");
  for (const TypeShare& s : mix)
    std::printf("  %-6s  %5lld tensors  %12llu bytes  %5.1f%%\n", std::string(dtype_name(s.type)).c_str(),
                static_cast<long long>(s.tensors), static_cast<unsigned long long>(s.bytes),
                total ? 100.0 * static_cast<double>(s.bytes) / static_cast<double>(total) : 0.0);
}

void print_file(const GgufFile& f) {
  std::printf("file: %s\n", f.path().c_str());
  std::printf("GGUF version: %u\n", f.version());
  std::printf("alignment: %zu\n", f.alignment());
  std::printf("size: %zu bytes, data section at offset %zu\n", f.file_size(), f.data_offset());
  const GgufValue* arch = f.find("general.architecture");
  std::printf("architecture: %s\n", arch && arch->type == GgufType::STRING ? arch->str.c_str() : "(not given)");
  print_type_mix(f);

  std::printf("\nmetadata (%zu keys):\n", f.keys().size());
  for (const std::string& key : f.keys()) {
    const GgufValue& v = *f.find(key);
    if (v.type == GgufType::ARRAY) {  // the summary names the element type
      std::printf("  %s = %s\n", key.c_str(), format_value(v).c_str());
      continue;
    }
    const std::string_view type = gguf_type_name(v.type);
    std::printf("  %s (%.*s) = %s\n", key.c_str(), static_cast<int>(type.size()), type.data(),
                format_value(v).c_str());
  }

  const auto& tensors = f.tensors();
  size_t name_width = 4;
  for (const TensorView& t : tensors) name_width = std::max(name_width, t.name.size());
  std::printf("\ntensors (%zu):\n", tensors.size());
  if (!tensors.empty())
    std::printf("  %5s  %-*s  %-6s  %-22s  %12s  %12s\n", "index", static_cast<int>(name_width),
              "name", "dtype", "shape", "bytes", "offset");
  uint64_t total_bytes = 0, total_elems = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& t = tensors[i];
    const std::string_view dt = dtype_name(t.dtype);
    std::printf("  %5zu  %-*s  %-6.*s  %-22s  %12zu  %12zu\n", i, static_cast<int>(name_width),
                t.name.c_str(), static_cast<int>(dt.size()), dt.data(), format_shape(t).c_str(),
                t.nbytes, f.file_offset(t));
    total_bytes += t.nbytes;
    total_elems += static_cast<uint64_t>(t.elements());
  }
  std::printf("\ntotal: %zu tensors, %llu elements, %llu bytes (%.2f MiB)\n", tensors.size(),
              static_cast<unsigned long long>(total_elems),
              static_cast<unsigned long long>(total_bytes),
              static_cast<double>(total_bytes) / (1024.0 * 1024.0));
}

std::string text(std::string_view s) { return std::string(s.empty() ? "-" : s); }

void print_kernels() {
  const KernelSet& ks = kernels();
  std::printf("cpu level: %s (this cpu runs up to %s; DUET_CPU caps it)\n", text(cpu_level_name(ks.level())).c_str(),
              text(cpu_level_name(cpu_features().best_level())).c_str());
  std::printf("\nkernels:\n  %-11s  %-6s  %-6s  %s\n", "op", "type", "level", "implementation");
  for (const KernelEntry* e : ks.chosen())
    std::printf("  %-11s  %-6s  %-6s  %s\n", text(kernel_op_name(*e)).c_str(), text(kernel_type_name(*e)).c_str(),
                text(cpu_level_name(e->level)).c_str(), text(e->name).c_str());
}

const bool inspect_registered = register_command(
    "inspect", "Show a GGUF file's header, metadata and tensors, or this CPU's kernels", [](CLI::App& app) {
      auto path = std::make_shared<std::string>();
      auto list_kernels = std::make_shared<bool>(false);
      app.add_option("file", *path, "GGUF file");
      app.add_flag("--kernels", *list_kernels, "List the kernel each operation and type runs on this CPU");
      return [path, list_kernels]() -> int {
        if (*list_kernels) print_kernels();
        if (path->empty()) return *list_kernels ? 0 : fail(err("inspect: give a GGUF file, or --kernels"));
        if (*list_kernels) std::printf("\n");
        auto f = GgufFile::open(*path);
        if (!f.ok()) return fail(f.error());
        print_file(*f);
        return 0;
      };
    });

}  // namespace
}  // namespace duet::cli
