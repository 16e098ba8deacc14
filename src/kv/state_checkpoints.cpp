#include "kv/state_checkpoints.h"

#include <algorithm>

#include "core/error.h"

namespace polykv {

StateCheckpointCache::StateCheckpointCache(const RecurrentShape& shape, KvMemory& memory, int capacity)
    : shape_(shape), memory_(&memory), capacity_(capacity), slot_bytes_(RecurrentState::slot_bytes_for(shape)) {
  check(capacity >= 0, "state checkpoints: capacity must be at least 0, got ", capacity);
  check(shape.n_layer > 0 || capacity == 0, "state checkpoints: the model has no recurrent state");
}

StateCheckpointCache::~StateCheckpointCache() {
  for (Entry& e : plain_) memory_->release(e.slot);
  for (Entry& e : anchors_) memory_->release(e.slot);
}

size_t StateCheckpointCache::bytes_for(const RecurrentShape& shape, int capacity) {
  return size_t(std::max(0, capacity)) * RecurrentState::slot_bytes_for(shape);
}

int StateCheckpointCache::position(BlockHash h) const {
  auto it = by_hash_.find(h);
  return it == by_hash_.end() ? -1 : it->second->position;
}

void StateCheckpointCache::check_compatible(const RecurrentState& s) const {
  check(s.shape() == shape_, "state checkpoints: a state of another shape");
  check(&s.memory() == memory_, "state checkpoints: a state in ", s.memory().name(), " memory, the checkpoints in ",
        memory_->name());
}

bool StateCheckpointCache::is_anchor(BlockHash h) const {
  auto it = by_hash_.find(h);
  return it != by_hash_.end() && it->second->anchor;
}

bool StateCheckpointCache::save(BlockHash h, const RecurrentState& s, bool anchor) {
  check_compatible(s);
  if (capacity_ == 0) return false;
  if (auto it = by_hash_.find(h); it != by_hash_.end()) {  // same prefix, same state: refresh (and promote)
    List& from = list_of(it->second->anchor);
    it->second->anchor = it->second->anchor || anchor;
    List& to = list_of(it->second->anchor);
    to.splice(to.end(), from, it->second);
    return true;
  }
  void* slot = nullptr;
  if (size() < capacity_) slot = memory_->allocate(slot_bytes_);
  if (!slot) {  // full, or the memory refused: reuse the slot of the oldest plain checkpoint, else anchor
    List& victims = !plain_.empty() || !anchor ? plain_ : anchors_;
    if (victims.empty()) return false;
    slot = victims.front().slot;
    by_hash_.erase(victims.front().hash);
    victims.pop_front();
    ++n_evictions_;
  }
  s.save_to(slot);
  List& to = list_of(anchor);
  to.push_back({h, s.n_tokens(), slot, anchor});
  by_hash_[h] = std::prev(to.end());
  return true;
}

void StateCheckpointCache::restore(BlockHash h, RecurrentState& s) {
  check_compatible(s);
  auto it = by_hash_.find(h);
  check(it != by_hash_.end(), "state checkpoints: no checkpoint under this prefix");
  List& l = list_of(it->second->anchor);
  l.splice(l.end(), l, it->second);
  s.load_from(it->second->slot, it->second->position);
}

}  // namespace polykv
