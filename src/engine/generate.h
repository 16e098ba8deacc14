// Single-sequence generation: prefill a prompt, then sample token by token until an end-of-generation
// token, a stop, or n_predict tokens. The server's continuous batching builds on the same pieces.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "engine/sampler.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace polykv {

struct GenerateOptions {
  int n_predict = 128;      // tokens to generate at most (< 0: until the context is full)
  int prefill_chunk = 512;  // prompt tokens per forward pass (bounds scratch memory)
  SamplingParams sampling;
};

struct GenerateStats {
  int n_prompt = 0;
  int n_generated = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  bool stopped_by_eog = false;
};

// Called with each generated token; return false to stop. is_eog(id) says whether id ends generation
// (the token itself is not passed to on_token).
struct GenerateCallbacks {
  std::function<bool(int32_t id)> on_token;
  std::function<bool(int32_t id)> is_eog;
};

// Throws Error when the prompt is empty or does not fit the cache.
GenerateStats generate(Model& model, KvCache& kv, std::span<const int32_t> prompt, const GenerateOptions& opts,
                       const GenerateCallbacks& cb, ThreadPool& pool);

}  // namespace polykv
