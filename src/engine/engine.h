// The engine: many sequences over one shared, compressed KV pool, stepped together (continuous
// batching). Implements InferenceService (engine/service.h) for the server.
//
// One step (a thread of its own runs them back to back while there is work):
//   1. cancellations and finished sequences release their blocks;
//   2. waiting requests are admitted (FIFO) while fewer than `parallel` run; a new sequence reuses
//      every cached full block of its prefix (automatic prefix caching) or forks its named pool;
//   3. a ragged batch is built under a token budget: every running sequence gets its next tokens
//      (1 when decoding, a chunk of its prompt when prefilling; there is no separate prefill phase);
//      when blocks run out, the most recently admitted other sequence is preempted (its blocks
//      freed, its tokens kept) and recomputed later, its cached prefix blocks most likely still hit;
//   4. one Model::forward_batch; sequences whose tokens are all computed sample their next token.
// Speculative decoding (engine/spec/speculative.h), per request: a decoding sequence with a drafter
// feeds [last token, drafts...] (all rows' logits), accepts what the target agrees with, and rolls
// its blocks back (KvSequenceManager::truncate) to the accepted length. The drafts' token ids are
// appended to the manager before their blocks are reserved, like any token; the rejected ones are
// dropped by the truncate, so prefix hashes only ever cover accepted tokens. Sequences drafting with
// the draft model draft together before the batch is built: one draft-model forward_batch per draft
// position for all of them (DraftModelDrafter::draft_many); so do those drafting with the MTP head
// (MtpDrafter::draft_many: one head pass per round for all of them; every MTP request shares the
// engine's one head, shared_mtp_head). Agents on a named pool share their drafter's work on the pool:
// the draft model's KV over the pool (pool_drafts_) and the MTP head's rows over it (pool_mtps_).
// Invariant: a sequence's logits do not depend on its batch companions or chunking (forward_batch).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/host_buffer.h"
#include "core/thread_pool.h"
#include "engine/service.h"
#include "engine/spec/draft_model_drafter.h"
#include "engine/spec/make_drafter.h"
#include "engine/spec/spec_policy.h"
#include "kv/kv_block_store.h"
#include "kv/kv_sequence_manager.h"
#include "kv/state_checkpoints.h"
#include "model/model.h"

namespace polykv {

class Drafter;
class MtpDrafter;
class MtpHead;
class RecurrentState;

struct EngineOptions {
  int parallel = 16;           // sequences running at once (more wait in the queue)
  int max_waiting = 1024;      // queued requests beyond this are refused (the server answers 503)
  int n_ctx = 0;               // context limit of one sequence; 0: the model's training context, capped by the pool
  size_t kv_memory_bytes = 0;  // KV pool size; 0: kv_tokens decides
  int kv_tokens = 0;           // KV pool size in tokens when kv_memory_bytes is 0; 0: 4 contexts' worth
  int block_tokens = 64;       // positions per KV block (prefix-cache granularity)
  int step_tokens = 0;         // token budget of one step (prefill chunks + decodes); 0: the backend's
                               // prompt rows per pass (Backend::default_prompt_rows: CPU 512, CUDA 4096)
  std::string k_type = "q8_0", v_type = "turbo3t";
  std::string model_id;        // served model name, and part of the prefix-cache key
  SpecOptions spec;            // speculative decoding of requests that do not choose (serve --spec)
  Model* draft_model = nullptr;  // for spec "draft" (vocabulary already checked); must outlive the engine
  // Hybrid models: recurrent-state checkpoints kept for automatic prefix caching (kv/state_checkpoints.h),
  // one state slot each (~60 MiB for Qwen3.5-9B), in the KV memory and counted in kv_memory_bytes.
  // -1: 2 x parallel, at most an eighth of kv_memory_bytes; 0: no automatic prefix caching for hybrids.
  int state_checkpoints = -1;
  // Prefix-aware admission: a request whose prompt begins with blocks a running sequence is computing waits
  // for them instead of computing them too (agents that arrive together on one document).
  bool wait_for_running_prefix = true;
  bool check_invariants = false;  // tests: verify the block pool after every step (a violation fails the step)
  // Adaptive speculation's step cost (engine/spec/spec_policy.h): when spec_cost_per_row > 0, the
  // cost model is T(R) = spec_cost_fixed + spec_cost_per_row * R seconds (tests: deterministic plans);
  // otherwise it is fitted to the measured forward passes of decode steps.
  double spec_cost_fixed = 0, spec_cost_per_row = 0;
};

class Engine final : public InferenceService {
 public:
  // is_eog: whether a token ends generation (the tokenizer's end-of-generation set). The steps run on
  // the model's backend (its threads, for the CPU) and the KV pool lives in its kv_memory().
  Engine(Model& model, std::function<bool(int32_t)> is_eog, const EngineOptions& opts);
  ~Engine() override;  // cancels what is left and joins the step thread

  ModelInfo model_info() const override;
  uint64_t submit(GenerationRequest req) override;
  void cancel(uint64_t id) override;
  PoolInfo create_pool(const std::string& name, const std::vector<int32_t>& tokens, const std::string& k_type,
                       const std::string& v_type) override;
  std::vector<PoolInfo> list_pools() const override;
  std::optional<PoolInfo> get_pool(const std::string& name) const override;
  bool delete_pool(const std::string& name) override;
  ServiceMetrics metrics() const override;

  // Progress of a pool's prefill (tokens done, total), reported from the step thread.
  std::function<void(const std::string& pool, int done, int total)> on_pool_progress;

 private:
  struct Seq;
  struct Pool {
    KvSequenceManager::SeqId sid = -1;  // its sequence in mgr_, pinned until delete_pool
    std::vector<int32_t> tokens;
    int n_blocks = 0;
    int agents = 0;
    int64_t hits = 0;
    bool ready = false;
    // Hybrid models: the recurrent state at the pool's end (its checkpoint), copied into every agent.
    std::shared_ptr<const RecurrentState> state;
    // MTP (mtp_pools_): the target's final hidden states of the pool's rows, [tokens][n_embd], handed to
    // every MTP agent's drafter at admission (its head needs every earlier row; docs/SPECULATIVE.md).
    std::shared_ptr<const std::vector<float>> hidden;
  };

  void step_loop();
  void step();  // one step: cancellations, admissions, one batch
  void refresh_kv_stats();  // metrics' view of the block pool (step thread)
  void admit_locked(std::vector<std::unique_ptr<Seq>>& failed);
  void admit_one_locked(Seq& s);
  bool make_room(Seq& s, int n, std::vector<Seq*>& batch);
  void finish(Seq& s, FinishReason r, const std::string& error = "");
  void preempt(Seq& s);
  void sample_and_emit(Seq& s, const float* logits);
  // Emits one generated token (its logits row for logprobs); in_manager: its id is already among
  // the manager's tokens (an accepted draft). Returns false when the sequence finished.
  bool emit(Seq& s, int32_t id, const float* logits, bool in_manager);
  void verify_and_emit(Seq& s, const float* rows, int p0);
  // Drafts a decoding sequence may propose this step with `budget` tokens left in it (its plan's k).
  int draft_limit(const Seq& s, int budget) const;
  // Sets every decoding sequence's k for this step (adaptive policy: plan_drafts; fixed: n_max).
  void plan_speculation(const std::vector<Seq*>& order);
  // Seconds, calls and drafted tokens of a step's steady drafts, per drafter name (the policy's samples).
  struct DraftTiming {
    double seconds = 0;
    int calls = 0, tokens = 0;
  };
  // The draft-model and MTP drafts of this step, each kind's sequences together (engine_spec.cpp).
  // Returns the seconds spent; adds steady drafts to `drafting`.
  double draft_before_batch(const std::vector<Seq*>& order, std::map<std::string, DraftTiming>& drafting);
  // An agent's first draft-model draft: fills its draft KV from its pool's shared one (made on first use).
  void share_pool_draft(Seq& s, DraftModelDrafter& d);
  // An MTP agent's head waiting for its pool's rows: copies them from the pool's shared head KV.
  void share_pool_mtp(Seq& s, MtpDrafter& d);
  // The model drafter of an ngram+mtp / ngram+draft drafter (HybridDrafter), or nullptr. It takes its pool's work
  // as a plain MTP or draft-model drafter does: an MTP head the pool's last hidden row at admission, then (both)
  // the pool's shared state at the first model draft (share_pool_hybrid); neither prefills per agent.
  static Drafter* hybrid_model(Drafter* d);
  // Before a hybrid agent's model draft: share_pool_mtp / share_pool_draft for its model drafter.
  void share_pool_hybrid(Seq& s);
  // The engine's MTP head (loaded on first use; every MTP request's drafter shares it).
  std::shared_ptr<MtpHead> shared_mtp_head(const std::string& path);
  PoolInfo pool_info_locked(const std::string& name, const Pool& p) const;

  Model& model_;
  std::function<bool(int32_t)> is_eog_;
  EngineOptions opts_;
  KvBlockStore store_;
  KvSequenceManager mgr_;  // touched by the step thread only (and by constructors before it starts)
  BlockHash hash_seed_ = 0;
  bool hybrid_ = false;  // the model has recurrent (Gated DeltaNet) layers: see admit_locked
  // Hybrid models: states at block ends of prompts, the prefix cache's other half (null otherwise).
  std::unique_ptr<StateCheckpointCache> checkpoints_;
  // Hybrid prompt chunks end on block boundaries so that their ends can be checkpointed (see step()).
  // engine_prefix.cpp, with the prefix-aware admission:
  void checkpoint_after_step(Seq& s);
  bool wait_for_running_prefix(Seq& w);  // mu_ held
  BlockHash seed_of(const Seq& s) const;
  const std::vector<BlockHash>& context_chain(Seq& s) const;
  bool mtp_pools_ = false;  // requests may draft with an MTP head: pools keep their rows' hidden states
  HostFloats step_logits_;  // step(): the step's logit rows, reused from step to step (step thread)
  // Samples the step's decode rows in parallel (each sequence's own Sampler, so the same tokens as one
  // after another); null: on the step thread only. See sample_threads() in engine.cpp.
  std::unique_ptr<ThreadPool> sample_pool_;
  bool backend_argmax_ = false;  // plain greedy rows take the backend's argmax (engine.cpp device_argmax)
  StepCostModel step_cost_;  // adaptive speculation: target step seconds against rows (step thread)
  std::map<std::string, DraftCostFit> draft_cost_;  // per drafter name: seconds per call and per token (step thread)
  // Per pool name, a draft-model KV holding the pool's tokens, prefilled once and copied into every
  // agent's draft KV on its first draft (step thread; dropped with the pool).
  std::map<std::string, std::unique_ptr<DraftModelDrafter>> pool_drafts_;
  // Per pool name, an MTP drafter whose head KV holds the pool's rows (made once from Pool::hidden,
  // copied into every MTP agent's head KV; step thread; dropped with the pool).
  struct PoolMtp {
    std::unique_ptr<MtpDrafter> drafter;
    std::shared_ptr<const std::vector<float>> hidden;  // the hidden states it was made from
  };
  std::map<std::string, PoolMtp> pool_mtps_;
  std::mutex mtp_head_mu_;  // guards the two below (submit() runs on the callers' threads)
  std::shared_ptr<MtpHead> mtp_head_;
  std::string mtp_head_path_;

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  KvSequenceManager::SeqId next_sid_ = 1;
  std::deque<std::unique_ptr<Seq>> waiting_;
  std::vector<std::unique_ptr<Seq>> running_;  // in admission order
  std::vector<uint64_t> cancelled_;
  std::map<std::string, Pool> pools_;
  std::vector<KvSequenceManager::SeqId> pools_to_free_;
  ServiceMetrics m_;
  std::thread thread_;
};

}  // namespace polykv
