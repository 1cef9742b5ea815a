// A prompt through Model::forward on a fresh paged cache, in one batch or
// one token per pass: the logits of every position, so a test can hold
// prefill and decode to the same result.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/model.h"

namespace duet::testing {

inline std::vector<float> prompt_logits(Model& m, const std::vector<int32_t>& prompt, bool one_batch,
                                        KvType kv_type = KvType::F32) {
  ThreadPool pool(2);
  KvCache cache(m.kv_shape(), blocks_for_tokens(static_cast<int32_t>(prompt.size())) * m.kv_shape().n_groups(), kv_type);
  BlockTable table;
  EXPECT_TRUE(table.reserve(cache.pool(), static_cast<int32_t>(prompt.size())));
  const size_t vocab = static_cast<size_t>(m.config().n_vocab);
  std::vector<float> logits(prompt.size() * vocab);
  const size_t step = one_batch ? prompt.size() : 1;
  for (size_t i0 = 0; i0 < prompt.size(); i0 += step) {
    Batch b;
    const int32_t s = b.add_sequence(&table);
    for (size_t i = i0; i < i0 + step; ++i) b.add(prompt[i], static_cast<int32_t>(i), s, true);
    const Status st = m.forward(b, cache, pool, logits.data() + i0 * vocab);
    EXPECT_TRUE(st.ok()) << st.error().message;
  }
  return logits;
}

// Largest |a - b| relative to the largest |a| (both finite, a not all near 0).
inline float relative_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float diff = 0.0f, scale = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(std::isfinite(a[i]) && std::isfinite(b[i]));
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(a[i]));
  }
  EXPECT_GT(scale, 0.1f);
  return diff / scale;
}

}  // namespace duet::testing
