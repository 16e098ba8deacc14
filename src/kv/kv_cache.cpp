#include "kv/kv_cache.h"

#include <algorithm>

#include "core/error.h"
#include "core/thread_pool.h"

namespace polykv {

void store_kv_rows(const KvLayerView& rows, int pos, int n, const float* k, const float* v, ThreadPool* pool) {
  const KvTypeOps& kops = kv_type_ops(rows.k_type);
  const KvTypeOps& vops = kv_type_ops(rows.v_type);
  const int H = rows.n_head_kv, hd = rows.head_dim, hdv = rows.head_dim_v;
  // Every (token, head) row is written by exactly one task, into blocks the owner already holds.
  const auto quantize_rows = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int t = int(r / H), g = int(r % H);
      kops.quantize_head(k + (int64_t(t) * H + g) * hd, const_cast<uint8_t*>(rows.k_row(pos + t, g)), hd);
      vops.quantize_head(v + (int64_t(t) * H + g) * hdv, const_cast<uint8_t*>(rows.v_row(pos + t, g)), hdv);
    }
  };
  const int64_t n_rows = int64_t(n) * H;
  if (pool && n_rows > 1) {
    pool->parallel_for(n_rows, quantize_rows, 8);
  } else {
    quantize_rows(0, n_rows);
  }
}

KvCache::KvCache(const KvShape& shape, KvType k_type, KvType v_type, int max_tokens, int block_tokens,
                 int rollback_tokens)
    : shape_(shape),
      k_type_(k_type),
      v_type_(v_type),
      max_tokens_(max_tokens),
      block_tokens_(block_tokens),
      rollback_tokens_(rollback_tokens) {
  check(max_tokens > 0 && block_tokens > 0 && rollback_tokens >= 0, "invalid KV cache size");
  check(shape.n_layer > 0 && shape.n_head_kv > 0, "invalid KV shape");
  check(shape.layer_window.empty() || int(shape.layer_window.size()) == shape.n_layer,
        "KV shape: layer_window must have one entry per layer");
  k_head_bytes_ = kv_head_bytes(k_type, shape.head_dim);  // throws on an unsupported head size
  v_head_bytes_ = kv_head_bytes(v_type, shape.head_dim_v);
  k_token_bytes_ = k_head_bytes_ * size_t(shape.n_head_kv);
  v_token_bytes_ = v_head_bytes_ * size_t(shape.n_head_kv);
  block_bytes_ = (k_token_bytes_ + v_token_bytes_) * size_t(block_tokens);
  layers_.resize(size_t(shape.n_layer));
  for (size_t il = 0; il < layers_.size(); ++il)
    layers_[il].window = shape.layer_window.empty() ? 0 : std::max(0, shape.layer_window[il]);
  if (shape.recurrent.n_layer > 0) state_ = std::make_unique<RecurrentState>(shape.recurrent);
}

void KvCache::ensure_blocks(Layer& l, int n_positions) {
  const size_t need = size_t((n_positions + block_tokens_ - 1) / block_tokens_);
  while (l.storage.size() < need) {
    std::unique_ptr<uint8_t[]> b;
    if (!free_blocks_.empty()) {
      b = std::move(free_blocks_.back());
      free_blocks_.pop_back();
    } else {
      b.reset(new uint8_t[block_bytes_]());
    }
    l.k_blocks.push_back(b.get());
    l.v_blocks.push_back(b.get() + k_token_bytes_ * size_t(block_tokens_));
    l.storage.push_back(std::move(b));
  }
}

void KvCache::store(int layer, int pos, int n, const float* k, const float* v, ThreadPool* pool) {
  check(layer >= 0 && layer < shape_.n_layer, "KV store: layer ", layer, " out of range");
  check(pos >= 0 && n >= 0 && pos + n <= max_tokens_, "context full: positions up to ", pos + n,
        " exceed the KV cache size ", max_tokens_);
  Layer& l = layers_[size_t(layer)];
  check(pos >= l.released_until, "KV store at position ", pos, " below the released window");
  ensure_blocks(l, pos + n);
  store_kv_rows(view(layer), pos, n, k, v, pool);
  if (v_window_.enabled()) store_v_window(l, pos, n, v);
}

void KvCache::set_v_window(const VPrecisionWindow& w) {
  check(n_tokens_ == 0, "the V precision window must be set before the cache is used");
  check(w.n_sink >= 0 && w.recent >= 0, "invalid V precision window");
  check(!kv_type_rotated(w.type), "the V precision window's type must be a plain type (f16, q8_0, ...)");
  v_window_ = w;
  v_hi_head_bytes_ = kv_head_bytes(w.type, shape_.head_dim_v);
  for (Layer& l : layers_) {
    l.v_hi.assign(size_t(w.n_slots()) * size_t(shape_.n_head_kv) * v_hi_head_bytes_, 0);
    l.slot_pos.assign(size_t(w.n_slots()), -1);
  }
}

void KvCache::store_v_window(Layer& l, int pos, int n, const float* v) {
  const VPrecisionWindow& w = v_window_;
  const KvTypeOps& hops = kv_type_ops(w.type);
  const int H = shape_.n_head_kv, hdv = shape_.head_dim_v;
  const bool rotated = kv_type_rotated(v_type_);
  std::vector<float> x(static_cast<size_t>(hdv));
  for (int t = 0; t < n; ++t) {
    const int p = pos + t;
    int slot;
    if (p < w.n_sink) {
      slot = p;
    } else if (w.recent > 0 && p >= pos + n - w.recent) {  // only the chunk's last `recent` survive
      slot = w.n_sink + (p - w.n_sink) % w.recent;
    } else {
      continue;
    }
    l.slot_pos[size_t(slot)] = p;
    for (int g = 0; g < H; ++g) {
      std::copy_n(v + (int64_t(t) * H + g) * hdv, hdv, x.data());
      if (rotated) to_v_basis(x.data());
      hops.quantize_head(x.data(), l.v_hi.data() + (size_t(slot) * size_t(H) + size_t(g)) * v_hi_head_bytes_, hdv);
    }
  }
}

void KvCache::to_v_basis(float* x) const {
  // The turbo types hold V in their rotated basis; their prepare_query maps a vector into it.
  const KvTypeOps& vops = kv_type_ops(v_type_);
  std::vector<float> tmp(vops.query_bytes(shape_.head_dim_v) / sizeof(float));
  vops.prepare_query(x, reinterpret_cast<uint8_t*>(tmp.data()), shape_.head_dim_v);
  std::copy_n(tmp.data(), shape_.head_dim_v, x);
}

size_t KvCache::v_window_bytes() const {
  return size_t(v_window_.n_slots()) * size_t(shape_.n_head_kv) * v_hi_head_bytes_ * size_t(shape_.n_layer);
}

void KvCache::release_old_blocks(Layer& l) {
  if (l.window <= 0) return;
  // The next query is at position >= n_tokens_ - rollback_tokens_ and reads keys p > q - window.
  const int keep_from = std::max(0, n_tokens_ - rollback_tokens_ - l.window + 1);
  const size_t n_free = std::min(l.storage.size(), size_t(keep_from / block_tokens_));  // whole blocks below
  for (size_t b = 0; b < n_free; ++b) {
    if (!l.storage[b]) continue;
    free_blocks_.push_back(std::move(l.storage[b]));
    l.k_blocks[b] = l.v_blocks[b] = nullptr;
  }
  l.released_until = std::max(l.released_until, int(n_free) * block_tokens_);
}

void KvCache::commit(int n_tokens) {
  check(n_tokens >= 0 && n_tokens <= max_tokens_, "KV commit past capacity");
  n_tokens_ = n_tokens;
  for (Layer& l : layers_) release_old_blocks(l);
  if (state_) state_->commit(n_tokens);
}

void KvCache::truncate(int n_tokens) {
  if (n_tokens >= n_tokens_) return;
  for (const Layer& l : layers_)
    check(l.window <= 0 || std::max(0, n_tokens - l.window + 1) >= l.released_until, "cannot roll the KV cache back to ",
          n_tokens, " tokens: a sliding-window layer already released positions below ", l.released_until,
          " (raise rollback_tokens)");
  if (state_) state_->truncate(n_tokens);  // throws before anything changes when it cannot
  n_tokens_ = n_tokens;
  if (n_tokens == 0) k_equalizer_.reset();  // a new sequence calibrates its own scales
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
  v.k_head_bytes = k_head_bytes_;
  v.v_head_bytes = v_head_bytes_;
  if (v_window_.enabled()) {
    v.v_hi_type = v_window_.type;
    v.n_sink = v_window_.n_sink;
    v.recent = v_window_.recent;
    v.v_hi = l.v_hi.data();
    v.slot_pos = l.slot_pos.data();
    v.v_hi_head_bytes = v_hi_head_bytes_;
  }
  return v;
}

size_t KvCache::bytes_per_token() const { return (k_token_bytes_ + v_token_bytes_) * size_t(shape_.n_layer); }

size_t KvCache::allocated_bytes() const {
  size_t blocks = 0;
  for (const Layer& l : layers_)
    for (const auto& b : l.storage) blocks += b ? 1 : 0;
  return blocks * block_bytes_;
}

KvCache make_kv_cache(const KvShape& shape, const std::string& k_type, const std::string& v_type, int max_tokens,
                      int block_tokens, int rollback_tokens) {
  const VCacheSpec v = parse_v_cache_spec(v_type);
  KvCache kv(shape, parse_kv_type(k_type), v.type, max_tokens, block_tokens, rollback_tokens);
  if (v.window.enabled()) kv.set_v_window(v.window);
  return kv;
}

}  // namespace polykv
