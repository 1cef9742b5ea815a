// The engine's metrics in Prometheus' text exposition format, for GET /metrics.
#pragma once

#include <string>

#include "engine/metrics.h"

namespace duet::server {

std::string prometheus_text(const EngineMetrics& m, int32_t in_flight);

}  // namespace duet::server
