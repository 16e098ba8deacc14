// A kernel timeline for machines without Nsight Systems (the lent H200 has ncu but no nsys; see
// docs/CUDA_DECODE.md, "In-graph timeline"). Loaded by the CUDA driver as an injection library:
//
//   CUDA_INJECTION64_PATH=build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=trace.csv polykv bench ...
//
// The driver calls InitializeInjection() at cuInit; it enables CUPTI's activity records of kernels
// (concurrent: kernels are not serialized, so programmatic dependent launches overlap as they do
// without the tracer), memory copies and memsets (and, with POLYKV_TRACE_API=1, the host's CUDA
// runtime calls: kind "api", stream = the CPU thread), and at exit writes one CSV row per record:
//   kind,start_ns,end_ns,stream,correlation,graph,graph_node,grid,block,name
// Timestamps are the GPU's (CUPTI's clock). Kernels of one graph launch share its correlation id, so
// scripts/cuda_trace_summary.py can cut a decode run into tokens. Not part of polykv: a dev tool, built
// with the CUDA backend when the toolkit has CUPTI.
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 8u << 20;

std::mutex g_mu;
std::vector<std::string> g_rows;  // CSV rows, in the order CUPTI delivers them
size_t g_dropped = 0;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

std::string csv_name(const char* s) {
  std::string out = s ? s : "?";
  for (char& c : out)
    if (c == ',' || c == '\n') c = ';';
  return out;
}

void add_row(const char* kind, uint64_t start, uint64_t end, uint32_t stream, uint32_t corr, uint32_t graph,
             uint64_t node, long grid, long block, const std::string& name) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s,%llu,%llu,%u,%u,%u,%llu,%ld,%ld,", kind, (unsigned long long)start,
                (unsigned long long)end, stream, corr, graph, (unsigned long long)node, grid, block);
  g_rows.push_back(buf + name);
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        add_row("kernel", k->start, k->end, k->streamId, k->correlationId, k->graphId, k->graphNodeId,
                long(k->gridX) * k->gridY * k->gridZ, long(k->blockX) * k->blockY * k->blockZ, csv_name(k->name));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        add_row("memcpy", m->start, m->end, m->streamId, m->correlationId, m->graphId, m->graphNodeId,
                long(m->bytes), long(m->copyKind), "memcpy");
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        add_row("memset", m->start, m->end, m->streamId, m->correlationId, m->graphId, m->graphNodeId,
                long(m->bytes), 0, "memset");
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME: {  // host: one CUDA runtime call (start/end on the CPU, same timebase)
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
        const char* name = nullptr;
        cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name);
        add_row("api", a->start, a->end, a->threadId, a->correlationId, 0, 0, 0, 0, csv_name(name));
        break;
      }
      default: break;
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
  std::free(buffer);
}

void at_exit() {
  cuptiActivityFlushAll(1);
  const char* path = std::getenv("POLYKV_TRACE");
  std::FILE* f = std::fopen(path && *path ? path : "polykv-trace.csv", "w");
  if (!f) {
    std::fprintf(stderr, "cuda_trace: cannot write %s\n", path ? path : "polykv-trace.csv");
    return;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(f, "kind,start_ns,end_ns,stream,correlation,graph,graph_node,grid,block,name\n");
  for (const std::string& r : g_rows) std::fprintf(f, "%s\n", r.c_str());
  std::fclose(f);
  std::fprintf(stderr, "cuda_trace: %zu records (%zu dropped)\n", g_rows.size(), g_dropped);
}

bool check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return true;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "cuda_trace: %s: %s\n", what, msg ? msg : "?");
  return false;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  static bool done = false;
  if (done) return 1;
  done = true;
  if (!check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "register callbacks")) return 0;
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernels");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enable memcpy");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enable memset");
  if (const char* api = std::getenv("POLYKV_TRACE_API"); api && std::strcmp(api, "1") == 0)
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), "enable runtime API");
  std::atexit(at_exit);
  return 1;
}
