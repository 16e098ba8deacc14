// Per-sequence block tables over one BlockPool: prefix-cache hits at admission, forks of a named
// pool, block reservation with copy-on-write, hash registration of blocks as they fill, rollback
// and release. Ids only, no tensors: the caller performs the BlockCopy list on the KvBlockStore and
// writes K/V into the blocks of block_table(). vLLM v1's KV cache manager is the design studied.
//
// Per sequence: tokens (every id known: prompt + appended), n_computed (positions [0, n_computed)
// hold written K/V), a block table (position p lives in block table[p / block_tokens], row
// p % block_tokens) and the chain hashes of its full computed blocks.
//
// Rules (the caller's side):
//  - Before writing K/V of positions [n_computed, n_computed + n): reserve(seq, n, copies), then
//    perform every copy (src -> dst, the whole block) before any write, then write, then
//    mark_computed(seq, n_computed + n). reserve() guarantees every block those positions touch has
//    ref 1 and no hash (it copies shared ones and drops the hash of an unshared hashed one).
//  - Token ids must be known before their K/V: append_tokens() first, so n_computed + n <= n_tokens.
//  - block_table() spans are invalidated by any non-const call on that sequence; copy what you keep.
//  - Misuse (unknown or duplicate SeqId, counts out of range, marking unreserved positions) throws
//    polykv::Error and changes nothing.
//
// Invariants (between calls):
//  - n_computed <= n_reserved <= n_tokens; table.size() >= ceil(n_reserved / block_tokens) and
//    <= ceil(n_tokens / block_tokens); the blocks past ceil(n_computed / block_tokens) are private.
//  - hashes.size() == n_computed / block_tokens: hashes[k] chains `seed` and tokens[0, (k+1)*bt).
//  - A block's refcount == the number of table entries, over all sequences, that name it.
//  - A table block holding positions >= n_computed that are about to be written has ref 1 and no
//    hash once reserve() returned true.
//
// Policies (documented choices):
//  - Hits: full blocks only, never the whole prompt (at most floor((n - 1) / block_tokens) blocks),
//    so the last prompt token is always computed and gives logits. With a `usable_end` predicate
//    (hybrid models: only a block whose end has a recurrent-state checkpoint can end a hit) the hit
//    is the longest matched prefix whose last block's chain hash satisfies it; the matched blocks
//    after it are not referenced (the sequence recomputes them into private blocks).
//  - A full block whose hash another block already holds (two sequences computed the same prefix
//    at once) stays private and unhashed: no sharing, no swap of table entries.
//  - Rollback into a hashed block: truncate() keeps the block and its hash (its computed rows are
//    still valid and findable); the next reserve() that writes it copies it if ref > 1, and drops
//    its hash (writes in place, no copy) if ref == 1, since rolled-back content (rejected draft
//    tokens) is rarely asked for again.
//  - free() and truncate() release blocks last to first, so the tail of a prefix is evicted before
//    its head (evicting a head would orphan every cached block after it).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"

namespace polykv {

class KvSequenceManager {
 public:
  using SeqId = int64_t;
  struct BlockCopy {
    BlockId src, dst;  // copy every layer of src into dst before writing dst
  };
  struct PrefixStats {
    int64_t n_queries = 0;       // add_sequence calls
    int64_t n_query_tokens = 0;  // prompt tokens they brought
    int64_t n_hit_tokens = 0;    // of which found cached
  };

  KvSequenceManager(int n_blocks, int block_tokens);

  // New sequence with its full token list so far (the prompt). Refs its longest cached prefix
  // (full blocks, chained from `seed`, at most floor((n - 1) / block_tokens) blocks) and returns
  // the number of cached tokens, a multiple of block_tokens; n_computed starts there. Never
  // allocates, so it never fails for lack of blocks.
  // usable_end (optional): see Policies, "Hits".
  using UsableEnd = std::function<bool(BlockHash)>;
  int add_sequence(SeqId seq, std::span<const int32_t> prompt, BlockHash seed, const UsableEnd& usable_end = {});
  // Cached tokens add_sequence(prompt, seed, usable_end) would find now, without changing anything.
  int cached_prefix_tokens(std::span<const int32_t> prompt, BlockHash seed, const UsableEnd& usable_end = {}) const;
  // The same from the prompt's chain hashes (block_hash chained from its seed; at most
  // floor((n - 1) / block_tokens) of them, as a hit never takes the whole prompt), for callers that keep them.
  int cached_chain_tokens(std::span<const BlockHash> chain, const UsableEnd& usable_end = {}) const;
  // Blocks add_sequence + reserve(all prompt tokens) would take from n_available() now: blocks to
  // allocate plus cached-idle hits (a hit on a block in use costs nothing). For admission.
  int blocks_to_admit(std::span<const int32_t> prompt, BlockHash seed, const UsableEnd& usable_end = {}) const;

  // New sequence sharing every block of `parent` that holds computed positions, its partial last
  // block included (refs++), with all the parent's tokens as its own, the same seed and n_computed.
  // Whichever of the two writes into a shared partial block first copies it (reserve); a parent's
  // reservation into that block is cancelled (it must reserve again before writing).
  void fork(SeqId child, SeqId parent);

  void append_tokens(SeqId seq, std::span<const int32_t> ids);  // tokens whose K/V come later

  // Ensures blocks for positions [n_computed, n_computed + n) (n_computed + n <= n_tokens): an
  // existing touched block with ref > 1 is replaced by a fresh one ({src, dst} appended to `copies`
  // when src holds computed rows; src unref'd), one with ref 1 and a hash loses the hash, missing
  // blocks are allocated (evicting cached-idle ones, LRU). Returns false and changes nothing when
  // fewer than blocks_needed(seq, n) blocks are available (the caller preempts someone).
  bool reserve(SeqId seq, int n, std::vector<BlockCopy>& copies);
  // Positions [0, n_computed) now hold K/V (n_computed <= reserved end). Blocks that became full get
  // their chain hash registered (or stay private if another block holds it).
  void mark_computed(SeqId seq, int n_computed);
  // Rollback to n_tokens (<= n_tokens(seq)): drops tokens past it, n_computed = min(n_computed,
  // n_tokens), and unrefs the blocks past ceil(n_tokens / block_tokens).
  void truncate(SeqId seq, int n_tokens);
  void free(SeqId seq);  // unrefs all its blocks (hashed ones stay findable, cached-idle LRU)

  std::span<const BlockId> block_table(SeqId seq) const;
  // Chain hash of full computed block k (k < n_computed / block_tokens): the key of the prefix
  // [0, (k + 1) * block_tokens), whether or not the block itself is registered under it.
  BlockHash chain_hash(SeqId seq, int k) const;
  int n_computed(SeqId seq) const;
  int n_tokens(SeqId seq) const;
  std::span<const int32_t> tokens(SeqId seq) const;
  // Blocks reserve(seq, n, ...) would allocate: new blocks plus copies of shared touched blocks.
  int blocks_needed(SeqId seq, int n) const;

  bool has_sequence(SeqId seq) const { return seqs_.count(seq) != 0; }
  int n_sequences() const { return int(seqs_.size()); }
  int block_tokens() const { return block_tokens_; }
  const BlockPool& pool() const { return pool_; }
  const PrefixStats& prefix_stats() const { return prefix_stats_; }

 private:
  struct Seq {
    std::vector<int32_t> tokens;
    std::vector<BlockId> table;
    std::vector<BlockHash> hashes;  // chain hashes of full computed blocks
    BlockHash seed = 0;
    int n_computed = 0;
    int n_reserved = 0;  // positions [0, n_reserved) have blocks that are written or writable
  };
  Seq& get(SeqId seq, const char* what);
  const Seq& get(SeqId seq, const char* what) const;
  // Cached blocks of prompt's prefix: fills ids (and their chain hashes) in order.
  void match_prefix(std::span<const int32_t> prompt, BlockHash seed, const UsableEnd& usable_end,
                    std::vector<BlockId>& ids, std::vector<BlockHash>* hashes) const;
  int ceil_blocks(int n_positions) const { return (n_positions + block_tokens_ - 1) / block_tokens_; }

  BlockPool pool_;
  int block_tokens_;
  std::unordered_map<SeqId, Seq> seqs_;
  PrefixStats prefix_stats_;
};

}  // namespace polykv
