#include "kv/recurrent_state.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kv/gated_delta_kernels.h"
#include "kv/gated_delta_math.h"

namespace polykv {

RecurrentState::RecurrentState(const RecurrentShape& shape, KvMemory& memory)
    : shape_(shape), layer_floats_(shape.conv_floats() + shape.ssm_floats()), memory_(&memory) {
  check(shape.n_layer > 0 && shape.conv_kernel >= 1 && shape.n_k_heads > 0 && shape.n_v_heads > 0 &&
            shape.head_dim > 0 && shape.n_v_heads % shape.n_k_heads == 0,
        "invalid recurrent state shape");
  if (!memory.host_accessible()) {
    ops_ = dynamic_cast<RecurrentStateOps*>(&memory);
    check(ops_ != nullptr, "the ", memory.name(), " memory cannot hold a hybrid model's recurrent state");
  }
  try {
    for (float*& s : slots_) {
      s = static_cast<float*>(memory.allocate(slot_floats() * sizeof(float)));
      check(s != nullptr, "recurrent state: cannot allocate ", slot_floats() * sizeof(float) >> 20, " MiB in ",
            memory.name(), " memory");
      zero(s, slot_floats());
    }
    log_ = static_cast<float*>(memory.allocate(log_floats() * sizeof(float)));
    check(log_ != nullptr, "recurrent state: cannot allocate its step log (", log_floats() * sizeof(float) >> 20,
          " MiB) in ", memory.name(), " memory");
    zero(log_, log_floats());
  } catch (...) {
    for (float* s : slots_) memory.release(s);
    throw;
  }
}

RecurrentState::~RecurrentState() {
  for (float* s : slots_) memory_->release(s);
  memory_->release(log_);
}

void RecurrentState::zero(float* p, size_t n) {
  if (ops_)
    ops_->zero_floats(p, n);
  else
    std::fill(p, p + n, 0.0f);
}

size_t RecurrentState::bytes() const { return (2 * slot_floats() + log_floats()) * sizeof(float); }

size_t RecurrentState::bytes_for(const RecurrentShape& s) {
  if (s.n_layer <= 0) return 0;
  const size_t slot = size_t(s.n_layer) * (s.conv_floats() + s.ssm_floats());
  const size_t log = size_t(s.n_layer) * kMaxLoggedRows * s.log_row_floats();
  return (2 * slot + log) * sizeof(float);
}

void RecurrentState::reset() {
  zero(slots_[size_t(cur_)], slot_floats());
  n_tokens_ = 0;
  base_ = -1;
  logged_rows_ = 0;
  step_pos0_ = -1;
}

void RecurrentState::copy_from(const RecurrentState& other) {
  check(other.shape_ == shape_, "recurrent state: copy between different shapes");
  check(other.memory_ == memory_, "recurrent state: copy between different memories (", other.memory_->name(), " to ",
        memory_->name(), ")");
  memory_->copy(slots_[size_t(cur_)], other.slots_[size_t(other.cur_)], slot_floats() * sizeof(float));
  n_tokens_ = other.n_tokens_;
  base_ = -1;
  logged_rows_ = 0;
  step_pos0_ = -1;
}

size_t RecurrentState::slot_bytes_for(const RecurrentShape& s) {
  if (s.n_layer <= 0) return 0;
  return size_t(s.n_layer) * (s.conv_floats() + s.ssm_floats()) * sizeof(float);
}

void RecurrentState::save_to(void* dst) const {
  check(step_pos0_ < 0, "recurrent state: a checkpoint taken during a step");
  memory_->copy(dst, slots_[size_t(cur_)], slot_bytes());
}

void RecurrentState::load_from(const void* src, int n) {
  check(n >= 0, "recurrent state: a checkpoint at position ", n);
  memory_->copy(slots_[size_t(cur_)], src, slot_bytes());
  n_tokens_ = n;
  base_ = -1;
  logged_rows_ = 0;
  step_pos0_ = -1;
}

void RecurrentState::begin_step(int pos0, int n) {
  check(pos0 == n_tokens_ && n > 0, "recurrent state: a step at position ", pos0, " but the state is at ", n_tokens_);
  step_pos0_ = pos0;
  step_n_ = n;
}

const float* RecurrentState::conv(int layer) const { return slot(cur_, layer); }
const float* RecurrentState::ssm(int layer) const { return slot(cur_, layer) + shape_.conv_floats(); }
float* RecurrentState::next_conv(int layer) { return slot(1 - cur_, layer); }
float* RecurrentState::next_ssm(int layer) { return slot(1 - cur_, layer) + shape_.conv_floats(); }

float* RecurrentState::log_row(int layer, int r) {
  if (step_n_ > kMaxLoggedRows) return nullptr;
  return log_ + (size_t(layer) * kMaxLoggedRows + size_t(r)) * shape_.log_row_floats();
}

void RecurrentState::commit(int n_tokens) {
  if (step_pos0_ < 0) {  // no step ran (a sequence committed without new rows)
    check(n_tokens == n_tokens_, "recurrent state: commit(", n_tokens, ") without a step (state at ", n_tokens_, ")");
    return;
  }
  check(n_tokens == step_pos0_ + step_n_, "recurrent state: commit(", n_tokens, ") does not end the step [",
        step_pos0_, ", ", step_pos0_ + step_n_, ")");
  cur_ = 1 - cur_;
  base_ = step_pos0_;
  logged_rows_ = step_n_ <= kMaxLoggedRows ? step_n_ : 0;
  n_tokens_ = n_tokens;
  step_pos0_ = -1;
}

void RecurrentState::truncate(int n) {
  if (n == n_tokens_) return;
  if (n == 0) {  // a new sequence
    reset();
    return;
  }
  check(n >= 0 && n < n_tokens_, "recurrent state: cannot truncate to ", n, " tokens (it holds ", n_tokens_, ")");
  check(base_ >= 0 && n >= base_ && (n == base_ || n - base_ <= logged_rows_),
        "recurrent state: cannot roll back to position ", n, ": the state is kept only for positions within the last ",
        "step (", base_ < 0 ? n_tokens_ : base_, "..", n_tokens_, ") of at most ", kMaxLoggedRows, " rows, or its start");
  replay(n - base_);
  n_tokens_ = n;
}

void RecurrentState::replay(int n_rows) {
  const RecurrentShape& s = shape_;
  if (ops_) {  // device memory: the device replays with its own kernels
    ops_->replay_recurrent(s, slots_[size_t(1 - cur_)], slots_[size_t(cur_)], log_, n_rows);
    return;
  }
  const int C = s.conv_channels(), d = s.head_dim, km1 = s.conv_kernel - 1;
  const size_t row_floats = s.log_row_floats();
  std::vector<float> window(size_t(km1 + n_rows) * size_t(C));
  std::vector<float> tmp(static_cast<size_t>(d));
  const int prev = 1 - cur_;
  for (int il = 0; il < s.n_layer; ++il) {
    const float* from = slot(prev, il);
    float* to = slot(cur_, il);
    std::memcpy(to, from, layer_floats_ * sizeof(float));
    const float* log = log_ + size_t(il) * kMaxLoggedRows * row_floats;
    // Convolution inputs: the last K-1 of [previous inputs ; logged rows].
    if (km1 > 0) {
      std::memcpy(window.data(), from, s.conv_floats() * sizeof(float));
      for (int r = 0; r < n_rows; ++r)
        std::memcpy(window.data() + size_t(km1 + r) * size_t(C), log + size_t(r) * row_floats, size_t(C) * sizeof(float));
      std::memcpy(to, window.data() + size_t(n_rows) * size_t(C), s.conv_floats() * sizeof(float));
    }
    float* S = to + s.conv_floats();
    for (int r = 0; r < n_rows; ++r) {
      const float* row = log + size_t(r) * row_floats;
      const float* k = row + C;                          // [n_k][d]
      const float* v = k + size_t(s.n_k_heads) * d;      // [n_v][d]
      const float* decay = v + size_t(s.n_v_heads) * d;  // [n_v]
      const float* beta = decay + s.n_v_heads;           // [n_v]
      for (int j = 0; j < s.n_v_heads; ++j)
        gdn::token_step_fast(S + size_t(j) * d * d, S + size_t(j) * d * d, k + size_t(j % s.n_k_heads) * d, v + size_t(j) * d, nullptr, decay[j],
                        beta[j], d, tmp.data(), nullptr);
    }
  }
}

}  // namespace polykv
