// Paged attention over every KV storage type at every CPU level, against a
// double-precision softmax(q·Kᵀ)·V: exact to float rounding over the K/V the
// cache actually holds (so dequantization inside the kernel is right), and
// within a stated tolerance of attention over the original float K/V (what
// quantizing costs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/attention.h"
#include "kernels/registry.h"
#include "kv/kv_cache.h"

namespace duet {
namespace {

using testing::random_floats;

constexpr KvType kAllTypes[] = {KvType::F32, KvType::F16, KvType::Q8, KvType::Q4};

// Max abs difference from attention over the original float K/V, for inputs
// uniform in [-1, 1] (outputs are averages of V rows, so |out| <= 1): about
// 3x (at least 4x for f32, f16) the largest seen over these cases, which were
// f32 1.2e-7, f16 2.4e-4, q8 3.9e-3, q4 0.071.
float quantization_tolerance(KvType t) {
  switch (t) {
    case KvType::F32: return 1e-6f;
    case KvType::F16: return 1e-3f;
    case KvType::Q8: return 1.2e-2f;
    case KvType::Q4: return 0.2f;
  }
  return 0.0f;
}

// One KV head's keys and values for n_tokens positions, stored in a paged
// cache under a shuffled block table, plus the float originals.
struct Case {
  int32_t head_dim, n_group, n_tokens;
  KvShape shape;
  std::vector<float> k, v;  // [n_tokens][head_dim] originals
  std::vector<float> q;     // [n_group][head_dim]
  std::vector<int32_t> table;

  Case(int32_t hd, int32_t group, int32_t tokens, uint32_t seed)
      : head_dim(hd), n_group(group), n_tokens(tokens), shape{1, 2, hd} {
    k = random_floats(static_cast<size_t>(tokens * hd), seed);
    v = random_floats(static_cast<size_t>(tokens * hd), seed + 1);
    q = random_floats(static_cast<size_t>(group * hd), seed + 2);
    table.resize(static_cast<size_t>((tokens + kBlockTokens - 1) / kBlockTokens));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(seed));
  }

  // Stores K/V as head 1 of the cache (head 0 holds other values, so reading
  // the wrong head shows).
  KvCache fill(KvType t) const {
    KvCache cache(shape, static_cast<int32_t>(table.size()), t);
    std::vector<float> kk(static_cast<size_t>(2 * head_dim)), vv(kk.size());
    for (int32_t p = 0; p < n_tokens; ++p) {
      for (int32_t i = 0; i < head_dim; ++i) {
        kk[static_cast<size_t>(i)] = -7.0f;
        vv[static_cast<size_t>(i)] = 7.0f;
        kk[static_cast<size_t>(head_dim + i)] = k[static_cast<size_t>(p * head_dim + i)];
        vv[static_cast<size_t>(head_dim + i)] = v[static_cast<size_t>(p * head_dim + i)];
      }
      cache.store(0, table[static_cast<size_t>(p / kBlockTokens)], p % kBlockTokens, kk.data(), vv.data());
    }
    return cache;
  }

  PagedKv view(const KvCache& cache) const {
    return {cache.key_data(0, 0, 1), cache.value_data(0, 0, 1), cache.block_stride(),
            table.data(), kBlockTokens, cache.type(), cache.scales_offset()};
  }

  // The K/V rows the cache holds, decoded.
  void decoded(const KvCache& cache, std::vector<float>& dk, std::vector<float>& dv) const {
    dk.resize(k.size());
    dv.resize(v.size());
    for (int32_t p = 0; p < n_tokens; ++p) {
      const int32_t b = table[static_cast<size_t>(p / kBlockTokens)];
      cache.load_key(0, b, 1, p % kBlockTokens, &dk[static_cast<size_t>(p * head_dim)]);
      cache.load_value(0, b, 1, p % kBlockTokens, &dv[static_cast<size_t>(p * head_dim)]);
    }
  }
};

// out[g] = softmax(q[g] · K[begin..end) · scale) · V[begin..end), in double.
std::vector<double> reference(const Case& c, const std::vector<float>& k, const std::vector<float>& v,
                              int32_t begin, int32_t end, float scale, double softcap = 0.0) {
  const int32_t hd = c.head_dim;
  std::vector<double> out(static_cast<size_t>(c.n_group * hd), 0.0);
  for (int32_t g = 0; g < c.n_group; ++g) {
    std::vector<double> s;
    for (int32_t t = begin; t < end; ++t) {
      double d = 0;
      for (int32_t i = 0; i < hd; ++i)
        d += double{c.q[static_cast<size_t>(g * hd + i)]} * k[static_cast<size_t>(t * hd + i)];
      s.push_back(softcap > 0.0 ? softcap * std::tanh(d * scale / softcap) : d * scale);
    }
    const double m = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - m));
    for (int32_t t = begin; t < end; ++t)
      for (int32_t i = 0; i < hd; ++i)
        out[static_cast<size_t>(g * hd + i)] +=
            s[static_cast<size_t>(t - begin)] / sum * v[static_cast<size_t>(t * hd + i)];
  }
  return out;
}

double max_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

struct Range {
  int32_t begin, end;
};

TEST(Attention, EveryKvTypeAtEveryLevelMatchesDouble) {
  uint32_t seed = 1;
  for (int32_t hd : {8, 16, 64, 80, 128, 160, 256, 576}) {
    for (int32_t group : {1, 4}) {
      const Case c(hd, group, 70, seed += 10);
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      // Whole range; a window starting mid-block; one token; a range inside one block.
      for (Range r : {Range{0, 70}, Range{21, 70}, Range{0, 1}, Range{33, 40}}) {
        const std::vector<double> exact = reference(c, c.k, c.v, r.begin, r.end, scale);
        for (KvType t : kAllTypes) {
          const KvCache cache = c.fill(t);
          std::vector<float> dk, dv;
          c.decoded(cache, dk, dv);
          const std::vector<double> held = reference(c, dk, dv, r.begin, r.end, scale);
          for (CpuLevel level : testing::runnable_levels()) {
            std::vector<float> out(static_cast<size_t>(group * hd));
            attend_paged_at(level, c.q.data(), group, hd, c.view(cache), r.begin, r.end, scale, out.data());
            const std::string what = std::string(kv_type_name(t)) + " at " +
                                     std::string(cpu_level_name(level)) + ", head_dim " +
                                     std::to_string(hd) + ", group " + std::to_string(group) +
                                     ", tokens [" + std::to_string(r.begin) + ", " +
                                     std::to_string(r.end) + ")";
            // Over what the cache holds: float rounding only (seen: 1.3e-7).
            EXPECT_LT(max_diff(out, held), 1e-6) << what;
            // Over the original floats: what the storage type costs.
            EXPECT_LT(max_diff(out, exact), quantization_tolerance(t)) << what;
          }
        }
      }
    }
  }
}

TEST(Attention, SoftCapBendsScoresAtEveryLevel) {
  // Gemma 2's cap of the scores: large queries make it bite (uncapped, the
  // result is far from the capped reference), at every level and KV type.
  Case c(64, 4, 40, 5);
  for (float& x : c.q) x *= 8.0f;
  const float scale = 0.125f, cap = 2.0f;
  const std::vector<double> capped = reference(c, c.k, c.v, 0, 40, scale, cap);
  EXPECT_GT(max_diff(std::vector<float>(capped.begin(), capped.end()), reference(c, c.k, c.v, 0, 40, scale)), 0.05);
  for (KvType t : {KvType::F32, KvType::F16}) {
    const KvCache cache = c.fill(t);
    std::vector<float> dk, dv;
    c.decoded(cache, dk, dv);
    const std::vector<double> held = reference(c, dk, dv, 0, 40, scale, cap);
    for (CpuLevel level : testing::runnable_levels()) {
      std::vector<float> out(c.q.size());
      attend_paged_at(level, c.q.data(), 4, 64, c.view(cache), 0, 40, AttnScale{scale, cap}, out.data());
      EXPECT_LT(max_diff(out, held), 1e-6) << kv_type_name(t) << " at " << cpu_level_name(level);
    }
  }
}

TEST(Attention, FloatCachesDifferByRoundingOnlyBetweenLevels) {
  // The AVX-512 kernel (f32 and f16 caches) sums in another order than the
  // scalar loops (and uses its own exp): every level within float rounding
  // of the scalar one, and attend_paged equal to the active level's bits.
  const Case c(64, 4, 50, 99);
  for (KvType t : {KvType::F32, KvType::F16}) {
    const KvCache cache = c.fill(t);
    std::vector<float> ref(static_cast<size_t>(4 * 64));
    attend_paged_at(CpuLevel::kScalar, c.q.data(), 4, 64, c.view(cache), 0, 50, 0.125f, ref.data());
    for (CpuLevel level : testing::runnable_levels()) {
      std::vector<float> out(ref.size());
      attend_paged_at(level, c.q.data(), 4, 64, c.view(cache), 0, 50, 0.125f, out.data());
      for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(out[i], ref[i], 1e-6) << cpu_level_name(level) << " " << kv_type_name(t);
    }
    std::vector<float> active(ref.size()), dispatched(ref.size());
    attend_paged_at(active_cpu_level(), c.q.data(), 4, 64, c.view(cache), 0, 50, 0.125f, active.data());
    attend_paged(c.q.data(), 4, 64, c.view(cache), 0, 50, 0.125f, dispatched.data());
    EXPECT_EQ(dispatched, active) << kv_type_name(t);
  }
}

TEST(Attention, RowsEqualEachRowAloneBitForBit) {
  // A prefill chunk's rows through attend_paged_rows: causal ends, then
  // sliding-window begins (rows of one tile start in different blocks), 11
  // rows (more than one tile of the AVX-512 kernel). Each row's bits are
  // the ones attend_paged gives it alone, for every KV type, and f32 stays
  // within rounding of the double reference.
  for (int32_t hd : {64, 128, 256, 576}) {
    for (int32_t group : {1, 8}) {
      const Case c(hd, group, 90, static_cast<uint32_t>(hd + group));
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      const int32_t n_rows = 11;
      const size_t stride = static_cast<size_t>(group * hd);
      const auto q = random_floats(stride * n_rows, 77);
      for (int32_t window : {0, 20}) {
        std::vector<int32_t> begins, ends;
        for (int32_t r = 0; r < n_rows; ++r) {
          ends.push_back(70 + r + 1);  // rows at positions 70..80
          begins.push_back(window > 0 ? ends.back() - window : 0);
        }
        for (KvType t : kAllTypes) {
          const KvCache cache = c.fill(t);
          std::vector<float> rows(stride * n_rows, NAN);
          attend_paged_rows(q.data(), stride, n_rows, group, hd, c.view(cache), begins.data(), ends.data(), scale,
                            rows.data(), stride);
          for (int32_t r = 0; r < n_rows; ++r) {
            std::vector<float> alone(stride, NAN);
            attend_paged(q.data() + r * stride, group, hd, c.view(cache), begins[static_cast<size_t>(r)],
                         ends[static_cast<size_t>(r)], scale, alone.data());
            ASSERT_EQ(std::memcmp(alone.data(), rows.data() + r * stride, stride * sizeof(float)), 0)
                << kv_type_name(t) << " head_dim " << hd << " group " << group << " window " << window << " row " << r;
            if (t != KvType::F32) continue;
            Case row = c;
            row.q.assign(q.begin() + static_cast<std::ptrdiff_t>(r * stride),
                         q.begin() + static_cast<std::ptrdiff_t>((r + 1) * stride));
            const auto exact = reference(row, c.k, c.v, begins[static_cast<size_t>(r)], ends[static_cast<size_t>(r)], scale);
            EXPECT_LT(max_diff(alone, exact), 1e-6) << "head_dim " << hd << " group " << group << " row " << r;
          }
        }
      }
    }
  }
}

TEST(Attention, EveryLevelsRowKernelGivesATileRowItsBitsAlone) {
  // attend_paged_rows tests the active level only; here each level's vector
  // kernel (AVX2, AVX-512) directly: a full tile (attn_tile_rows: 32 rows
  // of one query head, 21 of 3, 8 of 8) with sliding-window begins that
  // cross blocks, each row's bits against the kernel on that row alone,
  // every KV type, odd and even groups (the kernels pair heads).
  for (int32_t hd : {48, 64, 128}) {
    for (int32_t group : {1, 3, 8}) {
      const int32_t n_rows = attn_tile_rows(group);
      const Case c(hd, group, 46 + n_rows, static_cast<uint32_t>(3 * hd + group));
      const size_t stride = static_cast<size_t>(group * hd);
      const auto q = random_floats(stride * n_rows, 78);
      std::vector<int32_t> begins, ends;
      for (int32_t r = 0; r < n_rows; ++r) {
        ends.push_back(45 + r + 1);
        begins.push_back(r % 2 == 0 ? 0 : ends.back() - 18);
      }
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      for (CpuLevel level : testing::runnable_levels()) {
        const AttendRowsFn rows_fn = kernels_at(level).attend_rows();
        if (!rows_fn) continue;
        for (KvType t : kAllTypes) {
          if (t == KvType::Q4 && hd % 32 != 0) continue;
          const KvCache cache = c.fill(t);
          std::vector<float> rows(stride * n_rows, NAN);
          ASSERT_TRUE(rows_fn(q.data(), stride, n_rows, group, hd, c.view(cache), begins.data(), ends.data(), scale,
                              rows.data(), stride));
          for (int32_t r = 0; r < n_rows; ++r) {
            std::vector<float> alone(stride, NAN);
            ASSERT_TRUE(rows_fn(q.data() + r * stride, 0, 1, group, hd, c.view(cache), &begins[static_cast<size_t>(r)],
                                &ends[static_cast<size_t>(r)], scale, alone.data(), 0));
            ASSERT_EQ(std::memcmp(alone.data(), rows.data() + r * stride, stride * sizeof(float)), 0)
                << cpu_level_name(level) << " " << kv_type_name(t) << " head_dim " << hd << " group " << group
                << " row " << r;
          }
        }
      }
    }
  }
}

// Every KV head of a cache (n_heads of them, each with its own random K/V),
// under a shuffled block table, for the split decode.
struct Heads {
  int32_t n_heads, head_dim, n_group, n_tokens;
  std::vector<float> q;  // [n_heads][n_group][head_dim]
  std::vector<int32_t> table;
  KvCache cache;

  Heads(int32_t heads, int32_t hd, int32_t group, int32_t tokens, KvType t, uint32_t seed)
      : n_heads(heads), head_dim(hd), n_group(group), n_tokens(tokens),
        q(random_floats(static_cast<size_t>(heads * group * hd), seed)),
        table(static_cast<size_t>((tokens + kBlockTokens - 1) / kBlockTokens)),
        cache(KvShape{1, heads, hd}, static_cast<int32_t>(table.size()), t) {
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(seed));
    for (int32_t p = 0; p < tokens; ++p) {
      const auto k = random_floats(static_cast<size_t>(heads * hd), seed + 1 + 2 * static_cast<uint32_t>(p));
      const auto v = random_floats(k.size(), seed + 2 + 2 * static_cast<uint32_t>(p));
      cache.store(0, table[static_cast<size_t>(p / kBlockTokens)], p % kBlockTokens, k.data(), v.data());
    }
  }
  PagedKv view(int32_t h) const {
    return {cache.key_data(0, 0, h), cache.value_data(0, 0, h), cache.block_stride(),
            table.data(), kBlockTokens, cache.type(), cache.scales_offset()};
  }
  size_t head_stride() const { return static_cast<size_t>(cache.key_data(0, 0, 1) - cache.key_data(0, 0, 0)); }
};

TEST(Attention, SplitDecodeEqualsUnsplitToRounding) {
  // The keys of a decode row cut into parts (flash-decoding) and merged:
  // every head's output within float rounding of attend_paged over the whole
  // range, at awkward sizes: a partial last block, windows starting mid-block,
  // ranges shorter than the split (empty parts), inside one block, one token;
  // every KV type and CPU level, head dims the vector kernel takes (48 and
  // 160: q4 not, their rows are not whole 32-element groups) and one it does
  // not (8), groups of 1, 2 and 8 (scores by rows, and by a transpose).
  uint32_t seed = 3;
  for (int32_t hd : {8, 48, 64, 128, 160, 256}) {
    for (int32_t group : {1, 2, 8}) {
      for (KvType t : kAllTypes) {
        const Heads c(3, hd, group, 150, t, seed += 7);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        const size_t per_head = static_cast<size_t>(group * hd);
        for (Range r : {Range{0, 150}, Range{37, 150}, Range{0, 5}, Range{140, 150}, Range{149, 150}, Range{3, 36}}) {
          for (CpuLevel level : testing::runnable_levels()) {
            std::vector<float> whole(per_head * 3);
            for (int32_t h = 0; h < 3; ++h)
              attend_paged_at(level, c.q.data() + h * per_head, group, hd, c.view(h), r.begin, r.end, scale,
                              whole.data() + h * per_head);
            for (int32_t parts : {1, 2, 3, 7, 20}) {
              std::vector<float> split(whole.size(), NAN);
              attend_paged_decode_at(level, parts, c.q.data(), 3, group, hd, c.view(0), c.head_stride(), r.begin,
                                     r.end, scale, split.data());
              double diff = 0;
              for (size_t i = 0; i < whole.size(); ++i) diff = std::max(diff, double{std::fabs(split[i] - whole[i])});
              EXPECT_LT(diff, 1e-6) << kv_type_name(t) << " at " << cpu_level_name(level) << ", head_dim " << hd
                                    << ", group " << group << ", tokens [" << r.begin << ", " << r.end << "), "
                                    << parts << " parts";
            }
          }
        }
      }
    }
  }
}

TEST(Attention, SplitDecodeOnAPoolEqualsItsPartsRunInTurn) {
  // The pool's split is fixed by its size (two parts per thread here, the
  // range being long enough): the same bits as those parts run one after
  // another, whichever thread ran which.
  const Heads c(4, 64, 8, 16 * 40 + 9, KvType::F16, 11);
  const size_t n = c.q.size();
  ThreadPool pool(2);
  for (Range r : {Range{0, c.n_tokens}, Range{100, c.n_tokens}}) {
    std::vector<float> on_pool(n, NAN), in_turn(n, NAN);
    attend_paged_decode(pool, c.q.data(), 4, 8, 64, c.view(0), c.head_stride(), r.begin, r.end, 0.125f,
                        on_pool.data());
    attend_paged_decode_at(active_cpu_level(), 4, c.q.data(), 4, 8, 64, c.view(0), c.head_stride(), r.begin, r.end,
                           0.125f, in_turn.data());
    EXPECT_EQ(std::memcmp(on_pool.data(), in_turn.data(), n * sizeof(float)), 0) << r.begin;
  }
}

TEST(Attention, SplitDecodeKeepsTheSoftCap) {
  // A soft-cap takes the generic loops in every part; still equal to the unsplit result.
  Heads c(2, 64, 4, 100, KvType::F32, 21);
  for (float& x : c.q) x *= 8.0f;
  const AttnScale scale{0.125f, 2.0f};
  std::vector<float> whole(c.q.size()), split(c.q.size());
  for (int32_t h = 0; h < 2; ++h)
    attend_paged(c.q.data() + h * 256, 4, 64, c.view(h), 0, 100, scale, whole.data() + h * 256);
  attend_paged_decode_at(active_cpu_level(), 3, c.q.data(), 2, 4, 64, c.view(0), c.head_stride(), 0, 100, scale,
                         split.data());
  for (size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(split[i], whole[i], 1e-6) << i;
}

}  // namespace
}  // namespace duet
