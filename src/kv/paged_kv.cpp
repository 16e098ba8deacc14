#include "kv/paged_kv.h"

#include "core/error.h"

namespace polykv {

PagedKv::PagedKv(KvBlockStore& store, int max_tokens) : store_(store), max_tokens_(max_tokens) {
  check(max_tokens > 0, "a sequence needs a context of at least one token");
  k_ptrs_.resize(size_t(store.shape().n_layer));
  v_ptrs_.resize(size_t(store.shape().n_layer));
  if (store.shape().recurrent.n_layer > 0) state_ = std::make_unique<RecurrentState>(store.shape().recurrent, store.memory());
}

void PagedKv::reset(int n_tokens) {
  if (state_) state_->truncate(n_tokens);  // no-op when already there; throws when it cannot get there
  n_tokens_ = n_tokens;
}

void PagedKv::set_blocks(std::span<const BlockId> table) {
  n_blocks_ = int(table.size());
  table_.assign(table.begin(), table.end());
  for (int il = 0; il < store_.shape().n_layer; ++il) {
    auto& k = k_ptrs_[size_t(il)];
    auto& v = v_ptrs_[size_t(il)];
    k.resize(table.size());
    v.resize(table.size());
    for (size_t i = 0; i < table.size(); ++i) {
      check(table[i] >= 0 && table[i] < store_.n_blocks(), "block table: id ", table[i], " out of range");
      k[i] = store_.k_part(table[i], il);
      v[i] = store_.v_part(table[i], il);
    }
  }
}

void PagedKv::store(int layer, int pos, int n, const float* k, const float* v, ThreadPool* pool) {
  check(layer >= 0 && layer < store_.shape().n_layer, "KV store: layer ", layer, " out of range");
  check(pos >= 0 && n >= 0 && pos + n <= max_tokens_, "context full: positions up to ", pos + n,
        " exceed the context of ", max_tokens_);
  check(pos + n <= n_blocks_ * store_.block_tokens(), "KV store past the sequence's blocks (",
        n_blocks_, " blocks for ", pos + n, " positions)");
  store_kv_rows(view(layer), pos, n, k, v, pool);
}

void PagedKv::commit(int n_tokens) {
  check(n_tokens >= 0 && n_tokens <= n_blocks_ * store_.block_tokens(), "KV commit past the sequence's blocks");
  n_tokens_ = n_tokens;
  if (state_) state_->commit(n_tokens);
}

KvLayerView PagedKv::view(int layer) const {
  KvLayerView v;
  v.k_type = store_.k_type();
  v.v_type = store_.v_type();
  v.block_tokens = store_.block_tokens();
  v.n_head_kv = store_.shape().n_head_kv;
  v.head_dim = store_.shape().head_dim;
  v.head_dim_v = store_.shape().head_dim_v;
  v.k_blocks = k_ptrs_[size_t(layer)].data();
  v.v_blocks = v_ptrs_[size_t(layer)].data();
  v.k_head_bytes = store_.k_head_bytes();
  v.v_head_bytes = store_.v_head_bytes();
  return v;
}

}  // namespace polykv
