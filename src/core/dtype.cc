#include "core/dtype.h"

#include <array>
#include <cctype>
#include <string>

namespace duet {
namespace {

struct Entry {
  uint32_t raw;
  DTypeTraits traits;
};

// Block layouts follow ggml: QK4_0 = QK8_0 = 32 elements, K-quants 256;
// IQ4_NL has 32-element blocks, IQ4_XS, IQ3_S and the ternary TQ types 256.
constexpr std::array kTypes = {
    Entry{0, {"F32", 1, 4}},       Entry{1, {"F16", 1, 2}},
    Entry{2, {"Q4_0", 32, 18}},    Entry{3, {"Q4_1", 32, 20}},
    Entry{6, {"Q5_0", 32, 22}},    Entry{7, {"Q5_1", 32, 24}},
    Entry{8, {"Q8_0", 32, 34}},    Entry{9, {"Q8_1", 32, 36}},
    Entry{10, {"Q2_K", 256, 84}},  Entry{11, {"Q3_K", 256, 110}},
    Entry{12, {"Q4_K", 256, 144}}, Entry{13, {"Q5_K", 256, 176}},
    Entry{14, {"Q6_K", 256, 210}}, Entry{15, {"Q8_K", 256, 292}},
    Entry{20, {"IQ4_NL", 32, 18}}, Entry{21, {"IQ3_S", 256, 110}},
    Entry{23, {"IQ4_XS", 256, 136}},
    Entry{24, {"I8", 1, 1}},       Entry{25, {"I16", 1, 2}},
    Entry{26, {"I32", 1, 4}},      Entry{27, {"I64", 1, 8}},
    Entry{28, {"F64", 1, 8}},      Entry{30, {"BF16", 1, 2}},
    Entry{34, {"TQ1_0", 256, 54}}, Entry{35, {"TQ2_0", 256, 66}},
};

}  // namespace

const DTypeTraits* dtype_traits(uint32_t raw) {
  for (const auto& e : kTypes)
    if (e.raw == raw) return &e.traits;
  return nullptr;
}

std::string_view dtype_name(DType t) {
  const DTypeTraits* tr = dtype_traits(static_cast<uint32_t>(t));
  return tr ? tr->name : "unknown";
}

Result<DType> parse_dtype(std::string_view name) {
  std::string up(name);
  for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& e : kTypes)
    if (e.traits.name == up) return static_cast<DType>(e.raw);
  return err("unknown dtype '", name, "'");
}

Result<size_t> row_bytes(DType t, int64_t n) {
  const DTypeTraits* tr = dtype_traits(static_cast<uint32_t>(t));
  if (!tr) return err("unknown dtype ", static_cast<uint32_t>(t));
  if (n < 0 || n % tr->block_elems != 0)
    return err("row of ", n, " elements does not divide into ", tr->name, " blocks of ",
               tr->block_elems);
  const auto blocks = static_cast<uint64_t>(n / tr->block_elems);
  if (blocks > UINT64_MAX / static_cast<uint64_t>(tr->block_bytes))
    return err("row of ", n, " ", tr->name, " elements overflows a byte count");
  return static_cast<size_t>(blocks * static_cast<uint64_t>(tr->block_bytes));
}

}  // namespace duet
