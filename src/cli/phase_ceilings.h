// Which measured ceiling each phase of a model runs against: decode streams
// every weight once per token and is judged by the read bandwidth; prefill
// reuses weights across the batch and is judged by the FMA peak (float
// weights) or the int8-dot peak (quantized weights). Shared by `duet bench
// --roofline` and the per-answer verdict of `duet serve`.
#pragma once

#include "core/dtype.h"
#include "engine/engine.h"
#include "kernels/roofline.h"
#include "model/model.h"
#include "server/request_stats.h"

namespace duet::cli {

// The weight type that dominates the model's bytes (the FFN's, or a
// mixture of experts' experts).
DType main_dtype(const Model& m);

// Prefill's ceiling for weights of type `weights`, in G operations/s.
double prefill_ceiling(const Roofline& r, DType weights);

// The probes run on the engine's threads (a quick pass: a buffer of
// `probe_mib`, one repetition) and the model's per-token costs.
server::RooflineBasis measure_serve_roofline(const Model& m, Engine& engine, size_t probe_mib);

}  // namespace duet::cli
