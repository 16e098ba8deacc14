// TEMPORARY (issue #8): an InferenceService that runs ONE request at a time on a worker thread with
// the single-sequence pieces (Model::forward, KvCache, Sampler). It makes `polykv serve` usable and
// testable end to end until the real Engine (engine/engine.h: continuous batching over the shared KV
// pool) replaces it; nothing else should depend on it.
//
// What it does not do: batching (requests wait in a FIFO queue), sharing between concurrent requests,
// preemption, cache_salt (ignored: nothing is shared across requests except named pools).
// Named pools: create_pool prefills the pool's tokens once into a KvCache of its own; a request on a
// pool runs in that cache and rolls it back to the pool's length when it finishes (possible because
// only one request runs at a time), so cached_tokens = the pool's tokens.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/service.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace polykv {

struct SequentialServiceOptions {
  std::string model_id;                 // ModelInfo::id
  int n_ctx = 0;                        // context limit of a sequence (0: the model's training context)
  std::string k_type = "q8_0", v_type = "turbo3t";  // defaults; pools may choose their own
  int threads = 0;                      // compute threads (0: all cores)
  int prefill_chunk = 256;              // tokens per forward pass while prefilling
  int progress_min_tokens = 1024;       // pool prefills at least this long report progress on stderr
};

class SequentialService final : public InferenceService {
 public:
  // Throws Error for a bad KV type name or context size.
  SequentialService(std::shared_ptr<Model> model, SequentialServiceOptions opts);
  ~SequentialService() override;  // cancels what is queued (each gets on_done Cancelled) and joins

  ModelInfo model_info() const override { return info_; }
  uint64_t submit(GenerationRequest req) override;
  void cancel(uint64_t id) override;
  PoolInfo create_pool(const std::string& name, const std::vector<int32_t>& tokens, const std::string& k_type,
                       const std::string& v_type) override;
  std::vector<PoolInfo> list_pools() const override;
  std::optional<PoolInfo> get_pool(const std::string& name) const override;
  bool delete_pool(const std::string& name) override;
  ServiceMetrics metrics() const override;

 private:
  struct Pool {
    std::string name, k_type, v_type;
    std::vector<int32_t> tokens;
    std::unique_ptr<KvCache> kv;    // holds exactly `tokens` between requests; used by the worker only
    std::atomic<int> agents{0};
    std::atomic<int64_t> hits{0};
    size_t kv_bytes = 0;            // allocated bytes after the prefill
  };
  struct Job {
    uint64_t id = 0;                // 0: a pool prefill (pool_job set)
    GenerationRequest req;
    std::shared_ptr<Pool> pool;     // the request's pool (held: delete_pool lets it finish)
    std::function<void()> pool_job;
    std::chrono::steady_clock::time_point submitted;
  };

  void worker_loop();
  void run_request(Job& job);
  // Generates for job on kv, which already holds `n_cached` tokens of the job's context.
  FinishInfo generate_into(Job& job, KvCache& kv, const std::vector<int32_t>& context, int n_cached, int n_base);
  int blocks_of(size_t bytes) const;  // whole KV blocks in `bytes`
  void prefill(KvCache& kv, std::span<const int32_t> tokens, float* logits, const std::string& progress_label,
               const std::function<bool()>& cancelled);
  bool is_cancelled(uint64_t id);
  static PoolInfo info_of(const Pool& p);

  std::shared_ptr<Model> model_;
  Tokenizer tok_;
  SequentialServiceOptions opts_;
  ModelInfo info_;
  ThreadPool threads_;
  std::unique_ptr<KvCache> scratch_;  // the cache of requests without a pool (rolled back to 0 each time)

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::set<uint64_t> cancelled_;      // ids asked to cancel that are queued or running
  uint64_t running_id_ = 0;
  uint64_t next_id_ = 1;
  std::map<std::string, std::shared_ptr<Pool>> pools_;
  bool stop_ = false;
  ServiceMetrics m_;                  // counters, under mu_ (kv_blocks_total: the scratch cache's capacity)
  int pool_blocks_ = 0;               // blocks held by pools, under mu_
  int running_blocks_ = 0;            // private blocks of the running request, under mu_
  std::thread worker_;                // last: starts after everything above exists
};

}  // namespace polykv
