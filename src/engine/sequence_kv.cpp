#include "engine/sequence_kv.h"

#include "core/error.h"
#include "kv/kv_cache.h"
#include "kv/owned_paged_kv.h"
#include "kv/v_window.h"

namespace polykv {

std::unique_ptr<KvSequence> make_sequence_kv(const Model& model, const SequenceKvOptions& o) {
  KvMemory& memory = model.backend().kv_memory();
  if (memory.host_accessible()) {
    auto kv = std::make_unique<KvCache>(
        make_kv_cache(model.kv_shape(), o.k_type, o.v_type, o.max_tokens, o.block_tokens, o.rollback_tokens));
    if (o.k_eq > 0) kv->set_k_equalizer(model.make_k_equalizer(KEqualizationParams{o.k_eq}));
    return kv;
  }
  const VCacheSpec v = parse_v_cache_spec(o.v_type);
  check(!v.window.enabled(), "the V precision window (", o.v_type, ") needs KV in host memory; the KV of ",
        model.backend().describe(), " is in ", memory.name(), " memory: use ", kv_type_name(v.type));
  check(o.k_eq <= 0, "K equalization needs KV in host memory; the KV of ", model.backend().describe(), " is in ",
        memory.name(), " memory");
  return std::make_unique<OwnedPagedKv>(model.kv_shape(), parse_kv_type(o.k_type), v.type, o.max_tokens,
                                        o.block_tokens, memory);
}

void truncate_sequence_kv(KvSequence& kv, int n_tokens) {
  if (auto* c = dynamic_cast<KvCache*>(&kv)) return c->truncate(n_tokens);
  if (auto* p = dynamic_cast<OwnedPagedKv*>(&kv)) return p->truncate(n_tokens);
  fail("this KV sequence cannot roll back");
}

SequenceMark::SequenceMark(KvSequence& kv) : position_(kv.n_tokens()) {
  if (const RecurrentState* r = kv.recurrent_state()) {
    state_ = std::make_unique<RecurrentState>(r->shape(), r->memory());
    state_->copy_from(*r);
  }
}

SequenceMark::~SequenceMark() = default;

void SequenceMark::rewind(KvSequence& kv) const {
  check(kv.n_tokens() >= position_, "rewind to position ", position_, " of a sequence of ", kv.n_tokens(), " tokens");
  if (RecurrentState* r = kv.recurrent_state(); r && state_ && r->n_tokens() != position_)
    r->copy_from(*state_);  // the state at the mark: the truncate below then leaves it alone
  truncate_sequence_kv(kv, position_);
}

}  // namespace polykv
