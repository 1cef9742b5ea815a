// A file being written that an interrupt must not leave behind: while a
// RemoveOnSignal is alive, SIGINT, SIGTERM, SIGHUP or SIGXFSZ (the file-size
// limit; each where its handler is still the default) first unlinks its path,
// then ends the process as the signal would have. Writers put data in a temporary file and rename it into
// place (formats/gguf_writer.cc); without this an interrupted `convert` or
// `quantize` would leave the temporary beside the destination.
#pragma once

#include <string>

namespace duet {

// The temporary a writer of `path` fills before renaming it into place:
// path.partial.PID, so two writers never share one and a later run can
// tell whose it was.
std::string partial_path(const std::string& path);

// Removes every path.partial.PID whose process no longer runs: what a
// kill -9 (which no handler sees) or a crash left of an earlier write.
// Returns how many it removed. A PID that runs again, reused by another
// process, keeps its file: the cleaner never guesses.
int remove_stale_partials(const std::string& path);

class RemoveOnSignal {
 public:
  explicit RemoveOnSignal(const std::string& path);
  ~RemoveOnSignal();
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;
};

}  // namespace duet
