// The KV cache types an evaluation runs with, kept as names ("f16", "q8_0", ...) so that results can
// report them as given and so that every cache is built from a name in exactly one place
// (make_kv_cache below; its .cpp holds the single name -> type call, kv/kv_type.h's parse_kv_type).
#pragma once
#include <memory>
#include <string>

#include "kv/kv_cache.h"

namespace polykv {

class Model;

struct KvTypePair {
  std::string k = "f16";
  std::string v = "f16";
  float k_eq = 0.0f;  // K equalization strength (kv/k_equalizer.h); 0: off
};

// Throws Error naming the type when either name is unknown (before a model is loaded; whether the
// type can hold the model's head size is checked when the cache is made).
void check_kv_types(const KvTypePair& types);

// A fresh (empty) cache for `max_tokens` positions of the model, K and V in the named types.
std::unique_ptr<KvCache> make_kv_cache(const Model& model, const KvTypePair& types, int max_tokens);

// Bytes of K + V over all layers for one token position (for reports).
size_t kv_bytes_per_token(const Model& model, const KvTypePair& types);

}  // namespace polykv
