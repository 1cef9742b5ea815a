// Corrupt and hostile GGUF files: each must give one clear error (naming the
// file and the problem), never a crash, a hang or a huge allocation. CI runs
// these under AddressSanitizer and UndefinedBehaviorSanitizer.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "formats/gguf.h"
#include "test_util.h"

namespace duet {
namespace {

namespace dt = duet::testing;

// Builds GGUF bytes by hand, so a test can say exactly which field is wrong.
struct Bytes {
  std::vector<uint8_t> b;
  Bytes& u8(uint8_t v) { return raw(&v, 1); }
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& str(const std::string& s) { u64(s.size()); return raw(s.data(), s.size()); }
  Bytes& raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  Bytes& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    raw("GGUF", 4);
    u32(version);
    u64(tensors);
    return u64(kvs);
  }
  Bytes& tensor_info(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name);
    u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) u64(n);
    u32(type);
    return u64(offset);
  }
  Bytes& pad_to(size_t align) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
};

class GgufBadInput : public ::testing::Test {
 protected:
  std::string write(const std::vector<uint8_t>& bytes, const std::string& name = "bad.gguf") {
    const std::string path = dir_.file(name);
    // A fresh file rather than a truncated one: ext4 flushes files that are
    // truncated and rewritten, which made thousands of trials slow.
    std::filesystem::remove(path);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  // Opens the bytes, expects failure, and checks the message names the file
  // and contains `what`.
  void expect_error(const std::vector<uint8_t>& bytes, const std::string& what) {
    const std::string path = write(bytes);
    auto f = GgufFile::open(path);
    ASSERT_FALSE(f.ok()) << "accepted a file that should fail with: " << what;
    const std::string& msg = f.error().message;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << "message: " << msg << "\nexpected: " << what;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }

  // A valid file from the writer: every value kind, and tensors whose
  // padding and offsets are non-trivial.
  std::vector<uint8_t> valid_file() {
    GgufWriter w;
    w.set("general.architecture", GgufValue::of_string("llama"));
    w.set("u8", GgufValue::of_u8(1));
    w.set("i16", GgufValue::of_i16(-2));
    w.set("u64", GgufValue::of_u64(3));
    w.set("f64", GgufValue::of_f64(0.25));
    w.set("flag", GgufValue::of_bool(true));
    w.set("tokens", GgufValue::of_strings({"<unk>", "<s>", "</s>", "hello"}));
    w.set("scores", GgufValue::of_f32s({0, -1, -2, -3}));
    w.set("nested", GgufValue::of_array(GgufType::ARRAY, {GgufValue::of_i32s({1, 2}),
                                                          GgufValue::of_strings({"x"})}));
    const std::vector<uint8_t> data(4096, 0x3c);
    EXPECT_TRUE(w.add_tensor("a", DType::F32, {8, 2}, data.data(), 64).ok());
    EXPECT_TRUE(w.add_tensor("b", DType::F16, {3}, data.data(), 6).ok());
    EXPECT_TRUE(w.add_tensor("c", DType::Q8_0, {32, 2}, data.data(), 68).ok());
    const std::string path = dir_.file("valid.gguf");
    EXPECT_TRUE(w.write(path).ok());
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
  }

  dt::TempDir dir_;
};

TEST_F(GgufBadInput, TruncationAtAnyOffsetIsAnError) {
  const std::vector<uint8_t> full = valid_file();
  size_t data_end = 0, data_offset = 0;
  {
    auto f = GgufFile::open(write(full, "full.gguf"));
    ASSERT_TRUE(f.ok()) << f.error().message;
    data_offset = f->data_offset();
    for (const TensorView& t : f->tensors()) data_end = std::max(data_end, f->file_offset(t) + t.nbytes);
  }
  ASSERT_GT(data_offset, 100u);
  // Every cut in the header and metadata, a sample of cuts in the data.
  std::vector<size_t> cuts;
  for (size_t n = 0; n <= data_offset; ++n) cuts.push_back(n);
  for (size_t n = data_offset + 1; n < data_end; n += 7) cuts.push_back(n);
  cuts.push_back(data_end - 1);
  for (size_t n : cuts) {
    const std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    const std::string path = write(cut);
    auto f = GgufFile::open(path);
    ASSERT_FALSE(f.ok()) << "accepted a file cut to " << n << " of " << full.size() << " bytes";
    EXPECT_NE(f.error().message.find(path), std::string::npos) << f.error().message;
  }
  // Cutting only the padding after the last tensor leaves a valid file.
  const std::vector<uint8_t> unpadded(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(data_end));
  EXPECT_TRUE(GgufFile::open(write(unpadded)).ok());
}

TEST_F(GgufBadInput, EmptyAndTinyFiles) {
  expect_error({}, "not a GGUF file");
  expect_error({'G', 'G'}, "not a GGUF file");
}

TEST_F(GgufBadInput, BadMagic) {
  std::vector<uint8_t> b = valid_file();
  b[3] = 'X';
  expect_error(b, "bad magic");
}

TEST_F(GgufBadInput, UnsupportedVersions) {
  expect_error(Bytes().header(0, 0, 1).b, "version 1 is not supported");
  expect_error(Bytes().header(0, 0, 99).b, "unsupported GGUF version 99");
  expect_error(Bytes().header(0, 0, 0).b, "unsupported GGUF version 0");
}

TEST_F(GgufBadInput, Version2IsAccepted) {
  Bytes b;
  b.header(1, 1, 2).str("k").u32(4).u32(5).tensor_info("t", {4}, 0, 0).pad_to(32).zeros(16);
  auto f = GgufFile::open(write(b.b));
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(*f->get_uint("k"), 5u);
  EXPECT_EQ(f->tensors()[0].nbytes, 16u);
}

TEST_F(GgufBadInput, TensorDataPastEndOfFile) {
  Bytes b;
  b.header(1, 0).tensor_info("w", {16}, 0, 0).pad_to(32).zeros(32);  // needs 64 bytes
  expect_error(b.b, "tensor 'w': data [0, +64)");
  Bytes far;
  far.header(1, 0).tensor_info("w", {4}, 0, uint64_t{1} << 62).pad_to(32).zeros(64);
  expect_error(far.b, "runs past the end of the file");
  Bytes wrap;  // offset + size wraps around 2^64
  wrap.header(1, 0).tensor_info("w", {8}, 0, ~uint64_t{31}).pad_to(32).zeros(64);
  expect_error(wrap.b, "runs past the end of the file");
}

TEST_F(GgufBadInput, DimsThatOverflowWhenMultiplied) {
  const uint64_t big = uint64_t{1} << 32;
  expect_error(Bytes().header(1, 0).tensor_info("huge", {big, big, big}, 0, 0).pad_to(32).b,
               "tensor 'huge': shape");
  expect_error(Bytes().header(1, 0).tensor_info("wide", {uint64_t{1} << 62, 1}, 0, 0).pad_to(32).b,
               "tensor 'wide'");
  expect_error(Bytes().header(1, 0).tensor_info("neg", {~uint64_t{0}}, 0, 0).pad_to(32).b,
               "tensor 'neg': dimension 0");
}

TEST_F(GgufBadInput, BadTensorShapes) {
  expect_error(Bytes().header(1, 0).tensor_info("z", {4, 0}, 0, 0).pad_to(32).zeros(32).b,
               "tensor 'z': dimension 1 is 0");
  expect_error(Bytes().header(1, 0).tensor_info("nd0", {}, 0, 0).pad_to(32).b,
               "tensor 'nd0': n_dims 0");
  expect_error(Bytes().header(1, 0).tensor_info("nd5", {1, 1, 1, 1, 1}, 0, 0).pad_to(32).b,
               "tensor 'nd5': n_dims 5");
  expect_error(Bytes().header(1, 0).tensor_info("q", {48}, 8, 0).pad_to(32).zeros(64).b,
               "tensor 'q': row of 48 elements does not divide into Q8_0 blocks");
  // The mix types name their own block sizes (32 for Q5_0/IQ4_NL, 256 for
  // Q3_K/IQ4_XS/TQ2_0), also for rows that fill the other size.
  expect_error(Bytes().header(1, 0).tensor_info("q5", {48}, 6, 0).pad_to(32).zeros(64).b,
               "tensor 'q5': row of 48 elements does not divide into Q5_0 blocks of 32");
  expect_error(Bytes().header(1, 0).tensor_info("nl", {80, 2}, 20, 0).pad_to(32).zeros(128).b,
               "tensor 'nl': row of 80 elements does not divide into IQ4_NL blocks of 32");
  expect_error(Bytes().header(1, 0).tensor_info("q3", {384, 2}, 11, 0).pad_to(32).zeros(512).b,
               "tensor 'q3': row of 384 elements does not divide into Q3_K blocks of 256");
  expect_error(Bytes().header(1, 0).tensor_info("xs", {96}, 23, 0).pad_to(32).zeros(128).b,
               "tensor 'xs': row of 96 elements does not divide into IQ4_XS blocks of 256");
  expect_error(Bytes().header(1, 0).tensor_info("tq", {128}, 35, 0).pad_to(32).zeros(128).b,
               "tensor 'tq': row of 128 elements does not divide into TQ2_0 blocks of 256");
}

TEST_F(GgufBadInput, UnknownDtype) {
  expect_error(Bytes().header(1, 0).tensor_info("odd", {4}, 99, 0).pad_to(32).zeros(32).b,
               "tensor 'odd': unknown ggml type 99");
}

TEST_F(GgufBadInput, HugeStringLengths) {
  const uint64_t huge = uint64_t{1} << 63;
  // Trailing zeros keep the counts plausible, so the length is what fails.
  expect_error(Bytes().header(0, 1).u64(huge).raw("key", 3).zeros(16).b,
               "offset 24: metadata key: string length 9223372036854775808 exceeds");
  expect_error(Bytes().header(0, 1).str("k").u32(8).u64(huge).b,
               "offset 37: string value: string length 9223372036854775808 exceeds");
  expect_error(Bytes().header(1, 0).u64(huge).zeros(32).b,
               "offset 24: tensor name: string length 9223372036854775808 exceeds");
}

TEST_F(GgufBadInput, HugeCounts) {
  expect_error(Bytes().header(0, 1).str("k").u32(9).u32(4).u64(uint64_t{1} << 60).b,
               "key 'k': array count 1152921504606846976 of u32 cannot fit");
  expect_error(Bytes().header(0, 1).str("k").u32(9).u32(9).u64(~uint64_t{0}).b,
               "key 'k': array count");
  expect_error(Bytes().header(~uint64_t{0}, 0).b, "tensor count");
  expect_error(Bytes().header(0, uint64_t{1} << 40).b, "metadata count");
}

TEST_F(GgufBadInput, MisalignedTensorOffset) {
  expect_error(Bytes().header(1, 0).tensor_info("m", {4}, 0, 4).pad_to(32).zeros(64).b,
               "tensor 'm': data offset 4 is not a multiple of the alignment 32");
}

TEST_F(GgufBadInput, BadAlignmentValues) {
  for (uint32_t a : {0u, 3u, 48u}) {
    expect_error(Bytes().header(0, 1).str("general.alignment").u32(4).u32(a).b,
                 "general.alignment " + std::to_string(a) + " is not a power of two");
  }
  expect_error(Bytes().header(0, 1).str("general.alignment").u32(8).str("32").b,
               "general.alignment has type string");
}

TEST_F(GgufBadInput, OverlappingTensors) {
  Bytes b;
  b.header(2, 0).tensor_info("first", {16}, 0, 0).tensor_info("second", {8}, 0, 32).pad_to(32).zeros(64);
  expect_error(b.b, "tensor 'second' at data offset 32 overlaps tensor 'first' which ends at 64");
}

TEST_F(GgufBadInput, Duplicates) {
  expect_error(Bytes().header(0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2).b,
               "duplicate metadata key 'k'");
  Bytes b;
  b.header(2, 0).tensor_info("t", {8}, 0, 0).tensor_info("t", {8}, 0, 32).pad_to(32).zeros(64);
  expect_error(b.b, "duplicate tensor name 't'");
}

TEST_F(GgufBadInput, BadValues) {
  expect_error(Bytes().header(0, 1).str("flag").u32(7).u8(2).b, "key 'flag': bool value 2 is not 0 or 1");
  expect_error(Bytes().header(0, 1).str("k").u32(13).u32(0).b, "key 'k': unknown value type 13");
  expect_error(Bytes().header(0, 1).str("k").u32(9).u32(77).u64(0).b,
               "key 'k': unknown array element type 77");
  expect_error(Bytes().header(0, 1).str("").u32(4).u32(0).b, "metadata key 0 is empty");
}

TEST_F(GgufBadInput, DeepNesting) {
  // Depth 8 is allowed; 9 is not.
  auto nested = [](int depth) {
    Bytes b;
    b.header(0, 1).str("deep").u32(9);
    for (int i = 1; i < depth; ++i) b.u32(9).u64(1);
    b.u32(4).u64(1).u32(7);
    return b.b;
  };
  auto ok = GgufFile::open(write(nested(8)));
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  expect_error(nested(9), "key 'deep': arrays nested deeper than 8");
  expect_error(nested(100000), "arrays nested deeper than 8");
}

TEST_F(GgufBadInput, RandomMutationsNeverCrash) {
  const std::vector<uint8_t> good = valid_file();
  auto probe = GgufFile::open(write(good, "probe.gguf"));
  ASSERT_TRUE(probe.ok());
  const size_t header_bytes = probe->data_offset();
  std::mt19937 rng(1234);
  int rejected = 0;
  const int kTrials = 3000;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<uint8_t> b = good;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      // Mostly the header, where the structure is; sometimes anywhere.
      const size_t at = rng() % 4 ? rng() % header_bytes : rng() % b.size();
      switch (rng() % 3) {
        case 0: b[at] = static_cast<uint8_t>(rng()); break;
        case 1: b[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 2: b[at] = (rng() % 2) ? 0xff : 0x00; break;
      }
    }
    if (rng() % 8 == 0) b.resize(rng() % b.size());
    const std::string path = write(b);
    auto f = GgufFile::open(path);
    if (!f.ok()) {
      ++rejected;
      EXPECT_NE(f.error().message.find(path), std::string::npos) << f.error().message;
      continue;
    }
    // Whatever was accepted must lie inside the file.
    uint64_t sum = 0;
    for (const TensorView& t : f->tensors()) {
      ASSERT_LE(f->file_offset(t) + t.nbytes, f->file_size()) << t.name;
      const auto* p = static_cast<const uint8_t*>(t.data);
      for (size_t i = 0; i < t.nbytes; ++i) sum += p[i];
    }
    (void)sum;
  }
  // Most single-byte corruptions of structure are detected.
  EXPECT_GT(rejected, kTrials / 3);
}

}  // namespace
}  // namespace duet
