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

}  // namespace polykv
