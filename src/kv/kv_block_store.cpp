#include "kv/kv_block_store.h"

#include <cstring>
#include <new>

#include "core/error.h"

namespace polykv {
namespace {

size_t layer_bytes_of(const KvShape& s, KvType k, KvType v, int block_tokens) {
  return (kv_head_bytes(k, s.head_dim) + kv_head_bytes(v, s.head_dim_v)) * size_t(s.n_head_kv) *
         size_t(block_tokens);
}

}  // namespace

KvBlockStore::KvBlockStore(const KvShape& shape, KvType k_type, KvType v_type, int n_blocks, int block_tokens,
                           KvMemory& memory)
    : shape_(shape), k_type_(k_type), v_type_(v_type), n_blocks_(n_blocks), block_tokens_(block_tokens),
      memory_(&memory) {
  check(n_blocks > 0 && block_tokens > 0, "KV pool: needs at least one block of at least one token");
  check(shape.n_layer > 0 && shape.n_head_kv > 0, "invalid KV shape");
  k_head_bytes_ = kv_head_bytes(k_type, shape.head_dim);  // throws on an unsupported head size
  v_head_bytes_ = kv_head_bytes(v_type, shape.head_dim_v);
  k_part_bytes_ = k_head_bytes_ * size_t(shape.n_head_kv) * size_t(block_tokens);
  layer_bytes_ = layer_bytes_of(shape, k_type, v_type, block_tokens);
  const size_t total = layer_bytes_ * size_t(shape.n_layer) * size_t(n_blocks);
  data_ = static_cast<uint8_t*>(memory.allocate(total));
  check(data_ != nullptr, "KV pool: cannot allocate ", total >> 20, " MiB for ", n_blocks, " blocks in ",
        memory.name(), " memory");
  // Pages are touched as blocks are first written: a large pool costs memory only as it fills.
}

KvBlockStore::KvBlockStore(KvBlockStore&& o) noexcept
    : shape_(std::move(o.shape_)), k_type_(o.k_type_), v_type_(o.v_type_), n_blocks_(o.n_blocks_),
      block_tokens_(o.block_tokens_), k_head_bytes_(o.k_head_bytes_), v_head_bytes_(o.v_head_bytes_),
      k_part_bytes_(o.k_part_bytes_), layer_bytes_(o.layer_bytes_), memory_(o.memory_), data_(o.data_) {
  o.data_ = nullptr;
}

KvBlockStore::~KvBlockStore() {
  if (data_) memory_->release(data_);
}

int KvBlockStore::blocks_for_bytes(const KvShape& shape, KvType k_type, KvType v_type, int block_tokens,
                                   size_t bytes) {
  const size_t per_block = layer_bytes_of(shape, k_type, v_type, block_tokens) * size_t(shape.n_layer);
  const size_t n = per_block ? bytes / per_block : 0;
  return n > size_t(1) << 30 ? 1 << 30 : int(n);
}

void KvBlockStore::copy_block(BlockId src, BlockId dst) {
  check(src >= 0 && src < n_blocks_ && dst >= 0 && dst < n_blocks_, "KV pool: block id out of range");
  if (src == dst) return;
  memory_->copy(base(dst, 0), base(src, 0), block_bytes());
}

}  // namespace polykv
