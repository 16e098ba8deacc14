// Weights into L2 while the GPU waits on latency (Backend::prefetch_weights; docs/CUDA_DECODE.md, "L2 prefetch").
//
// A decode token leaves the memory system idle for much of its time: the KV store, the attention over a short
// context, the norms and the gated activation are chains of latency with few bytes in flight (~15 us a layer of
// synth llama-3.1-8b at depth 0, docs/results/gpu-2026-12-04d/V5). A prefetch issued when such a stretch begins
// moves the next mat-vecs' first weight bytes into L2 under it, so those mat-vecs find them there.
//
// The prefetch kernel runs on a side stream forked from the backend's stream: it depends on the op before the
// fork and nothing waits for it until join(), which the backend calls at the end of the step (before a recorded
// graph's capture ends). It only issues prefetch instructions (no loads into registers, no stores): results
// never depend on it, and the ops between fork and join keep their programmatic dependent launches.
// Host-clean (no device headers in the interface).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/cuda/cuda_context.h"

namespace polykv::cuda {

struct PrefetchRange {
  const void* p = nullptr;  // device memory, any alignment
  size_t bytes = 0;
};
constexpr int kMaxPrefetchRanges = 4;

// Issues L2 prefetches of [p, p + bytes) of every range on `stream` (at most kMaxPrefetchRanges; empty ranges are
// skipped). sm_90: bulk prefetches (cp.async.bulk.prefetch.L2) of 64 KiB pieces, the unaligned ends by line;
// older GPUs: one prefetch.global.L2 per 128-byte line. A hint: the bytes are never read into the kernel.
void launch_l2_prefetch(std::span<const PrefetchRange> ranges, cudaStream_t stream);

// The side stream and its fork / join events (one per backend).
class SideStreamPrefetch {
 public:
  explicit SideStreamPrefetch(int device);
  ~SideStreamPrefetch();
  SideStreamPrefetch(const SideStreamPrefetch&) = delete;
  SideStreamPrefetch& operator=(const SideStreamPrefetch&) = delete;

  // Forks: the prefetch of `ranges` runs after everything issued on `main` so far, beside what comes after.
  void issue(cudaStream_t main, std::span<const PrefetchRange> ranges);
  // Joins: work issued on `main` after this waits for every prefetch issued so far (nothing if none is pending).
  // Must come before a capture of `main` ends (a captured fork must be joined).
  void join(cudaStream_t main);
  uint64_t issued() const { return issued_; }  // prefetch launches so far

 private:
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  bool pending_ = false;
  uint64_t issued_ = 0;
};

// POLYKV_CUDA_PREFETCH_MB: bytes a prefetch_weights hint may move (0: off); POLYKV_CUDA_PREFETCH_KV_MB: no hint is
// acted on in a step whose attention reads more KV bytes a layer than this (long contexts keep the memory system
// busy on their own, and their KV stream would evict the prefetched lines). Read once.
size_t prefetch_budget_bytes();
size_t prefetch_max_kv_bytes();
void set_prefetch_budget_bytes(size_t bytes);  // tests and benchmarks: overrides the variable
uint64_t prefetch_launches();                  // launch_l2_prefetch calls so far, process-wide (tests)

}  // namespace polykv::cuda
