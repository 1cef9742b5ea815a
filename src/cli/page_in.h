// Loading shows progress: the weights of a mapped model are read from disk
// only when a forward pass first touches them, so a large model on a cold
// page cache would stall its first token for seconds with nothing on the
// screen. On a terminal, the file is read into the page cache first under
// a progress bar; the model's own mapping then finds every page there.
#pragma once

#include <cstdint>
#include <string>

namespace duet::cli {

// Reads `path` through the page cache with a bar ("load", MiB) when stderr
// is a terminal and the file holds at least `min_bytes` (smaller ones load
// in well under a second); does nothing otherwise (a log or a pipe sees no
// change). Errors are left for the loader to report.
void page_in_with_progress(const std::string& path, int64_t min_bytes = int64_t{256} << 20);

}  // namespace duet::cli
