// The host half of CudaBackend::begin_step: checks that the CUDA kernels can address every
// sequence of a step and lays out what they read, once per step (all layers share it):
//   slots:  [total_rows] the pool slot of each step row, block * block_tokens + offset (kv_store);
//   tables: the int32 arrays of cuda::AttentionBatchDevice, back to back (one upload):
//           [table_start[n_seq] | pos0[n_seq] | n_q[n_seq] | row0[n_seq] |
//            prefix_seq0[n_seq] | prefix_n_seq[n_seq] | prefix_blocks[n_seq] | concatenated block tables].
//           The per-sequence arrays come first, so their device addresses depend on n_seq only, not
//           on the tables' length (a recorded CUDA graph keeps pointing at the right arrays as
//           contexts grow).
// No CUDA header: tested on the CPU (tests/cuda/cuda_backend_test.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"

namespace polykv::cuda {

struct StepPlan {
  const KvBlockStore* store = nullptr;  // the one pool every sequence's blocks are in (null: no rows)
  // What the step's kernels take from `store` by value (and a recorded CUDA graph therefore keeps): its
  // bytes' device address and its layout (types, shape, strides). 0 when there are no rows. A graph's
  // key must use this, never the store object's host address: a store freed and another made in its
  // place (a fresh KV per request) often lands at the same host address with its bytes elsewhere,
  // and a replay would write and read the freed bytes (EngineCuda.AgentsOnOnePoolInGpuMemory's
  // intermittent "illegal memory access", 2026-12-01).
  uint64_t store_key = 0;
  std::vector<int32_t> slots;           // [total_rows]
  std::vector<int32_t> tables;          // the layout above
  int n_seq = 0;                        // sequences with rows (those with n == 0 are left out)
  size_t tables_len = 0;                // ints of concatenated block tables at the end of `tables`
  int total_rows = 0;
  int max_n_q = 0;                      // largest n of a sequence
  int max_kv = 0;                       // largest pos0 + n (keys a query may see)
  // Shared prefixes (cascade attention, kv_cuda.h): runs of consecutive sequences whose tables start
  // with the same block ids, every one of those blocks wholly before each member's first query.
  int n_prefix = 0;                     // groups of >= 2 sequences sharing >= 1 block
  int max_prefix_q = 0;                 // largest sum of n over a group
  int max_prefix_kv = 0;                // largest shared blocks * block_tokens

  // Offsets (in ints) of each array in `tables`.
  size_t table_start_at() const { return 0; }
  size_t pos0_at() const { return size_t(n_seq); }
  size_t n_q_at() const { return 2 * size_t(n_seq); }
  size_t row0_at() const { return 3 * size_t(n_seq); }
  size_t prefix_seq0_at() const { return 4 * size_t(n_seq); }
  size_t prefix_n_seq_at() const { return 5 * size_t(n_seq); }
  size_t prefix_blocks_at() const { return 6 * size_t(n_seq); }
  size_t tables_at() const { return 7 * size_t(n_seq); }
};

// Throws Error, naming the sequence, unless every sequence with rows: has a block store in
// `device_memory` (a private KvCache has none: "needs a KV pool in GPU memory"), the same store as
// the others, K equalization off, rows contiguous from 0 in order (row0), pos0 + n within its context,
// and a block table covering pos0 + n positions with ids inside the store.
StepPlan plan_step(std::span<const StepSeq> seqs, const KvMemory& device_memory);

// StepPlan::store_key of a store: a hash of data() and of every layout field the kernels read; never 0.
uint64_t store_key(const KvBlockStore& store);

}  // namespace polykv::cuda
