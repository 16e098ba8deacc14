// Engine::Seq, one request (or a pool's prefill) in the engine: shared by the engine's translation
// units (engine.cpp: the step; engine_spec.cpp: speculative decoding's planning and batched drafting).
// Touched by the step thread only once admitted.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "kv/paged_kv.h"

namespace polykv {

struct Engine::Seq {
  uint64_t id = 0;
  KvSequenceManager::SeqId sid = -1;  // -1 while not admitted
  GenerationRequest req;
  std::string pool;              // the pool this sequence continues, or (is_pool) creates
  bool is_pool = false;
  int n_pool = 0;                // an agent: the pool's tokens at the start of `tokens`
  std::vector<int32_t> tokens;   // context (pool + prompt), then generated tokens
  int n_context = 0;
  int n_cached = -1;             // context tokens served from cache at first admission (-1: not yet)
  // Hybrid models: positions where a prompt chunk must end and leave an anchor checkpoint
  // (Engine::checkpoint_after_step): where this prompt leaves a prefix whose blocks are cached without a
  // state at their end, and where a waiting prompt that shares this one's prefix will hit it
  // (Engine::wait_for_running_prefix), so that the next prompts with those prefixes hit there.
  std::vector<int> checkpoint_anchors;
  // Prefix-aware admission (Engine::wait_for_running_prefix): the cache key's seed and the chain hashes of
  // the context's full blocks, made at the first check; whether it has waited for a running prefix.
  BlockHash seed = 0;
  std::vector<BlockHash> context_chain;
  bool waited_for_prefix = false;
  std::unique_ptr<PagedKv> kv;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<Drafter> drafter;  // speculative decoding; nullptr: off
  int spec_n_max = 0;
  bool spec_adaptive = true;
  SpecSeqState spec_state;           // adaptive speculation: acceptance, probe counter
  int k_plan = 0;                    // drafts planned for this step (plan_speculation)
  int spec_source = 0;               // the drafter's source of this step's drafts (Drafter::next_source)
  std::vector<int32_t> drafts;       // this step's drafts (their ids are also in the manager's tokens)
  int n_generated = 0;
  std::vector<float> pool_hidden;  // a pool with mtp_pools_: its rows' hidden states so far [n][n_embd]
  // An MTP agent: the pool's hidden states its drafter was given at admission (share_pool_mtp's source).
  std::shared_ptr<const std::vector<float>> pool_hidden_src;
  std::chrono::steady_clock::time_point t_submit = std::chrono::steady_clock::now();
  double ttft = 0;
  bool finished = false;
  FinishInfo info;
};

}  // namespace polykv
