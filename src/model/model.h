// A loaded model: its GGUF file (memory-mapped), config and bound weights, and the decoder's
// forward pass.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "kv/kv_cache.h"
#include "model/config.h"
#include "model/weights.h"

namespace polykv {

class Model {
 public:
  // Opens, checks and binds a GGUF model; throws Error naming the problem.
  static std::unique_ptr<Model> load(const std::string& path);

  const ModelConfig& config() const { return config_; }
  const GgufFile& gguf() const { return file_; }
  const ModelWeights& weights() const { return weights_; }

  KvShape kv_shape() const;
  // A K equalizer shaped for this model (its RoPE pairs), to install in a KvCache before use.
  KEqualizer make_k_equalizer(const KEqualizationParams& p) const;
  // Bytes of weights the forward pass reads per token (all matrices but the embedding table).
  size_t weight_bytes_per_token() const;

  // Runs tokens at positions kv.n_tokens() ... through the model, appends their K/V to kv and
  // commits them. logits: [n_tokens][n_vocab] when all_logits, else [n_vocab] for the last token.
  void forward(std::span<const int32_t> tokens, KvSequence& kv, float* logits, bool all_logits, ThreadPool& pool);

  // One step over a ragged batch: every sequence's tokens go through each weight matrix together (the
  // weights are read once per step); attention runs per sequence over its own KV. A token's logits
  // do not depend on the other sequences of the batch (every kernel reduces each row in a fixed
  // order). Sequences must be distinct KV objects.
  struct BatchSeq {
    std::span<const int32_t> tokens;  // at positions kv->n_tokens() ...
    KvSequence* kv = nullptr;
    float* logits = nullptr;          // [n][n_vocab] if all_logits, else [n_vocab] of the last token; nullptr: none
    bool all_logits = false;
  };
  void forward_batch(std::span<const BatchSeq> batch, ThreadPool& pool);

 private:
  Model(GgufFile file, ModelConfig config);

  GgufFile file_;
  ModelConfig config_;
  ModelWeights weights_;
  std::vector<std::vector<float>> inv_freq_;  // [n_layer][n_rot / 2]
};

}  // namespace polykv
