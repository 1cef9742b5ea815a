#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <set>

#include "kv/block_table.h"

namespace duet {
namespace {

TEST(BlockPool, AllocatesEveryBlockOnceThenRunsOut) {
  BlockPool pool(5);
  std::set<int32_t> seen;
  for (int i = 0; i < 5; ++i) {
    auto b = pool.allocate();
    ASSERT_TRUE(b.has_value());
    EXPECT_TRUE(seen.insert(*b).second);
    EXPECT_EQ(pool.refcount(*b), 1);
  }
  EXPECT_FALSE(pool.allocate().has_value());
  EXPECT_EQ(pool.n_free(), 0);
  EXPECT_EQ(pool.n_used(), 5);
}

TEST(BlockPool, SharedBlockFreedOnlyByLastHolder) {
  BlockPool pool(2);
  const int32_t b = *pool.allocate();
  pool.retain(b);
  EXPECT_EQ(pool.refcount(b), 2);
  pool.release(b);
  EXPECT_EQ(pool.n_free(), 1);
  pool.release(b);
  EXPECT_EQ(pool.n_free(), 2);
}

TEST(BlockTable, ReserveGrowsByWholeBlocksAndFailsWithoutSideEffects) {
  BlockPool pool(3);
  BlockTable t;
  EXPECT_TRUE(t.reserve(pool, 1));
  EXPECT_EQ(t.blocks().size(), 1u);
  EXPECT_TRUE(t.reserve(pool, kBlockTokens));
  EXPECT_EQ(t.blocks().size(), 1u);
  EXPECT_TRUE(t.reserve(pool, kBlockTokens + 1));
  EXPECT_EQ(t.blocks().size(), 2u);
  EXPECT_FALSE(t.reserve(pool, 4 * kBlockTokens));  // needs 2 more, only 1 free
  EXPECT_EQ(t.blocks().size(), 2u);
  EXPECT_EQ(pool.n_free(), 1);
  t.truncate(pool, kBlockTokens);
  EXPECT_EQ(t.blocks().size(), 1u);
  EXPECT_EQ(pool.n_free(), 2);
  t.release_all(pool);
  EXPECT_EQ(pool.n_free(), 3);
}

}  // namespace
}  // namespace duet
