// Activation statistics for activation-aware quantization (`duet quantize
// --calibrate`): the model runs over calibration text and, for every matrix
// product, records the mean squared activation of each input channel. Channel
// i of a weight matrix multiplies activation i, so the expected squared error
// a weight error e adds to the output is e^2 * E[x_i^2]: these means are the
// importance the quantizers weight their error with.
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "quantize/policy.h"
#include "model/model.h"

namespace duet {

// Runs `tokens` through the model in consecutive windows of up to ctx tokens
// (each a fresh sequence, one batched forward each) and returns, per weight
// name, E[x^2] per input channel over all rows that weight multiplied.
Result<ChannelImportance> collect_channel_importance(Model& model,
                                                     const std::vector<int32_t>& tokens,
                                                     int32_t ctx, ThreadPool& pool);

}  // namespace duet
