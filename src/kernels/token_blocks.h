// How the packed GEMMs of every SIMD level walk a long batch: tokens in
// blocks whose activations stay in L2 while every 16-row group of the
// weights passes them, each group against a block's tokens a tile at a
// time, so a group's weights stay in L1/L2 across its tiles.
#pragma once

#include <cstddef>
#include <cstdint>

namespace duet {

inline constexpr size_t kTokBlockBytes = 256 << 10;

// Tokens per block of tok_bytes each: the whole tiles that fit, at least one.
inline int64_t tokens_per_block(size_t tok_bytes, int tile) {
  const int64_t fit = static_cast<int64_t>(kTokBlockBytes / tok_bytes) / tile * tile;
  return fit > tile ? fit : tile;
}

// fn(g, t, nt): group g against tokens [t, t + nt), nt <= tile, for every
// group and token, block by block.
template <class Fn>
void for_each_tile(int64_t n_tok, int64_t n_groups, size_t tok_bytes, int tile, Fn&& fn) {
  const int64_t tok_block = tokens_per_block(tok_bytes, tile);
  for (int64_t t0 = 0; t0 < n_tok; t0 += tok_block) {
    const int64_t t_end = n_tok - t0 < tok_block ? n_tok : t0 + tok_block;
    for (int64_t g = 0; g < n_groups; ++g)
      for (int64_t t = t0; t < t_end; t += tile) fn(g, t, t_end - t < tile ? t_end - t : tile);
  }
}

}  // namespace duet
