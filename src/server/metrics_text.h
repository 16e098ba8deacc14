// GET /metrics (Prometheus text exposition format 0.0.4) and GET /v1/status (the same figures as JSON,
// for the status page), from InferenceService::metrics() and the server's own counters.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/service.h"
#include "server/request_json.h"

namespace polykv::server {

// What the HTTP layer counts itself.
struct ServerCounters {
  int64_t http_requests = 0;  // every request answered
  int64_t http_errors = 0;    // answered with a 4xx or 5xx status
  int64_t rejected_busy = 0;  // 503: the queue was full
  int64_t in_flight = 0;      // generation requests submitted and not yet finished
  int64_t max_in_flight = 0;  // the queue limit
  double uptime_s = 0;
};

std::string prometheus_text(const ModelInfo& model, const ServiceMetrics& m, const std::vector<PoolInfo>& pools,
                            const ServerCounters& c);

Json status_json(const ModelInfo& model, const ServiceMetrics& m, const std::vector<PoolInfo>& pools,
                 const ServerCounters& c);

Json pool_json(const PoolInfo& p);  // one pool as GET /v1/pools lists it

}  // namespace polykv::server
