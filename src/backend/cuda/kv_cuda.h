// The KV pool on the GPU: quantizing new K/V rows into their blocks (every KV type of kv/kv_type.h,
// turbo rotation, codebooks and the trellis encoder included) and attention reading K and V in
// their stored types (no f16/f32 copy of the cache).
//
// Addressing (the layout of kv/kv_block_store.h, in device memory): the row of (block b, KV head g,
// slot i in the block) of one layer is
//   K: layer_base + b * block_stride + (g * block_tokens + i) * k_head_bytes
//   V: layer_base + b * block_stride + v_offset + (g * block_tokens + i) * v_head_bytes
// Position p of a sequence lives in block table[p / block_tokens], slot p % block_tokens.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/attention.h"
#include "backend/cuda/cuda_context.h"
#include "kv/kv_type.h"

namespace polykv::cuda {

struct KvLayerDevice {
  KvType k_type = KvType::F16, v_type = KvType::F16;
  int block_tokens = 0, n_head_kv = 0, head_dim = 0, head_dim_v = 0;
  size_t k_head_bytes = 0, v_head_bytes = 0;
  uint8_t* layer_base = nullptr;  // device: the store's bytes + layer * layer_bytes
  size_t block_stride = 0;        // bytes between blocks (the store's block_bytes(): all layers)
  size_t v_offset = 0;            // the store's k_part_bytes()
};

// Quantizes n rows into the pool: row r goes to slot slots[r] = block * block_tokens + offset.
// k: device [n][n_head_kv][head_dim] f32, v: device [n][n_head_kv][head_dim_v] f32, slots: device [n].
// Each (row, head) is encoded exactly as kv_type_ops(type).quantize_head does on the CPU: the same
// bytes for every type, turbo and trellis included, for finite inputs (backend/cuda/kv_encode.cuh).
// A slot < 0 is a padding row: nothing is written. Slots of one call must be distinct and inside the
// pool (not checked on the device). Asynchronous on `stream`, no host synchronization (capturable).
// pdl: launched with programmatic dependent launch (matmul_cuda.h's pdl_enabled; the kernel waits
// for the kernel before it first, so the bytes never depend on it).
void kv_store(const KvLayerDevice& L, const int32_t* slots, int n, const float* k, const float* v,
              cudaStream_t stream, bool pdl = false);

// The sequences of one attention call. Arrays are device memory (uploaded once per step, shared by
// all layers); the host bounds size the launch grid, so that a captured graph stays valid while
// the real values (read on the device) stay under them.
struct AttentionBatchDevice {
  int n_seq = 0;
  const int32_t* tables = nullptr;       // concatenated block tables
  const int32_t* table_start = nullptr;  // [n_seq] offset of each sequence's table in `tables`
  const int32_t* pos0 = nullptr;         // [n_seq] position of the sequence's first query
  const int32_t* n_q = nullptr;          // [n_seq] queries of the sequence
  const int32_t* row0 = nullptr;         // [n_seq] first row of the sequence in q / out
  int total_rows = 0;                    // sum of n_q (host)
  int max_n_q = 0;                       // host bound on n_q
  int max_kv = 0;                        // host bound on pos0 + n_q (keys a query may see)

  // Optional shared prefixes (cascade attention); n_prefix = 0: none. Group i is the sequences
  // prefix_seq0[i] .. prefix_seq0[i] + prefix_n_seq[i] - 1 (consecutive in the batch), whose tables
  // start with the same prefix_blocks[i] block ids; those keys are read once for all the group's
  // queries and merged with each sequence's own keys by log-sum-exp. A group may be empty
  // (prefix_n_seq or prefix_blocks 0), so a captured graph keeps n_prefix and the bounds fixed.
  int n_prefix = 0;                        // groups (host)
  const int32_t* prefix_seq0 = nullptr;    // [n_prefix]
  const int32_t* prefix_n_seq = nullptr;   // [n_prefix]
  const int32_t* prefix_blocks = nullptr;  // [n_prefix]
  int max_prefix_q = 0;                    // host bound on a group's queries (sum of its n_q)
  int max_prefix_kv = 0;                   // host bound on prefix_blocks * block_tokens
};

// Causal GQA attention of every sequence's queries over its paged KV (its own rows already stored).
// q: device [total_rows][n_head][head_dim] f32; out: device [total_rows][n_head][head_dim_v] f32.
// Long contexts are split across thread blocks and merged by log-sum-exp (split-K).
// after_store: the last kernel launched on ctx's stream is the kv_store of this step's rows of this layer
// (and nothing else wrote L's pool since); lets the decode kernel start early (attn::attention_early()).
// new_k, new_v (with after_store): the f32 rows that kv_store read; an early-started decode kernel then encodes the
// new keys' K rows into its tiles itself and waits for the store only before their V products, where V is a turbo or
// trellis type (attn::attention_self_encode(); the same bytes, so the same results). Null: it waits.
void attention(const KvLayerDevice& L, const AttentionParams& p, const AttentionBatchDevice& b, const float* q,
               float* out, CudaContext& ctx, bool after_store = false, const float* new_k = nullptr,
               const float* new_v = nullptr);

}  // namespace polykv::cuda
