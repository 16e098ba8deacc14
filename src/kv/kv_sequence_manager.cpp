// KvSequenceManager: block tables, prefix hits, copy-on-write and hash registration over one
// BlockPool. The rules and the invariants are stated in kv_sequence_manager.h.
#include "kv/kv_sequence_manager.h"

#include <algorithm>

#include "core/error.h"

namespace polykv {

KvSequenceManager::KvSequenceManager(int n_blocks, int block_tokens) : pool_(n_blocks), block_tokens_(block_tokens) {
  check(block_tokens > 0, "kv sequences: block_tokens must be positive, got ", block_tokens);
}

KvSequenceManager::Seq& KvSequenceManager::get(SeqId seq, const char* what) {
  auto it = seqs_.find(seq);
  check(it != seqs_.end(), "kv sequences: ", what, " of unknown sequence ", seq);
  return it->second;
}

const KvSequenceManager::Seq& KvSequenceManager::get(SeqId seq, const char* what) const {
  return const_cast<KvSequenceManager*>(this)->get(seq, what);
}

void KvSequenceManager::match_prefix(std::span<const int32_t> prompt, BlockHash seed, const UsableEnd& usable_end,
                                     std::vector<BlockId>& ids, std::vector<BlockHash>* hashes) const {
  // Never the whole prompt: the last token must be computed for its logits.
  const int max_blocks = prompt.empty() ? 0 : int((prompt.size() - 1) / size_t(block_tokens_));
  std::vector<BlockHash> hs;
  BlockHash h = seed;
  size_t usable = 0;  // blocks of the longest matched prefix that may end a hit
  for (int k = 0; k < max_blocks; ++k) {
    h = block_hash(h, prompt.subspan(size_t(k) * size_t(block_tokens_), size_t(block_tokens_)));
    const BlockId b = pool_.lookup(h);
    if (b < 0) break;
    ids.push_back(b);
    hs.push_back(h);
    if (!usable_end || usable_end(h)) usable = ids.size();
  }
  ids.resize(usable);
  hs.resize(usable);
  if (hashes) *hashes = std::move(hs);
}

int KvSequenceManager::add_sequence(SeqId seq, std::span<const int32_t> prompt, BlockHash seed,
                                    const UsableEnd& usable_end) {
  check(!seqs_.count(seq), "kv sequences: sequence ", seq, " already exists");
  Seq s;
  s.tokens.assign(prompt.begin(), prompt.end());
  s.seed = seed;
  match_prefix(prompt, seed, usable_end, s.table, &s.hashes);
  for (BlockId b : s.table) pool_.ref(b);
  s.n_computed = s.n_reserved = int(s.table.size()) * block_tokens_;
  ++prefix_stats_.n_queries;
  prefix_stats_.n_query_tokens += int64_t(prompt.size());
  prefix_stats_.n_hit_tokens += s.n_computed;
  const int cached = s.n_computed;
  seqs_.emplace(seq, std::move(s));
  return cached;
}

int KvSequenceManager::cached_prefix_tokens(std::span<const int32_t> prompt, BlockHash seed,
                                            const UsableEnd& usable_end) const {
  std::vector<BlockId> ids;
  match_prefix(prompt, seed, usable_end, ids, nullptr);
  return int(ids.size()) * block_tokens_;
}

int KvSequenceManager::cached_chain_tokens(std::span<const BlockHash> chain, const UsableEnd& usable_end) const {
  size_t usable = 0;
  for (size_t k = 0; k < chain.size() && pool_.lookup(chain[k]) >= 0; ++k)
    if (!usable_end || usable_end(chain[k])) usable = k + 1;
  return int(usable) * block_tokens_;
}

int KvSequenceManager::blocks_to_admit(std::span<const int32_t> prompt, BlockHash seed,
                                       const UsableEnd& usable_end) const {
  std::vector<BlockId> ids;
  match_prefix(prompt, seed, usable_end, ids, nullptr);
  int n = ceil_blocks(int(prompt.size())) - int(ids.size());
  for (BlockId b : ids) n += pool_.refcount(b) == 0 ? 1 : 0;  // reviving a cached-idle block uses it up
  return n;
}

void KvSequenceManager::fork(SeqId child, SeqId parent) {
  check(child != parent && !seqs_.count(child), "kv sequences: fork into existing sequence ", child);
  Seq& p = get(parent, "fork");
  Seq c;
  c.tokens = p.tokens;
  c.hashes = p.hashes;
  c.seed = p.seed;
  c.n_computed = c.n_reserved = p.n_computed;
  // Only blocks with computed rows: the parent's reserved-but-unwritten blocks stay its own.
  c.table.assign(p.table.begin(), p.table.begin() + ceil_blocks(p.n_computed));
  for (BlockId b : c.table) pool_.ref(b);
  // The shared partial block is no longer the parent's to write: it must reserve (copy) again.
  if (p.n_computed % block_tokens_ != 0) p.n_reserved = p.n_computed;
  seqs_.emplace(child, std::move(c));
}

void KvSequenceManager::append_tokens(SeqId seq, std::span<const int32_t> ids) {
  Seq& s = get(seq, "append_tokens");
  s.tokens.insert(s.tokens.end(), ids.begin(), ids.end());
}

int KvSequenceManager::blocks_needed(SeqId seq, int n) const {
  const Seq& s = get(seq, "blocks_needed");
  check(n >= 0 && s.n_computed + int64_t(n) <= int64_t(s.tokens.size()), "kv sequences: cannot reserve ", n,
        " positions for sequence ", seq, " at ", s.n_computed, " of ", s.tokens.size(), " known tokens");
  if (n == 0) return 0;
  const int first = s.n_computed / block_tokens_, end = ceil_blocks(s.n_computed + n);
  const int have = int(s.table.size());
  int needed = std::max(0, end - have);
  for (int k = first; k < std::min(end, have); ++k) needed += pool_.refcount(s.table[size_t(k)]) > 1 ? 1 : 0;
  return needed;
}

bool KvSequenceManager::reserve(SeqId seq, int n, std::vector<BlockCopy>& copies) {
  const int needed = blocks_needed(seq, n);  // checks seq and n
  if (needed > pool_.n_available()) return false;
  Seq& s = get(seq, "reserve");
  if (n == 0) return true;
  const int first = s.n_computed / block_tokens_, end = ceil_blocks(s.n_computed + n);
  const int have = int(s.table.size());
  for (int k = first; k < std::min(end, have); ++k) {
    BlockId& b = s.table[size_t(k)];
    if (pool_.refcount(b) > 1) {  // shared: copy on write
      const BlockId dst = pool_.allocate();
      if (k * block_tokens_ < s.n_computed) copies.push_back({b, dst});
      pool_.unref(b);
      b = dst;
    } else if (pool_.has_hash(b)) {  // ours alone, cached by content: stop advertising it
      pool_.drop_hash(b);
    }
  }
  for (int k = have; k < end; ++k) s.table.push_back(pool_.allocate());  // never -1: counted above
  s.n_reserved = std::max(s.n_reserved, s.n_computed + n);
  return true;
}

void KvSequenceManager::mark_computed(SeqId seq, int n_computed) {
  Seq& s = get(seq, "mark_computed");
  check(n_computed >= s.n_computed && n_computed <= s.n_reserved, "kv sequences: mark_computed(", n_computed,
        ") of sequence ", seq, " outside [", s.n_computed, ", ", s.n_reserved, "] (reserve first)");
  for (size_t k = s.hashes.size(); k < size_t(n_computed / block_tokens_); ++k) {
    const BlockHash parent = k == 0 ? s.seed : s.hashes[k - 1];
    const BlockHash h = block_hash(parent, std::span(s.tokens).subspan(k * size_t(block_tokens_), size_t(block_tokens_)));
    s.hashes.push_back(h);
    pool_.register_hash(s.table[k], h);  // false: another block holds h; ours stays private
  }
  s.n_computed = n_computed;
}

void KvSequenceManager::truncate(SeqId seq, int n_tokens) {
  Seq& s = get(seq, "truncate");
  check(n_tokens >= 0 && size_t(n_tokens) <= s.tokens.size(), "kv sequences: truncate of sequence ", seq, " to ",
        n_tokens, " of ", s.tokens.size(), " tokens");
  s.tokens.resize(size_t(n_tokens));
  s.n_computed = std::min(s.n_computed, n_tokens);
  s.n_reserved = std::min(s.n_reserved, n_tokens);
  s.hashes.resize(size_t(s.n_computed / block_tokens_));
  const size_t keep = std::min(s.table.size(), size_t(ceil_blocks(n_tokens)));
  while (s.table.size() > keep) {  // last to first: see the header's eviction-order policy
    pool_.unref(s.table.back());
    s.table.pop_back();
  }
}

void KvSequenceManager::free(SeqId seq) {
  Seq& s = get(seq, "free");
  for (auto it = s.table.rbegin(); it != s.table.rend(); ++it) pool_.unref(*it);
  seqs_.erase(seq);
}

std::span<const BlockId> KvSequenceManager::block_table(SeqId seq) const { return get(seq, "block_table").table; }
int KvSequenceManager::n_computed(SeqId seq) const { return get(seq, "n_computed").n_computed; }
int KvSequenceManager::n_tokens(SeqId seq) const { return int(get(seq, "n_tokens").tokens.size()); }
std::span<const int32_t> KvSequenceManager::tokens(SeqId seq) const { return get(seq, "tokens").tokens; }

BlockHash KvSequenceManager::chain_hash(SeqId seq, int k) const {
  const Seq& s = get(seq, "chain_hash");
  check(k >= 0 && size_t(k) < s.hashes.size(), "kv sequences: chain_hash of block ", k, " of sequence ", seq,
        ", which has ", s.hashes.size(), " full computed blocks");
  return s.hashes[size_t(k)];
}

}  // namespace polykv
