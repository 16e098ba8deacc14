// The MTP (multi-token prediction, "nextn") head stored in a GGUF as llama.cpp stores it for
// GLM-4.5 / Qwen3.5 / DeepSeek-V3: `ARCH.nextn_predict_layers` = 1 and, after the n_layer main
// blocks, block N = n_layer holding
//   blk.N.nextn.eh_proj [n_embd][2 n_embd], blk.N.nextn.{enorm, hnorm, shared_head_norm} [n_embd],
//   and an ordinary decoder block blk.N.* (attention + FFN, the main layers' layout).
// It shares token_embd and the output matrix with the target. For rows i = 0..n-1 at positions
// kv.n_tokens() + i (MTP row t sits at position t: the target row whose hidden state it reads):
//   x_i = eh_proj · [rms(embed(next_ids[i]))·enorm ; rms(hidden[i])·hnorm]   (embedding half first)
//   y_i = block(x_i)                    (the decoder's own layer code, Model::issue_layer_ops; own KV)
//   logits_i = output · (rms(y_i)·shared_head_norm)   (predicts the token after next_ids[i])
// Only the first nextn layer is used (the files that exist have one).
// The head may also come from a side file (--model-mtp) holding only that block: blk.N.* and
// blk.N.nextn.* with N = the target's n_layer, general.architecture = the target's,
// ARCH.block_count = N + 1, ARCH.nextn_predict_layers >= 1, ARCH.embedding_length = the target's n_embd.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/model.h"

namespace polykv {

class MtpHead {
 public:
  // nullptr if the GGUF has no nextn layers; throws Error naming a missing or misshaped tensor.
  static std::unique_ptr<MtpHead> load(Model& target);
  // The head from a side file (see above); throws Error naming the file and the mismatch.
  static std::unique_ptr<MtpHead> load(Model& target, const std::string& head_path);
  ~MtpHead();
  MtpHead(const MtpHead&) = delete;
  MtpHead& operator=(const MtpHead&) = delete;

  // next_ids: [n] (n >= 1); hidden: host [n][n_embd] (the target's final hidden states after
  // output_norm, or a previous call's hidden_out when chaining); kv: made for kv_shape(), in the
  // target backend's KV memory on a device backend; its rows are committed. logits: host
  // [n][n_vocab] or nullptr; hidden_out: host [n][n_embd] (y_i) or nullptr. last_row_only: logits
  // and hidden_out hold row n - 1 alone ([1][n_vocab], [1][n_embd]) and the output matrix runs on
  // that row only (a catch-up over accepted rows needs only the last row's prediction; the others
  // only fill the KV). Row n - 1's values are the same bits either way (the output matmul's rows
  // are independent, verify_kernels' invariance).
  void forward(std::span<const int32_t> next_ids, const float* hidden, KvSequence& kv, float* logits,
               float* hidden_out, bool last_row_only = false);
  // One sequence's rows in forward_batch: forward()'s arguments with last_row_only (logits: [n_vocab],
  // hidden_out: [n_embd], of row n - 1 only; either may be nullptr).
  struct Seq {
    std::span<const int32_t> next_ids;
    const float* hidden = nullptr;
    KvSequence* kv = nullptr;
    float* logits = nullptr;
    float* hidden_out = nullptr;
  };
  // forward(..., last_row_only = true) of several sequences (distinct KVs) in one pass, as
  // Model::forward_batch does for the target: the block's and the output matrix's weights are read
  // once for all rows. Each sequence's KV rows, logits and hidden_out are the same bits as its own
  // forward() call gives (attention per sequence; the matmuls' rows are independent).
  // On a backend with one KV pool per step (Backend::one_kv_pool_per_step: CUDA) the sequences are
  // grouped by their KV's pool, one pass per group, in order of first appearance; split_by_pool forces
  // that grouping anywhere (tests). The same bits either way (rows are independent, see above).
  void forward_batch(std::span<const Seq> seqs);
  void forward_batch(std::span<const Seq> seqs, bool split_by_pool);
  KvShape kv_shape() const;  // one layer
  Model& target() const { return target_; }

 private:
  // f: the GGUF holding the block (the target's own, or *side).
  MtpHead(Model& target, const GgufFile& f, std::unique_ptr<GgufFile> side);
  void reserve(int rows, int out_rows);  // the workspace for rows, with logits for out_rows
  void forward_pass(std::span<const Seq> seqs);  // one head pass over all of seqs
  // Row i of the eh_proj input (host_cat_): [rms(embed(id))·enorm ; rms(hidden)·hnorm].
  void fill_cat_row(int i, int32_t id, const float* hidden);

  Model& target_;
  std::unique_ptr<GgufFile> side_;  // the side file the weights below point into, or nullptr
  int layer_;                       // the block's index in the file: n_layer
  LayerConfig lc_;                  // the block's attention config (full attention)
  std::vector<float> inv_freq_;     // [n_rot / 2]
  LayerWeights host_;               // blk.N.*
  DeviceLayerWeights dev_;          // the same, in backend memory
  WeightMatrix eh_proj_host_, eh_proj_;   // [n_embd][2 n_embd]
  std::vector<float> enorm_, hnorm_, head_norm_;  // [n_embd] host
  const float* dev_head_norm_ = nullptr;          // [n_embd] backend memory
  StepWorkspace ws_;                // the block's activations (its own: the target's may be in use)
  float* cat_ = nullptr;            // [rows][2 n_embd] backend memory: the eh_proj input
  int cat_rows_ = 0;
  std::vector<float> host_cat_;     // [rows][2 n_embd]
  std::vector<float> emb_;          // [n_embd]: one token's embedding (fill_cat_row)
};

}  // namespace polykv
