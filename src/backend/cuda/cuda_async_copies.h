// Host<->device copies that never wait for the stream's earlier work (CudaBackend::upload_async,
// download_async, and begin_step's per-step tables), so that the host can issue a decode step while the
// previous one still runs (Model's chained greedy steps; docs/CUDA_DECODE.md, "Pipelined greedy steps").
//
// upload(): the bytes are first copied into one of kSlots page-locked staging buffers, then copied to the
// device in stream order; the caller's buffer may be reused at once. A slot is reused kSlots uploads
// later, after the event recorded behind its last copy (in a decode loop that copy finished steps ago).
// download(): into the caller's page-locked memory, in stream order; an event recorded behind it is what
// wait(ticket) blocks on. Tickets name the last kSlots downloads; an older one throws Error.
// Host-clean (no device headers in the interface).
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_context.h"

namespace polykv::cuda {

class AsyncCopies {
 public:
  static constexpr int kSlots = 8;
  explicit AsyncCopies(CudaContext& ctx) : ctx_(ctx) {}
  ~AsyncCopies();
  AsyncCopies(const AsyncCopies&) = delete;
  AsyncCopies& operator=(const AsyncCopies&) = delete;

  void upload(void* dst, const void* src_host, size_t bytes);
  uint64_t download(void* dst_host, const void* src, size_t bytes);  // returns the ticket (>= 1)
  void wait(uint64_t ticket);

 private:
  struct Slot {
    void* host = nullptr;  // page-locked
    size_t bytes = 0;
    void* done = nullptr;  // cudaEvent_t recorded behind the slot's last copy (nullptr: none yet)
  };
  void* event_for(Slot& s);  // creates the slot's event on first use

  CudaContext& ctx_;
  Slot up_[kSlots];
  uint64_t n_up_ = 0;
  void* down_done_[kSlots] = {};  // cudaEvent_t per download ticket % kSlots
  uint64_t n_down_ = 0;
};

}  // namespace polykv::cuda
