#include "kv/kv_cache.h"

#include "core/error.h"
#include <cstring>

#include "core/fp16.h"

namespace polykv {
namespace {

void write_row(DType t, const float* src, uint8_t* dst, int n) {
  if (t == DType::F32) {
    std::memcpy(dst, src, size_t(n) * 4);
  } else if (t == DType::F16) {
    auto* d = reinterpret_cast<uint16_t*>(dst);
    for (int i = 0; i < n; ++i) d[i] = f32_to_fp16(src[i]);
  } else if (t == DType::BF16) {
    auto* d = reinterpret_cast<uint16_t*>(dst);
    for (int i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
  } else {
    fail("KV type ", dtype_name(t), " is not supported yet (f32, f16, bf16)");
  }
}

}  // namespace

KvCache::KvCache(const KvShape& shape, DType k_type, DType v_type, int max_tokens, int block_tokens)
    : shape_(shape), k_type_(k_type), v_type_(v_type), max_tokens_(max_tokens), block_tokens_(block_tokens) {
  for (DType t : {k_type, v_type})
    check(t == DType::F32 || t == DType::F16 || t == DType::BF16, "KV type ", dtype_name(t),
          " is not supported yet (f32, f16, bf16)");
  check(max_tokens > 0 && block_tokens > 0, "invalid KV cache size");
  k_token_bytes_ = row_bytes(k_type, int64_t(shape.n_head_kv) * shape.head_dim);
  v_token_bytes_ = row_bytes(v_type, int64_t(shape.n_head_kv) * shape.head_dim_v);
  layers_.resize(size_t(shape.n_layer));
}

void KvCache::ensure_blocks(int n_positions) {
  const size_t need = size_t((n_positions + block_tokens_ - 1) / block_tokens_);
  for (Layer& l : layers_) {
    while (l.k_blocks.size() < need) {
      l.k_storage.emplace_back(new uint8_t[k_token_bytes_ * size_t(block_tokens_)]());
      l.v_storage.emplace_back(new uint8_t[v_token_bytes_ * size_t(block_tokens_)]());
      l.k_blocks.push_back(l.k_storage.back().get());
      l.v_blocks.push_back(l.v_storage.back().get());
    }
  }
}

void KvCache::store(int layer, int pos, int n, const float* k, const float* v) {
  check(pos >= 0 && n >= 0 && pos + n <= max_tokens_, "context full: positions up to ", pos + n,
        " exceed the KV cache size ", max_tokens_);
  ensure_blocks(pos + n);
  Layer& l = layers_[size_t(layer)];
  const int kd = shape_.n_head_kv * shape_.head_dim, vd = shape_.n_head_kv * shape_.head_dim_v;
  for (int t = 0; t < n; ++t) {
    const int p = pos + t;
    uint8_t* kb = l.k_storage[size_t(p / block_tokens_)].get() + size_t(p % block_tokens_) * k_token_bytes_;
    uint8_t* vb = l.v_storage[size_t(p / block_tokens_)].get() + size_t(p % block_tokens_) * v_token_bytes_;
    write_row(k_type_, k + size_t(t) * kd, kb, kd);
    write_row(v_type_, v + size_t(t) * vd, vb, vd);
  }
}

void KvCache::commit(int n_tokens) {
  check(n_tokens <= max_tokens_, "KV commit past capacity");
  n_tokens_ = n_tokens;
}

KvLayerView KvCache::view(int layer) const {
  const Layer& l = layers_[size_t(layer)];
  KvLayerView v;
  v.k_type = k_type_;
  v.v_type = v_type_;
  v.block_tokens = block_tokens_;
  v.n_head_kv = shape_.n_head_kv;
  v.head_dim = shape_.head_dim;
  v.head_dim_v = shape_.head_dim_v;
  v.k_blocks = l.k_blocks.data();
  v.v_blocks = l.v_blocks.data();
  v.k_token_bytes = k_token_bytes_;
  v.v_token_bytes = v_token_bytes_;
  return v;
}

size_t KvCache::bytes_per_token() const { return (k_token_bytes_ + v_token_bytes_) * size_t(shape_.n_layer); }

size_t KvCache::allocated_bytes() const {
  size_t blocks = layers_.empty() ? 0 : layers_[0].k_blocks.size();
  return blocks * size_t(block_tokens_) * bytes_per_token();
}

}  // namespace polykv
