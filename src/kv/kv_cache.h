// KV storage of one sequence, paged: every layer keeps its K and V rows in fixed-size token blocks,
// allocated as the sequence grows. Attention reads it through KvLayerView and never owns it.
//
// Rules:
//  - Positions are dense: after commit(n), positions 0..n-1 hold K and V for every layer.
//  - store() writes positions [pos, pos + n) of one layer; it may overwrite positions >= n_tokens()
//    (a rollback, e.g. rejected speculative tokens, is truncate() then store again).
//  - A block holds K as [block_tokens][n_head_kv][head_dim] and V as [block_tokens][n_head_kv][head_dim_v],
//    each in its own type (f16 or f32 for now; compressed types come with the compressed-KV work).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"

namespace polykv {

struct KvShape {
  int n_layer = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int head_dim_v = 0;
};

struct KvLayerView {
  DType k_type = DType::F16;
  DType v_type = DType::F16;
  int block_tokens = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int head_dim_v = 0;
  const uint8_t* const* k_blocks = nullptr;  // [n_blocks]
  const uint8_t* const* v_blocks = nullptr;  // [n_blocks]
  size_t k_token_bytes = 0;  // bytes of one token's K row (all heads)
  size_t v_token_bytes = 0;

  const uint8_t* k_row(int pos) const {
    return k_blocks[pos / block_tokens] + size_t(pos % block_tokens) * k_token_bytes;
  }
  const uint8_t* v_row(int pos) const {
    return v_blocks[pos / block_tokens] + size_t(pos % block_tokens) * v_token_bytes;
  }
};

class KvCache {
 public:
  KvCache(const KvShape& shape, DType k_type, DType v_type, int max_tokens, int block_tokens = 256);

  const KvShape& shape() const { return shape_; }
  int n_tokens() const { return n_tokens_; }
  int max_tokens() const { return max_tokens_; }
  DType k_type() const { return k_type_; }
  DType v_type() const { return v_type_; }

  // k: [n][n_head_kv * head_dim], v: [n][n_head_kv * head_dim_v], f32. Throws if pos + n > max_tokens.
  void store(int layer, int pos, int n, const float* k, const float* v);
  void commit(int n_tokens);  // all layers hold positions [0, n_tokens)
  void truncate(int n_tokens) { if (n_tokens < n_tokens_) n_tokens_ = n_tokens; }

  // View of one layer covering every stored position. Valid until the next store() (blocks may be added).
  KvLayerView view(int layer) const;

  size_t bytes_per_token() const;  // K + V over all layers
  size_t allocated_bytes() const;

 private:
  struct Layer {
    std::vector<std::unique_ptr<uint8_t[]>> k_storage, v_storage;
    std::vector<const uint8_t*> k_blocks, v_blocks;
  };
  void ensure_blocks(int n_positions);

  KvShape shape_;
  DType k_type_, v_type_;
  int max_tokens_;
  int block_tokens_;
  size_t k_token_bytes_, v_token_bytes_;
  int n_tokens_ = 0;
  std::vector<Layer> layers_;
};

}  // namespace polykv
