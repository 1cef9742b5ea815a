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

// fn(g, t, nt, pass): as for_each_tile, but a block's tokens in tiles of
// nearly equal size where whole tiles would leave a short last one (32
// tokens: 11 + 11 + 10, not 12 + 12 + 8; 25: 9 + 8 + 8, not 12 + 12 + 1),
// since a kernel's rate falls with fewer tokens per pass over the weights;
// pass: how many passes over group g came before (0: the one that brings
// it from memory).
template <class Fn>
void for_each_even_tile(int64_t n_tok, int64_t n_groups, size_t tok_bytes, int tile, Fn&& fn) {
  const int64_t tok_block = tokens_per_block(tok_bytes, tile);
  int64_t passes = 0;
  for (int64_t t0 = 0; t0 < n_tok; t0 += tok_block) {
    const int64_t n = n_tok - t0 < tok_block ? n_tok - t0 : tok_block;
    const int64_t tiles = (n + tile - 1) / tile, small = n / tiles, n_big = n % tiles;
    for (int64_t g = 0; g < n_groups; ++g)
      for (int64_t i = 0, t = t0; i < tiles; t += small + (i < n_big), ++i) fn(g, t, small + (i < n_big), passes + i);
    passes += tiles;
  }
}

}  // namespace duet
