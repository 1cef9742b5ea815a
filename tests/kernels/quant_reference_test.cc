// duet's dequantization against llama.cpp's, bit for bit: every tensor of
// every file in ../shared/models/quant-ref (small models llama-quantize wrote
// in each type and mix) dequantized to F32 must hash to the SHA-256 that
// llama.cpp's own dequantization gave (hashes.jsonl, see its PROVENANCE.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "kernels/quant.h"
#include "sha256.h"
#include "test_util.h"

namespace duet {
namespace {

std::string ref_dir() { return testing::shared_path("models/quant-ref"); }

// The SHA-256 of the tensor's little-endian F32 dequantization; an error for
// a type duet cannot dequantize.
Result<std::string> f32_digest(const TensorView& t) {
  testing::Sha256 sha;
  if (t.dtype == DType::F32) {
    sha.update(t.data, t.nbytes);
    return sha.hex();
  }
  std::vector<float> row(static_cast<size_t>(t.ne[0]));
  for (int64_t r = 0; r < t.rows(); ++r) {
    DUET_TRY(dequantize_row(t.dtype, t.row(r), row.data(), t.ne[0]));
    sha.update(row.data(), row.size() * sizeof(float));
  }
  return sha.hex();
}

struct Tally {
  int tensors = 0, matched = 0;
};

// Types duet does not dequantize yet: their tensors must still be refused
// (never decoded into wrong numbers), and taking a type off this list makes
// its hashes count.
const std::set<DType> kNotYetSupported = {};

TEST(QuantReference, DequantizationMatchesLlamaCppHashes) {
  std::ifstream lines(ref_dir() + "/hashes.jsonl");
  ASSERT_TRUE(lines) << "missing " << ref_dir() << "/hashes.jsonl";
  std::map<std::string, Tally> by_type;
  int files = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const auto entry = nlohmann::json::parse(line);
    const std::string file = entry.at("file");
    auto gguf = GgufFile::open(ref_dir() + "/" + file);
    ASSERT_TRUE(gguf.ok()) << file << ": " << gguf.error().message;
    ++files;
    for (const auto& [name, want] : entry.at("tensors").items()) {
      const TensorView* t = gguf->tensor(name);
      ASSERT_NE(t, nullptr) << file << ": no tensor " << name;
      ASSERT_EQ(static_cast<uint32_t>(t->dtype), want.at("type").get<uint32_t>()) << file << " " << name;
      Tally& tally = by_type[std::string(dtype_name(t->dtype))];
      ++tally.tensors;
      const Result<std::string> got = f32_digest(*t);
      if (kNotYetSupported.count(t->dtype)) {
        EXPECT_FALSE(got.ok()) << dtype_name(t->dtype) << " decodes now: take it off kNotYetSupported";
        continue;
      }
      ASSERT_TRUE(got.ok()) << file << " " << name << ": " << got.error().message;
      EXPECT_EQ(*got, want.at("f32_sha256").get<std::string>())
          << file << " " << name << " (" << dtype_name(t->dtype) << ")";
      if (*got == want.at("f32_sha256").get<std::string>()) ++tally.matched;
    }
  }
  EXPECT_GE(files, 22);
  for (const auto& [type, tally] : by_type)
    std::printf("  %-7s %3d of %3d tensors bit-exact\n", type.c_str(), tally.matched, tally.tensors);
}

// The hash itself, on the FIPS 180-4 examples and a long message.
TEST(QuantReference, Sha256KnownAnswers) {
  EXPECT_EQ(testing::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(testing::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(testing::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Across blocks, fed in uneven pieces.
  testing::Sha256 s;
  const std::string a(1000, 'a');
  for (size_t at = 0, n = 1; at < a.size(); at += n, n = n * 3 % 97 + 1) s.update(a.data() + at, std::min(n, a.size() - at));
  EXPECT_EQ(s.hex(), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

}  // namespace
}  // namespace duet
