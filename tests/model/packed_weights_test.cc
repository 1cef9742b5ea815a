// PackedWeights: one pack() call's copies share one buffer (a buffer per
// matrix rounded each up to 2 MiB huge pages, twice a small model's
// weights), every slot naming a tensor gets the same copy, the counts are
// the copies' and their sources' bytes, and each copy holds its own matrix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/packed_gemm.h"
#include "model/packed_weights.h"

namespace duet {
namespace {

struct Matrix {
  std::vector<uint8_t> bytes;
  TensorView view;
};

// Q8_0 rows of random quants, each block's f16 scale small and finite.
Matrix q8_matrix(int64_t k, int64_t rows, uint32_t seed) {
  Matrix m;
  const size_t row = static_cast<size_t>(k / 32) * 34;
  m.bytes.resize(row * static_cast<size_t>(rows));
  std::mt19937 rng(seed);
  for (auto& b : m.bytes) b = static_cast<uint8_t>(rng());
  for (size_t i = 0; i < m.bytes.size(); i += 34) m.bytes[i + 1] = static_cast<uint8_t>(0x20 | (rng() & 7));
  m.view.name = "w" + std::to_string(seed);
  m.view.dtype = DType::Q8_0;
  m.view.n_dims = 2;
  m.view.ne = {k, rows, 1, 1};
  m.view.data = m.bytes.data();
  m.view.nbytes = m.bytes.size();
  return m;
}

TEST(PackedWeights, OneCallsCopiesShareOneBufferAndKeepTheirRows) {
  std::vector<Matrix> ms;
  ms.push_back(q8_matrix(256, 32, 1));
  ms.push_back(q8_matrix(512, 48, 2));
  ms.push_back(q8_matrix(64, 16, 3));
  if (!packable(ms[0].view)) GTEST_SKIP() << "no packed kernels on this CPU";
  // The first matrix twice, as a tied head and embedding name one tensor.
  std::vector<const TensorView*> slots = {&ms[0].view, &ms[1].view, &ms[0].view, &ms[2].view};
  std::vector<const TensorView**> ptrs;
  for (auto& s : slots) ptrs.push_back(&s);
  PackedWeights packed;
  ASSERT_TRUE(packed.pack(ptrs).ok());

  EXPECT_EQ(slots[0], slots[2]);
  size_t sum_packed = 0, sum_source = 0, span_bound = 0;
  for (const Matrix& m : ms) {
    sum_packed += packed_bytes(m.view);
    sum_source += m.view.nbytes;
    span_bound += (packed_bytes(m.view) + 4095) / 4096 * 4096;
  }
  EXPECT_EQ(packed.bytes(), sum_packed);
  EXPECT_EQ(packed.source_bytes(), sum_source);

  const auto* lo = static_cast<const uint8_t*>(slots[0]->data);
  const uint8_t* hi = lo;
  for (size_t i : {0u, 1u, 3u}) {
    ASSERT_TRUE(slots[i]->packed);
    const auto* p = static_cast<const uint8_t*>(slots[i]->data);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    lo = std::min(lo, p);
    hi = std::max(hi, p + packed_bytes(*slots[i]));
  }
  EXPECT_LE(static_cast<size_t>(hi - lo), span_bound) << "the copies are not in one buffer";

  const Matrix* sources[] = {&ms[0], &ms[1], &ms[0], &ms[2]};
  for (size_t i = 0; i < slots.size(); ++i) {
    const Matrix& m = *sources[i];
    const size_t row = m.view.nbytes / static_cast<size_t>(m.view.rows());
    std::vector<uint8_t> out(row);
    for (int64_t r : {int64_t{0}, m.view.rows() - 1}) {
      unpack_row(*slots[i], r, out.data());
      EXPECT_EQ(std::memcmp(out.data(), m.bytes.data() + static_cast<size_t>(r) * row, row), 0) << i << " row " << r;
    }
  }
}

TEST(PackedWeights, NothingPackableLeavesTheSlotsAlone) {
  Matrix odd = q8_matrix(256, 15, 4);  // rows not a multiple of 16
  const TensorView* slot = &odd.view;
  const TensorView** ptrs[] = {&slot};
  PackedWeights packed;
  ASSERT_TRUE(packed.pack(ptrs).ok());
  EXPECT_EQ(slot, &odd.view);
  EXPECT_EQ(packed.bytes(), 0u);
}

}  // namespace
}  // namespace duet
