// What a SentencePiece vocabulary written as GGUF must share with llama.cpp's
// conversion of the same vocabulary, for the tests of every path that writes
// one (llama2.c import, SentencePiece import, `duet convert`).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "formats/gguf.h"
#include "formats/llama_names.h"

namespace duet::testing {

// Model, tokens, scores (bit for bit), types and special ids.
inline void expect_same_llama_vocab(const GgufFile& ours, const GgufFile& ref) {
  namespace n = gguf_names;
  EXPECT_EQ(*ours.get_string(n::kTokModel), *ref.get_string(n::kTokModel));
  EXPECT_EQ(*ours.get_strings(n::kTokTokens), *ref.get_strings(n::kTokTokens));
  const auto a = *ours.get_floats(n::kTokScores), b = *ref.get_floats(n::kTokScores);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  EXPECT_EQ(*ours.get_ints(n::kTokTypes), *ref.get_ints(n::kTokTypes));
  for (const std::string& k : {n::kTokBos, n::kTokEos, n::kTokUnk})
    EXPECT_EQ(*ours.get_uint(k), *ref.get_uint(k)) << k;
}

}  // namespace duet::testing
