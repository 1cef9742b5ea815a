// general.file_type: llama.cpp's LLAMA_FTYPE numbering, which says what type
// most of a file's matrices have.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace duet {

// The LLAMA_FTYPE of a file whose matrices are mostly `t`; an error for a
// type no GGUF writer here produces.
Result<uint32_t> llama_file_type(DType t);

}  // namespace duet
