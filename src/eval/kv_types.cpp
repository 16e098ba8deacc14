#include "eval/kv_types.h"

#include "kv/kv_type.h"
#include "model/model.h"

namespace polykv {
namespace {

// The one place a KV type name becomes a type.
KvType kv_type_from_name(const std::string& name) { return parse_kv_type(name); }

}  // namespace

void check_kv_types(const KvTypePair& types) {
  (void)kv_type_from_name(types.k);
  (void)parse_v_cache_spec(types.v);
}

std::unique_ptr<KvCache> make_kv_cache(const Model& model, const KvTypePair& types, int max_tokens) {
  auto kv = std::make_unique<KvCache>(make_kv_cache(model.kv_shape(), types.k, types.v, max_tokens));
  if (types.k_eq > 0) kv->set_k_equalizer(model.make_k_equalizer(KEqualizationParams{types.k_eq}));
  return kv;
}

size_t kv_bytes_per_token(const Model& model, const KvTypePair& types) {
  return make_kv_cache(model, types, 1)->bytes_per_token();
}

}  // namespace polykv
