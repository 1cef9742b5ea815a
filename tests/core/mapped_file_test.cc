#include "core/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace duet {
namespace {

std::string temp_path(const char* name) {
  return (testing::TempDir() + "/duet_mapped_" + std::to_string(getpid()) + "_" + name);
}

std::string write_file(const char* name, const std::vector<uint8_t>& bytes) {
  const std::string path = temp_path(name);
  FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_TRUE(f);
  if (!bytes.empty()) {
    EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  }
  std::fclose(f);
  return path;
}

TEST(MappedFile, BothModesSeeTheSameBytes) {
  // Awkward size: more than one 2 MiB huge page, not a multiple of 4 KiB.
  std::vector<uint8_t> bytes((size_t{5} << 20) + 12345);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  const std::string path = write_file("bytes", bytes);
  for (LoadMode mode : {LoadMode::kMap, LoadMode::kRead}) {
    Result<MappedFile> f = MappedFile::open(path, mode);
    ASSERT_TRUE(f.ok()) << f.error().message;
    ASSERT_EQ(f->size(), bytes.size());
    EXPECT_EQ(std::memcmp(f->data(), bytes.data(), bytes.size()), 0);
    // Moves hand over the memory; the moved-from object owns nothing.
    MappedFile g = std::move(*f);
    EXPECT_EQ(f->data(), nullptr);
    EXPECT_EQ(g.size(), bytes.size());
    EXPECT_EQ(g.data()[bytes.size() - 1], bytes.back());
  }
  std::remove(path.c_str());
}

TEST(MappedFile, DroppedPagesReadBackTheSameBytes) {
  // Packing hands the pages of copied tensors back (drop_pages): a mapped
  // file faults them in again from the file; a copy in memory ignores the
  // call (its pages have nothing behind them); ranges outside the file and
  // partial pages are left alone.
  std::vector<uint8_t> bytes((size_t{1} << 20) + 777);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 2246822519u >> 11);
  const std::string path = write_file("drop", bytes);
  for (LoadMode mode : {LoadMode::kMap, LoadMode::kRead}) {
    Result<MappedFile> f = MappedFile::open(path, mode);
    ASSERT_TRUE(f.ok()) << f.error().message;
    f->drop_pages(f->data() + 1000, 600000);
    f->drop_pages(f->data(), bytes.size());
    const std::vector<uint8_t> elsewhere(8192, 1);
    f->drop_pages(elsewhere.data(), elsewhere.size());
    EXPECT_EQ(std::memcmp(f->data(), bytes.data(), bytes.size()), 0);
    EXPECT_EQ(elsewhere, std::vector<uint8_t>(8192, 1));
  }
  std::remove(path.c_str());
}

TEST(MappedFile, EmptyFileInBothModes) {
  const std::string path = write_file("empty", {});
  for (LoadMode mode : {LoadMode::kMap, LoadMode::kRead}) {
    Result<MappedFile> f = MappedFile::open(path, mode);
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->size(), 0u);
  }
  std::remove(path.c_str());
}

TEST(MappedFile, ErrorsAreValues) {
  for (LoadMode mode : {LoadMode::kMap, LoadMode::kRead}) {
    Result<MappedFile> missing = MappedFile::open(temp_path("does_not_exist"), mode);
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("cannot open"), std::string::npos);
    Result<MappedFile> dir = MappedFile::open(testing::TempDir(), mode);
    ASSERT_FALSE(dir.ok());
    EXPECT_NE(dir.error().message.find("directory"), std::string::npos);
  }
}

}  // namespace
}  // namespace duet
