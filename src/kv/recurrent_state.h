// The fixed-size recurrent state of one sequence for the linear-attention (Gated DeltaNet) layers of a
// hybrid model, kept beside its KV (KvSequence::recurrent_state()). Per state layer: the causal
// convolution's last K-1 inputs and one d x d matrix per value head. Its size does not grow with the
// sequence.
//
// Rules:
//  - The state is "at" n_tokens(): it summarises positions 0 .. n_tokens() - 1, like the KV after commit.
//  - A forward step over rows [pos0, pos0 + n) calls begin_step(pos0, n) (pos0 == n_tokens()), reads
//    conv()/ssm() (the state at pos0) and writes next_conv()/next_ssm() (the state at pos0 + n) of every
//    layer; commit(pos0 + n) makes the written state current. The state at pos0 stays in the other slot
//    (two slots, no copy per step): truncate(n) for pos0 <= n <= n_tokens() restores it and replays the
//    step's first n - pos0 rows from the step's log (per row: the convolution input, the normalised key,
//    the value, the decay and beta) — bit-identical to a step that had stopped at n. The log is kept
//    for steps of at most kMaxLoggedRows rows (speculative verification); a longer step (a prompt chunk)
//    can only be undone whole (truncate(pos0)). Anything earlier is gone: truncate throws.
//  - Memory: the KvMemory it is made with (host by default; a paged sequence's is its pool's, so a CUDA
//    pool's sequences keep their state in device memory). Host code touches the floats only when the
//    memory is host accessible; a device memory must also be a RecurrentStateOps (below), which zeroes
//    and replays the state with the device's kernels (kv/ never includes a device header).
#pragma once
#include <cstddef>

#include "kv/kv_memory.h"

namespace polykv {

struct RecurrentShape {
  int n_layer = 0;        // layers with a state (0: the model has none)
  int conv_kernel = 0;    // K: the convolution keeps K - 1 inputs
  int n_k_heads = 0;      // key heads
  int n_v_heads = 0;      // value heads; value head j pairs with key head j % n_k_heads
  int head_dim = 0;       // d: key and value head size

  int conv_channels() const { return (2 * n_k_heads + n_v_heads) * head_dim; }  // q | k | v
  size_t conv_floats() const { return size_t(conv_kernel - 1) * size_t(conv_channels()); }
  size_t ssm_floats() const { return size_t(n_v_heads) * size_t(head_dim) * size_t(head_dim); }
  // One row of the step log: conv input [C] | key [n_k_heads][d] | value [n_v_heads][d] | decay [n_v] | beta [n_v]
  size_t log_row_floats() const {
    return size_t(conv_channels()) + size_t(n_k_heads + n_v_heads) * size_t(head_dim) + 2 * size_t(n_v_heads);
  }
  bool operator==(const RecurrentShape&) const = default;
};

// What a device memory (not host accessible) does for the recurrent states it holds. All pointers are
// in that memory; the work is ordered after everything issued on it before (the backend's stream).
class RecurrentStateOps {
 public:
  virtual ~RecurrentStateOps() = default;
  virtual void zero_floats(float* p, size_t n) = 0;
  // For every layer: to = from advanced by the first n_rows rows of the log (the replay of
  // RecurrentState::truncate; layout as RecurrentState: [n_layer][layer_floats] slots, conv then ssm,
  // log [n_layer][kMaxLoggedRows][log_row_floats]), bit-identical to the device's forward step.
  virtual void replay_recurrent(const RecurrentShape& shape, const float* from, float* to, const float* log,
                                int n_rows) = 0;
};

class RecurrentState {
 public:
  static constexpr int kMaxLoggedRows = 16;

  // Throws Error when `memory` cannot hold it, or is a device memory without RecurrentStateOps.
  explicit RecurrentState(const RecurrentShape& shape, KvMemory& memory = host_kv_memory());
  ~RecurrentState();
  RecurrentState(const RecurrentState&) = delete;
  RecurrentState& operator=(const RecurrentState&) = delete;
  const RecurrentShape& shape() const { return shape_; }
  KvMemory& memory() const { return *memory_; }
  // Floats of one layer in a slot (conv then ssm): the stride of conv()/ssm() between layers.
  size_t layer_floats() const { return layer_floats_; }
  int n_tokens() const { return n_tokens_; }
  size_t bytes() const;  // both slots and the log
  static size_t bytes_for(const RecurrentShape& shape);  // bytes() of a state of this shape

  // Back to the empty sequence (all zero, n_tokens() == 0).
  void reset();
  // This state becomes a copy of `other`'s current state at other.n_tokens() (same shape and memory; a
  // fork of a shared prefix). The copy cannot be rolled back past that point.
  void copy_from(const RecurrentState& other);
  // A checkpoint (kv/state_checkpoints.h): save_to copies the current state (at n_tokens()) into `dst`,
  // slot_bytes() bytes of this state's memory; load_from makes the state the one saved there, at
  // position n (it cannot be rolled back past n).
  size_t slot_bytes() const { return slot_floats() * sizeof(float); }
  static size_t slot_bytes_for(const RecurrentShape& shape);
  void save_to(void* dst) const;
  void load_from(const void* src, int n);

  // ---- a step (see the rules above) ----
  void begin_step(int pos0, int n);
  const float* conv(int layer) const;  // [K-1][C] inputs at positions n_tokens()-K+1 .. n_tokens()-1 (zeros before 0)
  const float* ssm(int layer) const;   // [n_v_heads][d][d]
  float* next_conv(int layer);
  float* next_ssm(int layer);
  // Row r of the running step's log at `layer`, or nullptr when the step is too long to be logged.
  float* log_row(int layer, int r);
  void commit(int n_tokens);
  // Restores the state at n (see the rules); throws Error when it cannot.
  void truncate(int n);

 private:
  float* slot(int s, int layer) { return slots_[size_t(s)] + size_t(layer) * layer_floats_; }
  const float* slot(int s, int layer) const { return slots_[size_t(s)] + size_t(layer) * layer_floats_; }
  size_t slot_floats() const { return size_t(shape_.n_layer) * layer_floats_; }
  size_t log_floats() const { return size_t(shape_.n_layer) * kMaxLoggedRows * shape_.log_row_floats(); }
  void zero(float* p, size_t n);
  void replay(int n_rows);  // cur = prev slot advanced by the first n_rows logged rows

  RecurrentShape shape_;
  size_t layer_floats_;               // conv then ssm
  KvMemory* memory_;
  RecurrentStateOps* ops_ = nullptr;  // the device's ops when memory_ is not host accessible
  float* slots_[2] = {nullptr, nullptr};  // [n_layer][layer_floats_] each
  float* log_ = nullptr;              // [n_layer][kMaxLoggedRows][log_row_floats]
  int cur_ = 0;                       // slot holding the state at n_tokens_
  int n_tokens_ = 0;
  int base_ = -1;                     // position of the other slot's state (start of the last step); -1: none
  int logged_rows_ = 0;               // rows of the last step in the log (0 when not logged)
  int step_pos0_ = -1, step_n_ = 0;   // the running step (begin_step .. commit)
};

}  // namespace polykv
