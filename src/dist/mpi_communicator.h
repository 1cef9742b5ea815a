// MPI_COMM_WORLD as a Communicator (built only with DUET_MPI). Errors stay
// fatal (MPI's default handler): a rank that dies takes the job down
// rather than leaving the others waiting in a collective.
#pragma once

#include <memory>

#include "dist/communicator.h"

namespace duet {

// Initialises MPI (calls from any thread, one at a time: the server's
// engine thread runs the forward pass) and finalises it at exit.
std::unique_ptr<Communicator> mpi_world();

}  // namespace duet
