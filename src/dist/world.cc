#include <cstdio>
#include <cstdlib>
#include <memory>

#include "dist/communicator.h"
#include "dist/solo_communicator.h"
#ifdef DUET_MPI
#include "dist/mpi_communicator.h"
#endif

namespace duet {
namespace {

// The launcher's rank count: Open MPI's mpirun sets the first, other
// launchers (Slurm, Hydra) the second. Unset or 1: a single process, and
// MPI stays uninitialised.
int launched_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 1;
}

std::unique_ptr<Communicator> make_world() {
#ifdef DUET_MPI
  if (launched_ranks() > 1) return mpi_world();
#else
  if (launched_ranks() > 1)
    std::fprintf(stderr, "duet: note: built without MPI, so each of the %d launched processes runs alone\n",
                 launched_ranks());
#endif
  return std::make_unique<SoloCommunicator>();
}

}  // namespace

Communicator& world() {
  static const std::unique_ptr<Communicator> w = make_world();
  return *w;
}

}  // namespace duet
