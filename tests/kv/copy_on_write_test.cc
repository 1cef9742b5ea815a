// Forked sequences share blocks: BlockTable::share holds the parent's
// blocks once more, own_blocks gives a writer a fresh copy of each shared
// block it is about to write (the last holder writes in place), and
// KvCache::copy_block carries every layer's K and V across.
#include <gtest/gtest.h>

#include <vector>

#include "kv/block_table.h"
#include "kv/kv_cache.h"

namespace duet {
namespace {

TEST(CopyOnWrite, ShareHoldsEveryBlockOnceMore) {
  BlockPool pool(8);
  BlockTable parent;
  ASSERT_TRUE(parent.reserve(pool, 40));  // 3 blocks, the last partial
  const BlockTable child = parent.share(pool);
  EXPECT_EQ(child.blocks(), parent.blocks());
  for (int32_t b : parent.blocks()) EXPECT_EQ(pool.refcount(b), 2);
  EXPECT_EQ(pool.n_used(), 3);
}

TEST(CopyOnWrite, OnlyTheSharedBlockBeingWrittenIsCopied) {
  BlockPool pool(8);
  BlockTable parent;
  ASSERT_TRUE(parent.reserve(pool, 40));
  BlockTable a = parent.share(pool), b = parent.share(pool);
  const std::vector<int32_t> before = parent.blocks();

  // Writing position 40 (slot 8 of block 2): the full blocks stay shared.
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(a.own_blocks(pool, 40, 41, copies));
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, before[2]);
  EXPECT_EQ(copies[0].dst, a.blocks()[2]);
  EXPECT_NE(a.blocks()[2], before[2]);
  EXPECT_EQ(a.blocks()[0], before[0]);
  EXPECT_EQ(a.blocks()[1], before[1]);
  EXPECT_EQ(pool.refcount(before[2]), 2);  // parent and b
  EXPECT_EQ(pool.refcount(a.blocks()[2]), 1);

  ASSERT_TRUE(b.own_blocks(pool, 40, 41, copies));
  EXPECT_EQ(copies.size(), 2u);
  // The parent is the last holder: it writes in place, nothing copied.
  ASSERT_TRUE(parent.own_blocks(pool, 40, 41, copies));
  EXPECT_EQ(copies.size(), 2u);
  EXPECT_EQ(parent.blocks(), before);
  EXPECT_EQ(pool.refcount(before[2]), 1);
  // Writing again into a block a sequence already owns copies nothing.
  ASSERT_TRUE(a.own_blocks(pool, 41, 42, copies));
  EXPECT_EQ(copies.size(), 2u);

  a.release_all(pool);
  b.release_all(pool);
  parent.release_all(pool);
  EXPECT_EQ(pool.n_used(), 0);
}

TEST(CopyOnWrite, FailsUnchangedWhenThePoolIsFull) {
  BlockPool pool(3);
  BlockTable parent;
  ASSERT_TRUE(parent.reserve(pool, 40));  // all 3 blocks
  BlockTable child = parent.share(pool);
  const std::vector<int32_t> before = child.blocks();
  std::vector<BlockCopy> copies;
  EXPECT_FALSE(child.own_blocks(pool, 40, 41, copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(child.blocks(), before);
  EXPECT_EQ(pool.refcount(before[2]), 2);
}

TEST(CopyOnWrite, CopyBlockCarriesEveryLayerAndHead) {
  const KvShape shape{/*n_layers=*/3, /*n_kv_heads=*/2, /*head_dim=*/8};
  for (KvType type : {KvType::F32, KvType::F16, KvType::Q8, KvType::Q4}) {
    KvCache cache(shape, 4, type);
    std::vector<float> k(16), v(16);
    for (int32_t layer = 0; layer < 3; ++layer)
      for (int32_t slot = 0; slot < kBlockTokens; ++slot) {
        for (size_t i = 0; i < k.size(); ++i) {
          k[i] = static_cast<float>(layer * 100 + slot) + 0.25f * static_cast<float>(i);
          v[i] = -k[i];
        }
        cache.store(layer, 1, slot, k.data(), v.data());
      }
    cache.copy_block({1, 3});
    std::vector<float> want(8), got(8);
    for (int32_t layer = 0; layer < 3; ++layer)
      for (int32_t head = 0; head < 2; ++head)
        for (int32_t slot = 0; slot < kBlockTokens; ++slot) {
          cache.load_key(layer, 1, head, slot, want.data());
          cache.load_key(layer, 3, head, slot, got.data());
          EXPECT_EQ(got, want) << kv_type_name(type) << " layer " << layer << " head " << head << " slot " << slot;
          cache.load_value(layer, 1, head, slot, want.data());
          cache.load_value(layer, 3, head, slot, got.data());
          EXPECT_EQ(got, want) << kv_type_name(type);
        }
  }
}

}  // namespace
}  // namespace duet
