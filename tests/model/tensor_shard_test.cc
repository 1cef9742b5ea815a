// One rank's slices of a tensor-parallel model (model/tensor_shard.h): a
// column range of a quantized matrix is its whole blocks, a range that
// splits blocks is the same columns in F32, and a shape that cannot be
// split is refused by name. (The sharded forward pass itself is compared
// with one process's under mpirun: tests/mpi/.)
#include <gtest/gtest.h>

#include <vector>

#include "kernels/type_kernels.h"
#include "model/tensor_shard.h"

namespace duet {
namespace {

constexpr int64_t kRows = 3, kCols = 128;

// A Q8_0 matrix [kRows][kCols] of distinct values, and its rows in float.
struct Q8Matrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // dequantized
  TensorView view;
  Q8Matrix() {
    const TypeKernels* k = type_kernels(DType::Q8_0);
    const size_t row = *row_bytes(DType::Q8_0, kCols);
    bytes.resize(row * kRows);
    std::vector<float> x(kCols);
    values.resize(static_cast<size_t>(kRows * kCols));
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t c = 0; c < kCols; ++c) x[static_cast<size_t>(c)] = static_cast<float>((r * 37 + c * 11) % 23) - 11.0f;
      k->from_float(x.data(), &bytes[static_cast<size_t>(r) * row], kCols);
      k->to_float(&bytes[static_cast<size_t>(r) * row], &values[static_cast<size_t>(r * kCols)], kCols);
    }
    view.name = "m";
    view.dtype = DType::Q8_0;
    view.n_dims = 2;
    view.ne = {kCols, kRows, 1, 1};
    view.data = bytes.data();
    view.nbytes = bytes.size();
  }
};

// The columns [first, first + count) of every row of `m`, through `slice`.
void expect_columns(const Q8Matrix& m, const TensorView& slice, int64_t first, int64_t count) {
  ASSERT_EQ(slice.ne[0], count);
  ASSERT_EQ(slice.rows(), kRows);
  std::vector<float> row(static_cast<size_t>(count));
  for (int64_t r = 0; r < kRows; ++r) {
    type_kernels(slice.dtype)->to_float(slice.row(r), row.data(), count);
    for (int64_t c = 0; c < count; ++c)
      EXPECT_EQ(row[static_cast<size_t>(c)], m.values[static_cast<size_t>(r * kCols + first + c)]) << r << "," << c;
  }
}

TEST(TensorShard, WholeBlocksStayQuantized) {
  Q8Matrix m;
  ShardSlicer s;
  auto slice = s.columns(m.view, 64, 64);
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ((*slice)->dtype, DType::Q8_0);
  expect_columns(m, **slice, 64, 64);
  EXPECT_TRUE(s.notes().empty());
}

TEST(TensorShard, SplitBlocksBecomeF32WithANote) {
  Q8Matrix m;
  ShardSlicer s;
  auto slice = s.columns(m.view, 48, 40);
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ((*slice)->dtype, DType::F32);
  expect_columns(m, **slice, 48, 40);
  EXPECT_NE(s.notes().find("F32"), std::string::npos) << s.notes();
}

TEST(TensorShard, ElementsOfAVector) {
  std::vector<float> v{0, 1, 2, 3, 4, 5};
  TensorView t;
  t.ne = {6, 1, 1, 1};
  t.n_dims = 1;
  t.data = v.data();
  t.nbytes = v.size() * sizeof(float);
  ShardSlicer s;
  const TensorView* e = s.elements(&t, 3, 3);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->ne[0], 3);
  EXPECT_EQ(static_cast<const float*>(e->data)[0], 3.0f);
  EXPECT_EQ(s.elements(nullptr, 0, 1), nullptr);
}

TEST(TensorShard, RefusesShapesThatDoNotSplit) {
  ModelConfig c;
  c.arch = Arch::kLlama;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.ffn_dim = 96;
  EXPECT_TRUE(check_shardable(c, 1).ok());
  EXPECT_TRUE(check_shardable(c, 2).ok());
  Status kv = check_shardable(c, 4);
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.error().message.find("cannot split 2 KV heads over 4 ranks"), std::string::npos) << kv.error().message;
  c.n_kv_heads = 8;
  c.ffn_dim = 90;
  Status ffn = check_shardable(c, 4);
  ASSERT_FALSE(ffn.ok());
  EXPECT_NE(ffn.error().message.find("FFN width 90"), std::string::npos) << ffn.error().message;
  c.ffn_dim = 96;
  c.n_experts = 8;
  c.expert_ffn_dim = 64;
  c.shared_expert_ffn_dim = 128;
  EXPECT_TRUE(check_shardable(c, 2).ok());
  c.expert_ffn_dim = 66;
  Status experts = check_shardable(c, 4);
  ASSERT_FALSE(experts.ok());
  EXPECT_NE(experts.error().message.find("expert FFN width 66"), std::string::npos) << experts.error().message;
  c.expert_ffn_dim = 64;
  c.shared_expert_ffn_dim = 130;
  Status shared = check_shardable(c, 4);
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.error().message.find("shared expert's FFN width 130"), std::string::npos) << shared.error().message;
  c.shared_expert_ffn_dim = 128;
  c.kv_lora_rank = 32;  // latent attention splits by heads
  EXPECT_TRUE(check_shardable(c, 2).ok());
  c.kv_lora_rank = 0;
  c.arch = Arch::kOlmoe;  // its q and k norms need every head of a row
  EXPECT_TRUE(check_shardable(c, 1).ok());
  Status olmoe = check_shardable(c, 2);
  ASSERT_FALSE(olmoe.ok());
  EXPECT_NE(olmoe.error().message.find("olmoe's q and k norms span every head"), std::string::npos) << olmoe.error().message;
}

// An expert's columns: whole blocks as a dense matrix's are; split blocks
// are refused by the whole tensor's name, not copied to F32.
TEST(TensorShard, ExpertColumnsMustBeWholeBlocks) {
  Q8Matrix m;
  ShardSlicer s;
  auto whole = s.block_columns(m.view, 32, 64, "blk.0.ffn_down_exps.weight");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ((*whole)->dtype, DType::Q8_0);
  expect_columns(m, **whole, 32, 64);
  auto split = s.block_columns(m.view, 48, 40, "blk.0.ffn_down_exps.weight");
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.error().message.find("blk.0.ffn_down_exps.weight: its 40 columns per rank (from column 48) are not whole Q8_0 blocks of 32"),
            std::string::npos)
      << split.error().message;
  EXPECT_TRUE(s.notes().empty());
}

// The vocabulary head's rows: every rank but the last a whole number of
// 16-row groups (packable), the ranks' ranges covering the vocabulary
// once, in order, however it divides.
TEST(TensorShard, HeadRowsAreWholeGroupsAndCoverTheVocabulary) {
  for (int64_t vocab : {32000, 151936, 496, 509, 20, 1})
    for (int ranks : {1, 2, 3, 4, 8}) {
      int64_t next = 0;
      for (int r = 0; r < ranks; ++r) {
        const RowRange rows = head_rows(vocab, r, ranks);
        EXPECT_EQ(rows.first, next) << vocab << " over " << ranks << ", rank " << r;
        EXPECT_GE(rows.count, 0);
        if (r < ranks - 1) EXPECT_EQ(rows.count % 16, 0) << vocab << " over " << ranks << ", rank " << r;
        next += rows.count;
      }
      EXPECT_EQ(next, vocab) << vocab << " over " << ranks;
    }
  EXPECT_EQ(head_rows(32000, 1, 2).first, 16000);
  EXPECT_EQ(head_rows(32000, 1, 2).count, 16000);
  EXPECT_EQ(head_rows(509, 0, 2).count, 240);  // 254 rounded down to whole groups
  EXPECT_EQ(head_rows(509, 1, 2).count, 269);
  EXPECT_EQ(head_rows(20, 0, 2).count, 0);  // fewer rows than a group per rank: the last rank has them all
}

}  // namespace
}  // namespace duet
