#include "kv/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>

namespace duet {
namespace {

std::vector<int32_t> iota_tokens(int32_t n, int32_t start = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

TEST(BlockHash, ChainsOverEverythingBefore) {
  const auto a = iota_tokens(2 * kBlockTokens);
  auto b = a;
  b[0] = 999;  // differs only in the first block
  const uint64_t a0 = block_hash(kPrefixRoot, a.data()), b0 = block_hash(kPrefixRoot, b.data());
  EXPECT_NE(a0, b0);
  // Same second-block tokens, different prefix: different hash.
  EXPECT_NE(block_hash(a0, a.data() + kBlockTokens), block_hash(b0, b.data() + kBlockTokens));
  EXPECT_EQ(block_hash(a0, a.data() + kBlockTokens), block_hash(a0, b.data() + kBlockTokens));
}

TEST(PrefixCache, ReusesFullBlocksOfTheLongestMatchingPrefix) {
  BlockPool pool(8);
  const auto tokens = iota_tokens(3 * kBlockTokens + 5);
  BlockTable first;
  std::vector<uint64_t> first_hashes;
  ASSERT_TRUE(first.reserve(pool, static_cast<int32_t>(tokens.size())));
  cache_full_blocks(pool, tokens, static_cast<int32_t>(tokens.size()), first, first_hashes);
  EXPECT_EQ(first_hashes.size(), 3u);  // the partial fourth block is not cached

  // Shares two blocks, then differs.
  auto other = tokens;
  other[2 * kBlockTokens + 3] = 777;
  BlockTable second;
  std::vector<uint64_t> second_hashes;
  EXPECT_EQ(match_cached_prefix(pool, other, static_cast<int32_t>(other.size()), second, second_hashes),
            2 * kBlockTokens);
  ASSERT_EQ(second.blocks().size(), 2u);
  EXPECT_EQ(second.blocks()[0], first.blocks()[0]);
  EXPECT_EQ(second.blocks()[1], first.blocks()[1]);
  EXPECT_EQ(pool.refcount(first.blocks()[0]), 2);

  // max_tokens caps the match.
  BlockTable third;
  std::vector<uint64_t> third_hashes;
  EXPECT_EQ(match_cached_prefix(pool, tokens, kBlockTokens * 2 - 1, third, third_hashes), kBlockTokens);
  third.release_all(pool);
  second.release_all(pool);
  first.release_all(pool);
}

TEST(PrefixCache, UnreferencedBlocksStayCachedUntilEvictedLeastRecentlyUsedFirst) {
  BlockPool pool(3);
  const auto a = iota_tokens(kBlockTokens, 0), b = iota_tokens(kBlockTokens, 100);
  BlockTable ta, tb;
  std::vector<uint64_t> ha, hb;
  ASSERT_TRUE(ta.reserve(pool, kBlockTokens));
  cache_full_blocks(pool, a, kBlockTokens, ta, ha);
  ASSERT_TRUE(tb.reserve(pool, kBlockTokens));
  cache_full_blocks(pool, b, kBlockTokens, tb, hb);
  ta.release_all(pool);  // released first: evicted first
  tb.release_all(pool);
  EXPECT_EQ(pool.n_cached(), 2);
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_EQ(pool.n_free(), 3);

  // One truly free block, then the cache gives up a's block.
  BlockTable tc;
  ASSERT_TRUE(tc.reserve(pool, 2 * kBlockTokens));
  EXPECT_EQ(pool.n_cached(), 1);
  BlockTable probe;
  std::vector<uint64_t> hp;
  EXPECT_EQ(match_cached_prefix(pool, a, kBlockTokens, probe, hp), 0);
  EXPECT_EQ(match_cached_prefix(pool, b, kBlockTokens, probe, hp), kBlockTokens);
  EXPECT_EQ(pool.n_cached(), 0);  // revived
  probe.release_all(pool);
  tc.release_all(pool);
  EXPECT_EQ(pool.n_used(), 0);
}

TEST(PrefixCache, ASecondCopyOfCachedContentsStaysPrivate) {
  BlockPool pool(2);
  const auto a = iota_tokens(kBlockTokens);
  BlockTable t1, t2;
  std::vector<uint64_t> h1, h2;
  ASSERT_TRUE(t1.reserve(pool, kBlockTokens));
  ASSERT_TRUE(t2.reserve(pool, kBlockTokens));
  cache_full_blocks(pool, a, kBlockTokens, t1, h1);
  cache_full_blocks(pool, a, kBlockTokens, t2, h2);
  t2.release_all(pool);
  EXPECT_EQ(pool.n_cached(), 0);  // t2's copy went straight back to the free list
  t1.release_all(pool);
  EXPECT_EQ(pool.n_cached(), 1);
}

}  // namespace
}  // namespace duet
