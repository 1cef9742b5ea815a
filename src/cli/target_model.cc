#include "cli/target_model.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "cli/page_in.h"
#include "dist/communicator.h"
#include "model/tp_step.h"

namespace duet::cli {

Result<std::unique_ptr<Model>> load_target_model(const std::string& path, LoadMode mode, int32_t threads) {
  Communicator& comm = world();
  // --no-mmap reads the file itself; a page-in first would read it twice.
  if (comm.leads() && mode == LoadMode::kMap) page_in_with_progress(path);
  Result<std::unique_ptr<Model>> model = Model::load(path, mode, &comm);
  // Agreed before any work, so that no rank waits on one that failed.
  const bool all_loaded = comm.all_ok(static_cast<bool>(model));
  if (comm.leads()) {
    if (model && !all_loaded) return err(path, ": another rank could not load its shard");
    return model;
  }
  if (!all_loaded) std::exit(1);  // rank 0 reports it
  // An interrupt ends the run through rank 0 (a server stops, its model
  // goes away, and that stops this loop), not here mid-step.
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  ThreadPool pool(threads);
  Status st = follow_leader(**model, comm, pool);
  if (!st) std::fprintf(stderr, "duet: error: rank %d: %s\n", comm.rank(), st.error().message.c_str());
  std::exit(st ? 0 : 1);
}

}  // namespace duet::cli
