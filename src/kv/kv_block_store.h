// The bytes of the shared KV pool: n_blocks blocks, each holding block_tokens positions of K and V for
// every layer, in one allocation. Block ids are the BlockPool's (kv/block_pool.h): the pool decides
// who owns a block, this class only says where its bytes are.
//
// Layout: [n_blocks][n_layer][K part | V part]; the K part of (block, layer) is
// [n_head_kv][block_tokens] rows of k_head_bytes, the V part [n_head_kv][block_tokens] rows of
// v_head_bytes (head-major, as KvCache's blocks, so KvLayerView addresses both the same way).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kv/block_pool.h"
#include "kv/kv_cache.h"
#include "kv/kv_memory.h"

namespace polykv {

class KvBlockStore {
 public:
  // Throws Error if a type cannot hold the shape's head sizes or the memory cannot be allocated. The
  // bytes come from `memory` (host by default; a device backend's for GPU pools), which must outlive
  // the store.
  KvBlockStore(const KvShape& shape, KvType k_type, KvType v_type, int n_blocks, int block_tokens,
               KvMemory& memory = host_kv_memory());
  KvBlockStore(KvBlockStore&& o) noexcept;
  KvBlockStore& operator=(KvBlockStore&&) = delete;
  KvBlockStore(const KvBlockStore&) = delete;
  ~KvBlockStore();

  // Blocks that fit `bytes` of memory for this shape and these types (at least 0).
  static int blocks_for_bytes(const KvShape& shape, KvType k_type, KvType v_type, int block_tokens, size_t bytes);

  const KvShape& shape() const { return shape_; }
  KvType k_type() const { return k_type_; }
  KvType v_type() const { return v_type_; }
  int n_blocks() const { return n_blocks_; }
  int block_tokens() const { return block_tokens_; }
  size_t k_head_bytes() const { return k_head_bytes_; }
  size_t v_head_bytes() const { return v_head_bytes_; }
  size_t block_bytes() const { return layer_bytes_ * size_t(shape_.n_layer); }  // one block, all layers
  size_t bytes_per_token() const { return block_bytes() / size_t(block_tokens_); }
  size_t layer_bytes() const { return layer_bytes_; }    // one (block, layer): K part then V part
  size_t k_part_bytes() const { return k_part_bytes_; }  // offset of the V part in a (block, layer)

  // Where the bytes live; host code may dereference k_part()/v_part() only if it is host-accessible.
  KvMemory& memory() const { return *memory_; }
  bool host_accessible() const { return memory_->host_accessible(); }
  // All blocks: [n_blocks][n_layer][layer_bytes()], in memory()'s address space.
  const uint8_t* data() const { return data_; }

  uint8_t* k_part(BlockId b, int layer) { return base(b, layer); }
  uint8_t* v_part(BlockId b, int layer) { return base(b, layer) + k_part_bytes_; }
  const uint8_t* k_part(BlockId b, int layer) const { return const_cast<KvBlockStore*>(this)->k_part(b, layer); }
  const uint8_t* v_part(BlockId b, int layer) const { return const_cast<KvBlockStore*>(this)->v_part(b, layer); }

  void copy_block(BlockId src, BlockId dst);  // every layer (copy-on-write of a shared partial block)

 private:
  uint8_t* base(BlockId b, int layer) {
    return data_ + (size_t(b) * size_t(shape_.n_layer) + size_t(layer)) * layer_bytes_;
  }

  KvShape shape_;
  KvType k_type_, v_type_;
  int n_blocks_, block_tokens_;
  size_t k_head_bytes_, v_head_bytes_, k_part_bytes_, layer_bytes_;
  KvMemory* memory_;
  uint8_t* data_ = nullptr;  // owned: memory_->allocate()
};

}  // namespace polykv
