#include "eval/kv_types.h"

#include "kv/kv_type.h"
#include "model/model.h"

namespace polykv {
namespace {

// The one place a KV type name becomes a type (same parser as the CLI's parse_kv_type).
KvType kv_type_from_name(const std::string& name) { return parse_kv_type(name); }

}  // namespace

void check_kv_types(const KvTypePair& types) {
  // A one-position cache of a small shape: KvCache itself rejects types it cannot store.
  const KvShape shape{1, 1, 256, 256};
  KvCache probe(shape, kv_type_from_name(types.k), kv_type_from_name(types.v), 1);
}

std::unique_ptr<KvCache> make_kv_cache(const Model& model, const KvTypePair& types, int max_tokens) {
  return std::make_unique<KvCache>(model.kv_shape(), kv_type_from_name(types.k), kv_type_from_name(types.v),
                                   max_tokens);
}

size_t kv_bytes_per_token(const Model& model, const KvTypePair& types) {
  return make_kv_cache(model, types, 1)->bytes_per_token();
}

}  // namespace polykv
