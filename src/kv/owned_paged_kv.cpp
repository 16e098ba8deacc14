#include "kv/owned_paged_kv.h"

#include <numeric>
#include <vector>

#include "core/error.h"

namespace polykv {
namespace {

int blocks_for(int max_tokens, int block_tokens) {
  check(max_tokens > 0 && block_tokens > 0, "a sequence needs a context of at least one token");
  return int((int64_t(max_tokens) + block_tokens - 1) / block_tokens);
}

}  // namespace

OwnedPagedKv::OwnedPagedKv(const KvShape& shape, KvType k_type, KvType v_type, int max_tokens, int block_tokens,
                           KvMemory& memory)
    : blocks_(shape, k_type, v_type, blocks_for(max_tokens, block_tokens), block_tokens, memory),
      paged_(blocks_, max_tokens) {
  std::vector<BlockId> table(size_t(blocks_.n_blocks()));
  std::iota(table.begin(), table.end(), BlockId(0));
  paged_.set_blocks(table);
}

void OwnedPagedKv::store(int layer, int pos, int n, const float* k, const float* v, ThreadPool* pool) {
  check(blocks_.host_accessible(), "KV store: the blocks are in ", blocks_.memory().name(),
        " memory, which only its backend writes");
  paged_.store(layer, pos, n, k, v, pool);
}

void OwnedPagedKv::truncate(int n_tokens) {
  check(n_tokens >= 0, "cannot roll the KV back to ", n_tokens, " tokens");
  if (n_tokens < paged_.n_tokens()) paged_.reset(n_tokens);
}

void OwnedPagedKv::copy_prefix_from(const OwnedPagedKv& src, int n) {
  const KvShape &a = blocks_.shape(), &b = src.blocks_.shape();
  check(a.n_layer == b.n_layer && a.n_head_kv == b.n_head_kv && a.head_dim == b.head_dim &&
            a.head_dim_v == b.head_dim_v && a.layer_window == b.layer_window && a.recurrent.n_layer == 0 && b.recurrent.n_layer == 0 &&
            k_type() == src.k_type() && v_type() == src.v_type() &&
            blocks_.block_tokens() == src.blocks_.block_tokens() && &blocks_.memory() == &src.blocks_.memory(),
        "KV copy: the two KVs differ in shape, types, block size or memory (or hold recurrent state)");
  check(n >= 0 && n <= src.n_tokens() && n <= max_tokens(), "KV copy: ", n, " positions asked, the source holds ",
        src.n_tokens(), " and this KV ", max_tokens());
  const int nb = (n + blocks_.block_tokens() - 1) / blocks_.block_tokens();
  // [n_blocks][n_layer][layer bytes] from block 0: the first nb blocks are one range.
  if (nb > 0) blocks_.memory().copy(blocks_.k_part(0, 0), src.blocks_.k_part(0, 0), size_t(nb) * blocks_.block_bytes());
  paged_.reset(0);
  paged_.commit(n);
}

}  // namespace polykv
