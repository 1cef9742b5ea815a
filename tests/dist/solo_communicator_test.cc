// One process's communicator: its collectives are those of a single rank,
// so the decoder's tensor-parallel calls need no special case. (The MPI
// world's are compared with one process under mpirun: tests/mpi/.)
#include <gtest/gtest.h>

#include <vector>

#include "dist/solo_communicator.h"

namespace duet {
namespace {

TEST(SoloCommunicator, GatherIsTheOnlyRanksPart) {
  SoloCommunicator c;
  const std::vector<float> part{1.0f, -2.0f, 3.5f};
  std::vector<float> all(3, 0.0f);
  const std::vector<size_t> counts{3};
  c.gather(part.data(), all.data(), counts);
  EXPECT_EQ(all, part);
  c.gather(all.data(), all.data(), counts);  // in place
  EXPECT_EQ(all, part);
}

TEST(SoloCommunicator, OneRankLeadsAndAgreesWithItself) {
  SoloCommunicator c;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  EXPECT_TRUE(c.leads());
  std::vector<float> x{1.0f, 2.0f};
  c.allreduce_sum(x.data(), x.size());
  EXPECT_EQ(x, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_TRUE(c.all_ok(true));
  EXPECT_FALSE(c.all_ok(false));
}

}  // namespace
}  // namespace duet
