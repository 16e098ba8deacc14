// The engine's prefix sharing beyond what KvSequenceManager does by itself: recurrent-state checkpoints of
// hybrid models (the state at the end of a cached prefix) and prefix-aware admission (a request waits for a
// running sequence that is computing its prefix, instead of computing it a second time).
#include <algorithm>

#include "engine/engine.h"
#include "engine/engine_seq.h"

namespace polykv {

BlockHash Engine::seed_of(const Seq& s) const {
  return s.req.cache_salt.empty() ? hash_seed_
                                  : prefix_hash_seed(opts_.model_id, opts_.k_type + "/" + opts_.v_type, s.req.cache_salt);
}

// Chain hashes of the full blocks of s's context (made once; the context does not change while it waits or
// prefills).
const std::vector<BlockHash>& Engine::context_chain(Seq& s) const {
  const int bt = mgr_.block_tokens(), n_blocks = s.n_context / bt;
  if (int(s.context_chain.size()) == n_blocks) return s.context_chain;
  s.seed = seed_of(s);
  s.context_chain.clear();
  BlockHash h = s.seed;
  for (int k = 0; k < n_blocks; ++k) {
    h = block_hash(h, std::span(s.tokens).subspan(size_t(k) * size_t(bt), size_t(bt)));
    s.context_chain.push_back(h);
  }
  return s.context_chain;
}

// True when w should stay in the queue this step: a running sequence is computing blocks of a prompt that
// begins as w's does (the same tokens and cache key) and that w would otherwise compute a second time, at least
// one block more than the prefix cache holds for w now. Once those blocks are computed (or that sequence
// leaves), w is admitted and hits them. For a hybrid model the running sequence is also told to end a chunk,
// and leave an anchor checkpoint, where the two prompts part. Named pools and their agents share by their
// own path; a waiting request never holds a slot.
bool Engine::wait_for_running_prefix(Seq& w) {
  if (!opts_.wait_for_running_prefix || w.is_pool || !w.pool.empty() || w.n_context < 2) return false;
  if (hybrid_ && checkpoints_->capacity() == 0) return false;  // no prefix caching to wait for
  const int bt = mgr_.block_tokens();
  const std::vector<BlockHash>& wc = context_chain(w);
  const size_t w_max = size_t((w.n_context - 1) / bt);  // a hit never takes the whole prompt
  int best = 0;
  Seq* best_r = nullptr;
  for (auto& rp : running_) {
    Seq& r = *rp;
    if (r.finished || r.sid < 0 || !r.kv || r.n_generated > 0 || (hybrid_ && r.is_pool)) continue;
    const int computed = r.kv->n_tokens();
    if (computed >= r.n_context) continue;  // its prompt is computed: the cache has what it will have
    const std::vector<BlockHash>& rc = context_chain(r);
    if (r.seed != w.seed) continue;
    size_t common = 0;
    const size_t limit = std::min(w_max, rc.size());
    while (common < limit && wc[common] == rc[common]) ++common;
    const int tokens = int(common) * bt;
    if (tokens > computed && tokens > best) best = tokens, best_r = &r;
  }
  if (!best_r) return false;
  // What the prefix cache holds for w now, from its chain (not hashing its prompt again every step).
  const std::span<const BlockHash> w_chain(wc.data(), std::min(w_max, wc.size()));
  const int cached = hybrid_ ? mgr_.cached_chain_tokens(w_chain, [this](BlockHash h) { return checkpoints_->contains(h); })
                             : mgr_.cached_chain_tokens(w_chain);
  if (best < cached + bt) return false;
  if (hybrid_ && std::ranges::find(best_r->checkpoint_anchors, best) == best_r->checkpoint_anchors.end())
    best_r->checkpoint_anchors.push_back(best);
  if (!w.waited_for_prefix) {
    w.waited_for_prefix = true;
    ++m_.prefix_waits_total;  // mu_ is held (admit_locked)
  }
  return true;
}

// Hybrid models: a step that ended on a block boundary leaves its state as a checkpoint under that block's
// chain hash, for later prompts with the same prefix (admit_one_locked): prompt chunks (cut to end there),
// and decode steps that happen to (every block_tokens generated tokens; the last one becomes an anchor when
// the request finishes: what the next turn of a chat, prompt + answer + more, hits). Verify steps of
// speculative decoding take none (they jump over boundaries), nor do named pools (their agents start from
// the pool's own state, Pool::state).
void Engine::checkpoint_after_step(Seq& s) {
  if (!checkpoints_ || checkpoints_->capacity() == 0 || s.is_pool) return;
  const int n = s.kv->n_tokens(), bt = mgr_.block_tokens();
  const RecurrentState* r = s.kv->recurrent_state();
  if (!r || n == 0 || n % bt != 0) return;
  const BlockHash h = mgr_.chain_hash(s.sid, n / bt - 1);
  const bool anchor = s.n_generated == 0 && (n == (int(s.tokens.size()) - 1) / bt * bt ||
                                            std::ranges::find(s.checkpoint_anchors, n) != s.checkpoint_anchors.end());
  if (checkpoints_->save(h, *r, anchor)) {
    std::lock_guard<std::mutex> lk(mu_);
    m_.state_checkpoints = checkpoints_->size();
    m_.state_checkpoint_evictions_total = checkpoints_->n_evictions();
  }
}

}  // namespace polykv
