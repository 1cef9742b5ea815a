// A file being written that an interrupt must not leave behind: while a
// RemoveOnSignal is alive, SIGINT, SIGTERM, SIGHUP or SIGXFSZ (the file-size
// limit; each where its handler is still the default) first unlinks its path,
// then ends the process as the signal would have. Writers put data in a temporary file and rename it into
// place (formats/gguf_writer.cc); without this an interrupted `convert` or
// `quantize` would leave the temporary beside the destination.
#pragma once

#include <string>

namespace duet {

class RemoveOnSignal {
 public:
  explicit RemoveOnSignal(const std::string& path);
  ~RemoveOnSignal();
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;
};

}  // namespace duet
