// Groups of layers with separate block tables (kv/kv_groups.h): the layout
// for Gemma 2's and Gemma 3's window patterns, the cache's slots, tables
// that take one block per group, windowed groups freed on their own, and
// the prefix cache naming each group's block apart.
#include "kv/kv_groups.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "kv/kv_cache.h"
#include "kv/prefix_cache.h"

namespace duet {
namespace {

// Every `period`-th layer global, the rest windowed (Gemma 2: 2, Gemma 3: 6).
std::vector<int32_t> pattern(int32_t n_layers, int32_t period, int32_t window) {
  std::vector<int32_t> w;
  for (int32_t l = 0; l < n_layers; ++l) w.push_back((l + 1) % period == 0 ? 0 : window);
  return w;
}

// Each group's layers have distinct slots below layers_per_block, and each
// group holds layers of one window.
void expect_consistent(const KvGroups& g, const std::vector<int32_t>& layer_window) {
  std::vector<std::set<int32_t>> slots(static_cast<size_t>(g.n_groups()));
  for (size_t l = 0; l < g.group.size(); ++l) {
    const auto grp = static_cast<size_t>(g.group[l]);
    ASSERT_LT(grp, slots.size());
    EXPECT_TRUE(slots[grp].insert(g.slot[l]).second) << "layer " << l;
    EXPECT_LT(g.slot[l], g.layers_per_block);
    EXPECT_EQ(g.window[grp], layer_window.empty() ? 0 : layer_window[l]) << "layer " << l;
  }
}

TEST(KvGroups, OneWindowForEveryLayerIsOneGroup) {
  for (const std::vector<int32_t>& w : {std::vector<int32_t>{}, std::vector<int32_t>(22, 4096)}) {
    const KvGroups g = KvGroups::of(22, w);
    EXPECT_EQ(g.n_groups(), 1);
    EXPECT_EQ(g.layers_per_block, 22);
    EXPECT_EQ(g.window[0], w.empty() ? 0 : 4096);
    expect_consistent(g, w);
  }
}

TEST(KvGroups, Gemma2AlternatesIntoTwoGroupsOfHalfTheLayers) {
  const std::vector<int32_t> w = pattern(26, 2, 4096);
  const KvGroups g = KvGroups::of(26, w);
  EXPECT_EQ(g.layers_per_block, 13);
  EXPECT_EQ(g.window, (std::vector<int32_t>{0, 4096}));  // the global group first
  EXPECT_EQ(g.group[1], 0);
  EXPECT_EQ(g.group[0], 1);
  expect_consistent(g, w);
}

TEST(KvGroups, Gemma3PutsItsFourGlobalLayersInOneGroupAndTheLocalOnesInSix) {
  const std::vector<int32_t> w = pattern(26, 6, 512);  // globals: 5, 11, 17, 23
  const KvGroups g = KvGroups::of(26, w);
  EXPECT_EQ(g.layers_per_block, 4);
  EXPECT_EQ(g.window, (std::vector<int32_t>{0, 512, 512, 512, 512, 512, 512}));
  for (int32_t l : {5, 11, 17, 23}) EXPECT_EQ(g.group[static_cast<size_t>(l)], 0);
  expect_consistent(g, w);
}

TEST(KvCache, EveryLayerOfAGroupedCacheKeepsItsOwnRows) {
  KvShape shape{26, 1, 8};
  shape.layer_window = pattern(26, 6, 512);
  KvCache cache(shape, 7, KvType::F32);
  EXPECT_EQ(cache.bytes_per_block(), size_t{4} * 2 * 8 * 4 * kBlockTokens);  // 4 layers' K and V
  EXPECT_EQ(cache.bytes_total(), 7 * cache.bytes_per_block());
  EXPECT_EQ(cache.pool().n_groups(), 7);
  // Each group's layers in a block of that group (block g for group g):
  // no layer may overwrite another's rows.
  const auto block_of = [&](int32_t l) { return cache.groups().group[static_cast<size_t>(l)]; };
  std::vector<float> k(8), v(8), out(8);
  for (int32_t l = 0; l < 26; ++l) {
    std::iota(k.begin(), k.end(), 100.0f * l);
    std::iota(v.begin(), v.end(), -100.0f * l);
    cache.store(l, block_of(l), 5, k.data(), v.data());
  }
  for (int32_t l = 0; l < 26; ++l) {
    cache.load_key(l, block_of(l), 0, 5, out.data());
    EXPECT_EQ(out[3], 100.0f * l + 3) << "layer " << l;
    cache.load_value(l, block_of(l), 0, 5, out.data());
    EXPECT_EQ(out[3], -100.0f * l + 3) << "layer " << l;
  }
}

TEST(KvCache, ABudgetBuysBlocksOfOneGroupsLayers) {
  KvShape one{26, 1, 8}, grouped = one;
  grouped.layer_window = pattern(26, 2, 64);
  const size_t budget = KvCache::bytes_per_block(one, KvType::F16) * 100;
  // Half the layers per block: twice the blocks, the same bytes.
  EXPECT_EQ(KvCache::blocks_for_bytes(grouped, KvType::F16, budget),
            2 * KvCache::blocks_for_bytes(one, KvType::F16, budget));
  EXPECT_EQ(with_one_table(grouped).n_groups(), 1);
  EXPECT_TRUE(with_one_table(grouped).layer_window.empty());
}

TEST(BlockTable, TakesABlockPerGroupAndFreesAWindowedGroupAlone) {
  BlockPool pool(16, {0, 64, 64});
  BlockTable t;
  ASSERT_TRUE(t.reserve(pool, 40));  // 3 blocks in each of 3 groups
  ASSERT_EQ(t.n_groups(), 3);
  EXPECT_EQ(t.capacity(), 3 * kBlockTokens);
  EXPECT_EQ(pool.n_used(), 9);
  EXPECT_FALSE(t.reserve(pool, 81));  // 9 more wanted, 7 free
  EXPECT_EQ(t.capacity(), 3 * kBlockTokens);
  EXPECT_EQ(pool.n_used(), 9);
  t.release_front(pool, 2, 2);
  EXPECT_EQ(t.n_held(), 7);
  EXPECT_EQ(t.blocks(2)[0], kNoBlock);
  EXPECT_NE(t.blocks(1)[0], kNoBlock);
  ASSERT_TRUE(t.reserve(pool, 49));
  EXPECT_EQ(pool.n_used(), 10);
  BlockTable copy = t.share(pool);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(copy.own_blocks(pool, 3 * kBlockTokens, 49, copies));
  EXPECT_EQ(copies.size(), 3u);  // the fourth block of each group
  copy.release_all(pool);
  t.release_all(pool);
  EXPECT_EQ(pool.n_used(), 0);
}

// Three full blocks in a global group and one sliding over 32 tokens,
// cached; then group 1's block `first_freed` goes back to the pool before
// the others (as a window frees it) and is evicted. Returns the tokens the
// same prompt then matches, and the table.
struct Match {
  int32_t tokens;
  BlockTable table;
  std::vector<std::vector<int32_t>> ids;  // the first table's blocks
};
Match after_evicting(BlockPool& pool, size_t first_freed) {
  std::vector<int32_t> tokens(3 * kBlockTokens);
  std::iota(tokens.begin(), tokens.end(), 7);
  BlockTable first;
  std::vector<uint64_t> hashes;
  EXPECT_TRUE(first.reserve(pool, static_cast<int32_t>(tokens.size())));
  cache_full_blocks(pool, tokens, static_cast<int32_t>(tokens.size()), first, hashes);
  Match m;
  m.ids = first.groups;
  // All cached: the sliding group's first block lies wholly before the
  // last 32 tokens, so the match does not take it.
  BlockTable again;
  std::vector<uint64_t> again_hashes;
  EXPECT_EQ(match_cached_prefix(pool, tokens, 3 * kBlockTokens, again, again_hashes), 3 * kBlockTokens);
  EXPECT_EQ(again.blocks(0), first.blocks(0));
  EXPECT_EQ(again.blocks(1), (std::vector<int32_t>{kNoBlock, m.ids[1][1], m.ids[1][2]}));
  again.release_all(pool);
  // Group 1's chosen block goes back first, then the rest.
  pool.release(m.ids[1][first_freed]);
  first.blocks(1)[first_freed] = kNoBlock;
  first.release_all(pool);
  EXPECT_EQ(pool.n_cached(), 6);
  while (pool.n_free() > pool.n_cached()) EXPECT_TRUE(pool.allocate());
  EXPECT_EQ(pool.allocate(), m.ids[1][first_freed]);
  m.tokens = match_cached_prefix(pool, tokens, 3 * kBlockTokens, m.table, hashes);
  return m;
}

TEST(PrefixCache, ASlidingGroupNeedsOnlyTheBlocksItsWindowReaches) {
  BlockPool pool(12, {0, 32});
  const Match m = after_evicting(pool, 0);
  // Block 0 lies wholly before the last 32 tokens: the whole prefix matches.
  EXPECT_EQ(m.tokens, 3 * kBlockTokens);
  EXPECT_EQ(m.table.blocks(0), m.ids[0]);
  EXPECT_EQ(m.table.blocks(1), (std::vector<int32_t>{kNoBlock, m.ids[1][1], m.ids[1][2]}));
}

TEST(PrefixCache, AGroupedPrefixEndsWhereASlidingGroupMissesABlockItReads) {
  BlockPool pool(12, {0, 32});
  const Match m = after_evicting(pool, 2);
  // Each group's block has its own name: group 0's block 2 does not stand in.
  EXPECT_EQ(m.tokens, 2 * kBlockTokens);
  EXPECT_EQ(m.table.blocks(0), (std::vector<int32_t>{m.ids[0][0], m.ids[0][1]}));
  EXPECT_EQ(m.table.blocks(1), (std::vector<int32_t>{m.ids[1][0], m.ids[1][1]}));
}

}  // namespace
}  // namespace duet
