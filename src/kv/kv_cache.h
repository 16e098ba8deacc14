// KV storage of one sequence, paged: every layer keeps its K and V rows in fixed-size token blocks,
// allocated as the sequence grows. Attention reads it through KvLayerView and never owns it.
//
// Rules:
//  - Positions are dense: after commit(n), positions 0..n-1 hold K and V for every layer (except
//    released ones, below).
//  - store() writes positions [pos, pos + n) of one layer, quantizing f32 K/V into the block rows in
//    place; it may overwrite positions >= n_tokens() (a rollback, e.g. rejected speculative tokens,
//    is truncate() then store again).
//  - A block of one layer holds K as [block_tokens][n_head_kv] rows of kv_head_bytes(k_type, head_dim)
//    and V as [block_tokens][n_head_kv] rows of kv_head_bytes(v_type, head_dim_v), in one allocation.
//  - A sliding-window layer (window W > 0) only ever reads the last W positions: at commit(n) its
//    blocks whose every position is < n - W + 1 - rollback_tokens are released (their memory is
//    reused by later blocks), so its memory stays ~W + rollback_tokens + 2 blocks. truncate() throws
//    if it would need a released position.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kv/kv_type.h"

namespace polykv {

struct KvShape {
  int n_layer = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int head_dim_v = 0;
  std::vector<int> layer_window;  // [n_layer] or empty (all full); 0: full causal, W: last W positions
};

struct KvLayerView {
  KvType k_type = KvType::F16;
  KvType v_type = KvType::F16;
  int block_tokens = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int head_dim_v = 0;
  const uint8_t* const* k_blocks = nullptr;  // [n_blocks]; nullptr where released
  const uint8_t* const* v_blocks = nullptr;  // [n_blocks]
  size_t k_head_bytes = 0;   // bytes of one (token, head) K row
  size_t v_head_bytes = 0;
  size_t k_token_bytes = 0;  // n_head_kv * k_head_bytes
  size_t v_token_bytes = 0;

  // K row of (position, KV head g).
  const uint8_t* k_row(int pos, int g) const {
    return k_blocks[pos / block_tokens] + size_t(pos % block_tokens) * k_token_bytes + size_t(g) * k_head_bytes;
  }
  const uint8_t* v_row(int pos, int g) const {
    return v_blocks[pos / block_tokens] + size_t(pos % block_tokens) * v_token_bytes + size_t(g) * v_head_bytes;
  }
};

class KvCache {
 public:
  // Throws Error if a type cannot hold the shape's head sizes.
  KvCache(const KvShape& shape, KvType k_type, KvType v_type, int max_tokens, int block_tokens = 256,
          int rollback_tokens = 0);

  const KvShape& shape() const { return shape_; }
  int n_tokens() const { return n_tokens_; }
  int max_tokens() const { return max_tokens_; }
  KvType k_type() const { return k_type_; }
  KvType v_type() const { return v_type_; }

  // k: [n][n_head_kv * head_dim], v: [n][n_head_kv * head_dim_v], f32. Throws if pos + n > max_tokens.
  void store(int layer, int pos, int n, const float* k, const float* v);
  void commit(int n_tokens);     // all layers hold positions [0, n_tokens); releases out-of-window blocks
  void truncate(int n_tokens);   // throws if a sliding layer already released what n_tokens needs

  // View of one layer covering every stored position. Valid until the next store() (blocks may be added).
  KvLayerView view(int layer) const;

  size_t k_head_bytes() const { return k_head_bytes_; }
  size_t v_head_bytes() const { return v_head_bytes_; }
  size_t bytes_per_token() const;  // K + V over all layers, exact
  size_t allocated_bytes() const;  // blocks held now, all layers

 private:
  struct Layer {
    int window = 0;
    int released_until = 0;  // positions < this may have been released
    std::vector<std::unique_ptr<uint8_t[]>> storage;  // [n_blocks]; empty where released
    std::vector<const uint8_t*> k_blocks, v_blocks;   // [n_blocks] views into storage
  };
  void ensure_blocks(Layer& l, int n_positions);
  void release_old_blocks(Layer& l);

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
};

}  // namespace polykv
