// KV storage of one sequence, paged: every layer keeps its K and V rows in fixed-size token blocks,
// allocated as the sequence grows. Attention reads it through KvLayerView and never owns it.
//
// Rules:
//  - Positions are dense: after commit(n), positions 0..n-1 hold K and V for every layer (except
//    released ones, below).
//  - store() writes positions [pos, pos + n) of one layer, quantizing f32 K/V into the block rows in
//    place; it may overwrite positions >= n_tokens() (a rollback, e.g. rejected speculative tokens,
//    is truncate() then store again).
//  - A block of one layer holds K as [n_head_kv][block_tokens] rows of kv_head_bytes(k_type, head_dim)
//    and V as [n_head_kv][block_tokens] rows of kv_head_bytes(v_type, head_dim_v), in one allocation:
//    head-major, so attention over one KV head reads each block's rows of that head contiguously.
//  - A sliding-window layer (window W > 0) only ever reads the last W positions: at commit(n) its
//    blocks whose every position is < n - W + 1 - rollback_tokens are released (their memory is
//    reused by later blocks), so its memory stays ~W + rollback_tokens + 2 blocks. truncate() throws
//    if it would need a released position.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv/k_equalizer.h"
#include "kv/kv_sequence.h"
#include "kv/kv_type.h"
#include "kv/recurrent_state.h"
#include "kv/v_window.h"

namespace polykv {

class ThreadPool;

struct KvShape {
  int n_layer = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int head_dim_v = 0;
  std::vector<int> layer_window;  // [n_layer] or empty (all full); 0: full causal, W: last W positions
  RecurrentShape recurrent;       // hybrid models: the linear-attention layers' state (n_layer 0: none)
};

class KvCache final : public KvSequence {
 public:
  // Throws Error if a type cannot hold the shape's head sizes.
  KvCache(const KvShape& shape, KvType k_type, KvType v_type, int max_tokens, int block_tokens = 256,
          int rollback_tokens = 0);

  const KvShape& shape() const { return shape_; }
  int n_tokens() const override { return n_tokens_; }
  int max_tokens() const override { return max_tokens_; }
  KvType k_type() const { return k_type_; }
  KvType v_type() const { return v_type_; }

  // k: [n][n_head_kv * head_dim], v: [n][n_head_kv * head_dim_v], f32. Throws if pos + n > max_tokens.
  // With a pool, the rows are quantized in parallel (bit-identical to the serial result).
  void store(int layer, int pos, int n, const float* k, const float* v, ThreadPool* pool = nullptr) override;
  void commit(int n_tokens) override;  // all layers hold positions [0, n_tokens); releases out-of-window blocks
  void truncate(int n_tokens);   // throws if a sliding layer already released what n_tokens needs

  // View of one layer covering every stored position. Valid until the next store() (blocks may be added).
  KvLayerView view(int layer) const override;

  size_t k_head_bytes() const { return k_head_bytes_; }
  size_t v_head_bytes() const { return v_head_bytes_; }
  size_t bytes_per_token() const;  // K + V over all layers, exact
  size_t allocated_bytes() const;  // blocks held now, all layers

  // Mixed precision of V by position (kv/v_window.h); set before the first store.
  void set_v_window(const VPrecisionWindow& w);
  const VPrecisionWindow& v_window() const { return v_window_; }
  size_t v_window_bytes() const;  // the precise copies, all layers (fixed, whatever the length)

  // Per-channel K equalization of this cache's stored keys (off unless set before the first store).
  KEqualizer& k_equalizer() override { return k_equalizer_; }
  RecurrentState* recurrent_state() override { return state_.get(); }
  const KEqualizer& k_equalizer() const { return k_equalizer_; }
  void set_k_equalizer(KEqualizer eq) { k_equalizer_ = std::move(eq); }

 private:
  struct Layer {
    int window = 0;
    int released_until = 0;  // positions < this may have been released
    std::vector<std::unique_ptr<uint8_t[]>> storage;  // [n_blocks]; empty where released
    std::vector<const uint8_t*> k_blocks, v_blocks;   // [n_blocks] views into storage
    std::vector<uint8_t> v_hi;                        // [n_slots][n_head_kv][v_hi_head_bytes]
    std::vector<int32_t> slot_pos;                    // [n_slots]
  };
  void ensure_blocks(Layer& l, int n_positions);
  void release_old_blocks(Layer& l);
  void store_v_window(Layer& l, int pos, int n, const float* v);  // v: [n][n_head_kv][head_dim_v]
  void to_v_basis(float* x) const;                                 // x: [head_dim_v], in place

  KvShape shape_;
  KvType k_type_, v_type_;
  int max_tokens_;
  int block_tokens_;
  int rollback_tokens_;
  size_t k_head_bytes_, v_head_bytes_, k_token_bytes_, v_token_bytes_;
  size_t block_bytes_;  // K part then V part
  int n_tokens_ = 0;
  std::vector<Layer> layers_;
  std::vector<std::unique_ptr<uint8_t[]>> free_blocks_;  // released, reused before allocating
  KEqualizer k_equalizer_;
  VPrecisionWindow v_window_;
  size_t v_hi_head_bytes_ = 0;
  std::unique_ptr<RecurrentState> state_;  // when shape_.recurrent.n_layer > 0; commit/truncate move it too
};

// A cache whose K and V types are given by name, V possibly with a precision window ("turbo3w",
// kv/v_window.h). Throws Error naming an unknown type.
KvCache make_kv_cache(const KvShape& shape, const std::string& k_type, const std::string& v_type, int max_tokens,
                      int block_tokens = 256, int rollback_tokens = 0);

}  // namespace polykv
