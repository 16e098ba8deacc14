// A loaded model: its GGUF file (memory-mapped), config and bound weights, and the decoder's
// forward pass, which runs on a Backend (backend/backend.h).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "kv/kv_cache.h"
#include "model/config.h"
#include "model/device_weights.h"
#include "model/hybrid_workspace.h"
#include "model/moe_ffn.h"
#include "model/step_workspace.h"
#include "model/weights.h"

namespace polykv {

class Model {
 public:
  // Opens, checks and binds a GGUF model and uploads its weights through `backend`, which must
  // outlive the model; throws Error naming the problem. `rope` overrides the file's RoPE settings
  // (model/config.h RopeOverride: run past the training context).
  static std::unique_ptr<Model> load(const std::string& path, Backend& backend, const RopeOverride& rope = {});

  const ModelConfig& config() const { return config_; }
  const GgufFile& gguf() const { return file_; }
  // The host-side weights (what the file holds; the CPU backend reads these very matrices).
  const ModelWeights& weights() const { return weights_; }
  Backend& backend() const { return backend_; }
  // The weights in backend memory (what the forward pass reads).
  const DeviceWeights& device_weights() const { return dev_; }

  KvShape kv_shape() const;
  // A K equalizer shaped for this model (its RoPE pairs), to install in a KvCache before use.
  KEqualizer make_k_equalizer(const KEqualizationParams& p) const;
  // Bytes of weights the forward pass reads per token (all matrices but the embedding table).
  size_t weight_bytes_per_token() const;

  // Runs tokens at positions kv.n_tokens() ... through the model, appends their K/V to kv and
  // commits them. logits (host memory): [n_tokens][n_vocab] when all_logits, else [n_vocab] for the
  // last token; nullptr: none.
  void forward(std::span<const int32_t> tokens, KvSequence& kv, float* logits, bool all_logits);

  // One step over a ragged batch: every sequence's tokens go through each weight matrix together (the
  // weights are read once per step); attention runs per sequence over its own KV. A token's logits
  // do not depend on the other sequences of the batch (every kernel reduces each row in a fixed
  // order). Sequences must be distinct KV objects.
  struct BatchSeq {
    std::span<const int32_t> tokens;  // at positions kv->n_tokens() ...
    KvSequence* kv = nullptr;
    float* logits = nullptr;          // host: [n][n_vocab] if all_logits, else [n_vocab] of the last token; nullptr: none
    bool all_logits = false;
    float* hidden = nullptr;  // host [n][n_embd]: final hidden states (after output_norm) of every row of
                              // this sequence in the step (nullptr: none); independent of logits/all_logits
    // host [n] if all_logits, else [1]: the argmax (core/argmax_ref.h: first maximum, -1 if no logit is
    // usable) of each logit row, computed on the backend so that only the indices are copied back (what
    // greedy decoding needs); with or without `logits`. nullptr: none.
    int32_t* argmax = nullptr;
    // Pipelined greedy decoding (one sequence, one token a step; used by generate() and bench on GPU
    // backends, engine/step_switch.h). argmax_async: *argmax is written by finish_argmax(), not before
    // forward_batch returns, so the call does not wait for the step. token_from_last_argmax: this step's
    // one token is the argmax the model's previous step computed for this same sequence (an argmax step
    // of one row), still in backend memory; tokens[0] is a placeholder and is not read. The host issues
    // step k + 1 before it has read step k's token. An argmax of -1 (no finite logit) fed this way gives
    // NaN rows on the GPU and an Error on the CPU; finish_argmax hands the -1 to the caller.
    bool argmax_async = false;
    bool token_from_last_argmax = false;
  };
  // Not reentrant: the activations live in one workspace per model, so one call at a time per model
  // (a concurrent call throws Error). Today's callers keep this: the engine runs every step on its
  // one step thread; the CLI commands, eval and tests call from one thread.
  void forward_batch(std::span<const BatchSeq> batch);
  // The oldest argmax_async result not yet finished: waits for its copy (not for later steps) and writes
  // it where that step's BatchSeq::argmax pointed. Returns false when none is pending. The caller's
  // pointers must stay valid until then; a pending result is dropped (waited for, not written) by the
  // destructor and by a forward_batch with no argmax_async row.
  bool finish_argmax();
  ~Model();

  // Diagnostics: forward passes run only the first n layers (0: all; more than n_layer: all), so the
  // hidden states (BatchSeq::hidden) are layer n-1's output after output_norm, and logits are computed
  // from it. What tests compare between backends layer by layer (tests/cuda/hybrid_layers_cuda_test.cpp).
  void set_layer_limit(int n) { layer_limit_ = n; }

  // One decoder layer's ops over rows [0, n) of `ws` (ws.x in, ws.x out; the other buffers scratch):
  // the main layers' code, also what runs the MTP block (model/mtp_head.h). `kv_layer` is the layer
  // index in the step sequences' KV; pos: [n] backend memory; begin_step already done.
  // h_ready: ws.h already holds attn_norm(x) (the previous layer's fused add_rmsnorm wrote it).
  // next_attn_norm: if set, the layer ends with x += h; h = rmsnorm(x) * next_attn_norm (one fused op)
  // instead of x += h, for the next layer to start from.
  // next_reads_once: the next layer's mixer reads its normed input once (mixer_reads_once), so the norm may be
  // Backend::rmsnorm_into_matmul.
  void issue_layer_ops(const DeviceLayerWeights& l, const LayerConfig& lc, int kv_layer, int n,
                       const int32_t* pos, StepWorkspace& ws, bool h_ready = false,
                       const float* next_attn_norm = nullptr, bool next_reads_once = false);
  // Whether a layer of this kind reads its normed input h with one matmul op (one matmul_multi /
  // matmul_qkv_rope), nothing else: what Backend::rmsnorm_into_matmul asks.
  bool mixer_reads_once(const LayerConfig& lc) const;

 private:
  Model(GgufFile file, ModelConfig config, Backend& backend);
  // The step's ops, embedding to logits, on the workspace (ids already uploaded, begin_step done):
  // what a recording backend replays (Backend::replay_step). logits: [n_out][n_vocab], backend memory.
  void issue_step_ops(int n, int n_out, const int32_t* tokens, const int32_t* pos, const int32_t* gather,
                      float* logits);
  // After the layers: rows `rows` ([n_hid], backend memory) of ws_.x gathered into ws_.hidden and normed.
  void issue_hidden_ops(int n_hid, const int32_t* rows);

  Backend& backend_;
  GgufFile file_;
  ModelConfig config_;
  ModelWeights weights_;
  std::vector<std::vector<float>> inv_freq_;  // [n_layer][n_rot / 2]
  DeviceWeights dev_;                         // weights_ and inv_freq_ in backend memory
  StepWorkspace ws_;                          // activations of forward_batch (grow-only)
  HybridWorkspace hws_;                       // hybrid models' extra activations (grow-only)
  MoeWorkspace moe_ws_;                       // the MoE FFN's activations (MoE models only)
  std::atomic<bool> busy_{false};             // a forward_batch is running
  // argmax_async results in flight, oldest first: backend ticket, slot of argmax_host_, destination.
  struct PendingArgmax {
    uint64_t ticket;
    int slot;
    int32_t* dst;
  };
  static constexpr int kArgmaxSlots = 4;  // page-locked int32s: more than the results ever in flight (2)
  void drop_pending_argmax();  // waits for every pending result's copy; writes none
  std::vector<PendingArgmax> pending_argmax_;
  int32_t* argmax_host_ = nullptr;  // [kArgmaxSlots], Backend::allocate_host
  int next_argmax_slot_ = 0;
  // The sequence whose one-row argmax the last step left in ws_.argmax (a chained step may read it), else nullptr.
  const KvSequence* chain_kv_ = nullptr;
  const int32_t* chain_argmax_ = nullptr;  // ws_.argmax at that step (a reallocated workspace breaks the chain)
  int layer_limit_ = 0;                       // set_layer_limit (0: every layer)
};

}  // namespace polykv
