// Long work reports how far it got through one of these, so a front end can
// draw a progress bar (cli/progress.h) without the work knowing about
// terminals: `done` of `total` units (bytes, tensors), called as it goes.
#pragma once

#include <cstdint>
#include <functional>

namespace duet {

using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

}  // namespace duet
