// L2 prefetch on a side stream (l2_prefetch.h).
#include "backend/cuda/l2_prefetch.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"

namespace polykv::cuda {
namespace {

constexpr size_t kLine = 128;

struct Ranges {
  uint64_t piece;  // bytes per bulk prefetch (sm_90)
  const char* p[kMaxPrefetchRanges];
  uint64_t bytes[kMaxPrefetchRanges];
  uint64_t first[kMaxPrefetchRanges + 1];  // prefix sums of the ranges' units (pieces or lines)
  int n;
};

// Unit u of all ranges: range r with first[r] <= u < first[r + 1]. Units are a.piece (sm_90) or kLine bytes;
// sm_90's pieces start at the range's first 16-byte boundary and stop at its last (the ends are left out: a hint).
__global__ void l2_prefetch_kernel(Ranges a) {
  const uint64_t total = a.first[a.n];
  for (uint64_t u = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < total; u += uint64_t(gridDim.x) * blockDim.x) {
    int r = 0;
    while (r + 1 < a.n && u >= a.first[r + 1]) ++r;
    const uint64_t k = u - a.first[r];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const uintptr_t b = (reinterpret_cast<uintptr_t>(a.p[r]) + 15) & ~uintptr_t(15);
    const uintptr_t e = (reinterpret_cast<uintptr_t>(a.p[r]) + a.bytes[r]) & ~uintptr_t(15);
    const uintptr_t s = b + k * a.piece;
    if (s >= e) continue;
    const uint32_t n = uint32_t(e - s < a.piece ? e - s : a.piece);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(s), "r"(n) : "memory");
#elif defined(__CUDA_ARCH__)
    const char* s = a.p[r] + k * kLine;
    asm volatile("prefetch.global.L2 [%0];" ::"l"(s));
#endif
  }
}

int64_t env_mb(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback << 20;
  return int64_t(std::max(0L, std::strtol(v, nullptr, 10))) << 20;
}

std::atomic<int64_t> g_budget{-1};  // -1: not read from the environment yet
std::atomic<uint64_t> g_launches{0};

}  // namespace

size_t prefetch_budget_bytes() {
  int64_t b = g_budget.load(std::memory_order_relaxed);
  if (b < 0) {
    b = env_mb("POLYKV_CUDA_PREFETCH_MB", 0);
    g_budget.store(b, std::memory_order_relaxed);
  }
  return size_t(b);
}

void set_prefetch_budget_bytes(size_t bytes) { g_budget.store(int64_t(bytes), std::memory_order_relaxed); }

size_t prefetch_max_kv_bytes() {
  static const size_t b = size_t(env_mb("POLYKV_CUDA_PREFETCH_KV_MB", 16));
  return b;
}

// POLYKV_CUDA_PREFETCH_PIECE_KB (bytes per bulk prefetch, default 16 KiB) and POLYKV_CUDA_PREFETCH_BLOCKS (blocks of
// one warp; default 0: one per multiprocessor): the launch's shape, for A/B runs. Read once.
static size_t piece_bytes() {
  static const size_t b = [] {
    const char* v = std::getenv("POLYKV_CUDA_PREFETCH_PIECE_KB");
    const long kb = v && *v ? std::strtol(v, nullptr, 10) : 16;
    return size_t(std::clamp(kb, 1L, 1L << 20)) << 10;
  }();
  return b;
}
static int block_limit() {
  static const int b = [] {
    const char* v = std::getenv("POLYKV_CUDA_PREFETCH_BLOCKS");
    return v && *v ? int(std::max(0L, std::strtol(v, nullptr, 10))) : 0;
  }();
  return b;
}

uint64_t prefetch_launches() { return g_launches.load(std::memory_order_relaxed); }

void launch_l2_prefetch(std::span<const PrefetchRange> ranges, cudaStream_t stream) {
  int device = 0, major = 0, sms = 0;
  POLYKV_CUDA_CHECK(cudaGetDevice(&device));
  POLYKV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  POLYKV_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const size_t unit = major >= 9 ? piece_bytes() : kLine;
  Ranges a{};
  a.piece = unit;
  for (const PrefetchRange& r : ranges) {
    if (a.n == kMaxPrefetchRanges) break;
    if (!r.p || r.bytes == 0) continue;
    a.p[a.n] = static_cast<const char*>(r.p);
    a.bytes[a.n] = r.bytes;
    a.first[a.n + 1] = a.first[a.n] + (r.bytes + unit - 1) / unit;
    ++a.n;
  }
  if (a.n == 0 || a.first[a.n] == 0) return;
  // One warp a multiprocessor (every copy unit gets pieces), more for the line form.
  const uint64_t units = a.first[a.n];
  const int threads = 32;
  const uint64_t cap = block_limit() > 0 ? uint64_t(block_limit()) : uint64_t(std::max(sms, 1)) * (major >= 9 ? 1 : 4);
  const int blocks = int(std::min<uint64_t>((units + threads - 1) / threads, cap));
  l2_prefetch_kernel<<<blocks, threads, 0, stream>>>(a);
  POLYKV_CUDA_LAUNCHED();
  g_launches.fetch_add(1, std::memory_order_relaxed);
}

SideStreamPrefetch::SideStreamPrefetch(int device) {
  int cur = -1;
  POLYKV_CUDA_CHECK(cudaGetDevice(&cur));
  if (cur != device) POLYKV_CUDA_CHECK(cudaSetDevice(device));
  POLYKV_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  POLYKV_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  POLYKV_CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
}

SideStreamPrefetch::~SideStreamPrefetch() {
  // From CudaBackend's destructor: throws nothing.
  if (side_) cudaStreamSynchronize(side_);
  if (fork_) cudaEventDestroy(fork_);
  if (join_) cudaEventDestroy(join_);
  if (side_) cudaStreamDestroy(side_);
  cudaGetLastError();
}

void SideStreamPrefetch::issue(cudaStream_t main, std::span<const PrefetchRange> ranges) {
  POLYKV_CUDA_CHECK(cudaEventRecord(fork_, main));
  POLYKV_CUDA_CHECK(cudaStreamWaitEvent(side_, fork_, 0));
  launch_l2_prefetch(ranges, side_);
  pending_ = true;
  ++issued_;
}

void SideStreamPrefetch::join(cudaStream_t main) {
  if (!pending_) return;
  POLYKV_CUDA_CHECK(cudaEventRecord(join_, side_));
  POLYKV_CUDA_CHECK(cudaStreamWaitEvent(main, join_, 0));
  pending_ = false;
}

}  // namespace polykv::cuda
