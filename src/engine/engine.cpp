#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <ctime>
#include <exception>
#include <thread>

#include "core/error.h"
#include "engine/engine_seq.h"
#include "engine/spec/draft_model_drafter.h"
#include "engine/spec/mtp_drafter.h"
#include "engine/spec/speculative.h"
#include "engine/step_switch.h"
#include "kv/kv_cache.h"
#include "kv/paged_kv.h"

namespace polykv {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

bool valid_pool_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
  });
}

// The sampled token's log-probability and the top `k` of the distribution at temperature 1.
void fill_logprobs(const float* logits, int n_vocab, int k, TokenEvent& ev) {
  double m = -INFINITY;
  for (int i = 0; i < n_vocab; ++i)
    if (std::isfinite(logits[i])) m = std::max(m, double(logits[i]));
  double z = 0;
  for (int i = 0; i < n_vocab; ++i)
    if (std::isfinite(logits[i])) z += std::exp(double(logits[i]) - m);
  const double lz = m + std::log(z);
  ev.logprob = float(double(logits[ev.id]) - lz);
  if (k <= 0) return;
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
  for (int i = 0; i < n_vocab; ++i) ids[size_t(i)] = i;
  k = std::min(k, n_vocab);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int i = 0; i < k; ++i) ev.top.push_back({ids[size_t(i)], float(double(logits[ids[size_t(i)]]) - lz)});
}

// Threads that sample a step's decode rows (Engine::sample_pool_): POLYKV_ENGINE_SAMPLE_THREADS if set
// (0 or 1: none); else none on a CPU backend (its forward pass owns the cores, and sampling is small
// beside it) and up to 8 on a GPU backend, whose host cores idle while the step thread reads 64 rows
// of 128k logits one after the other (0.5 MB each: memory-bound). POLYKV_ENGINE_STEP=old: none.
int sample_threads(DeviceKind kind) {
  if (engine_step_old()) return 0;
  if (const char* v = std::getenv("POLYKV_ENGINE_SAMPLE_THREADS"); v && *v) return std::max(0, std::atoi(v));
  if (kind == DeviceKind::Cpu) return 0;
  return int(std::clamp(std::thread::hardware_concurrency() / 2, 1u, 8u));
}

// Hybrid models: how many recurrent-state checkpoints the prefix cache keeps (EngineOptions::state_checkpoints).
int checkpoint_capacity(const EngineOptions& o, const KvShape& shape) {
  if (shape.recurrent.n_layer <= 0) return 0;
  if (o.state_checkpoints >= 0) return o.state_checkpoints;
  int n = 2 * std::max(1, o.parallel);
  if (o.kv_memory_bytes > 0) {
    const size_t slot = RecurrentState::slot_bytes_for(shape.recurrent);
    n = int(std::min<size_t>(size_t(n), o.kv_memory_bytes / 8 / slot));
  }
  return n;
}

}  // namespace

Engine::Engine(Model& model, std::function<bool(int32_t)> is_eog, const EngineOptions& opts)
    : model_(model),
      is_eog_(std::move(is_eog)),
      opts_(opts),
      store_([&] {
        const KvShape shape = model.kv_shape();
        const KvType kt = parse_kv_type(opts.k_type), vt = parse_kv_type(opts.v_type);
        int n_blocks;
        if (opts.kv_memory_bytes > 0) {
          // Hybrid models: the budget also holds the recurrent states of the running sequences (one each,
          // fixed size, in the same memory: ~121 MiB for Qwen3.5-9B) and the prefix cache's state
          // checkpoints (checkpoint_capacity); the blocks get the rest.
          const size_t states = size_t(std::max(1, opts.parallel)) * RecurrentState::bytes_for(shape.recurrent);
          check(states < opts.kv_memory_bytes, "the KV memory (", opts.kv_memory_bytes >> 20,
                " MiB) cannot hold the recurrent states of ", opts.parallel, " running sequences (",
                states >> 20, " MiB): raise --kv-memory or lower --parallel");
          const int n_ckpts = checkpoint_capacity(opts, shape);
          const size_t ckpts = StateCheckpointCache::bytes_for(shape.recurrent, n_ckpts);
          check(states + ckpts < opts.kv_memory_bytes, "the KV memory (", opts.kv_memory_bytes >> 20,
                " MiB) cannot hold the recurrent states of ", opts.parallel, " running sequences and ",
                n_ckpts, " state checkpoints (", (states + ckpts) >> 20,
                " MiB): raise --kv-memory or lower --state-checkpoints");
          n_blocks = KvBlockStore::blocks_for_bytes(shape, kt, vt, opts.block_tokens, opts.kv_memory_bytes - states - ckpts);
        } else {
          const int ctx = opts.n_ctx > 0 ? opts.n_ctx : std::max(1, model.config().n_ctx_train);
          const int tokens = opts.kv_tokens > 0 ? opts.kv_tokens : 4 * ctx;
          n_blocks = (tokens + opts.block_tokens - 1) / opts.block_tokens;
        }
        check(n_blocks >= 2, "the KV memory holds ", n_blocks, " blocks of ", opts.block_tokens,
              " tokens; at least 2 are needed (raise --kv-memory or -c)");
        return KvBlockStore(shape, kt, vt, n_blocks, opts.block_tokens, model.backend().kv_memory());
      }()),
      mgr_(store_.n_blocks(), opts.block_tokens),
      step_cost_(opts.spec_cost_per_row > 0 ? StepCostModel::exact(opts.spec_cost_fixed, opts.spec_cost_per_row)
                                            : StepCostModel{}) {
  check(opts.parallel >= 1, "--parallel must be at least 1");
  check(opts.step_tokens >= 0, "the step token budget must be at least 1 (0: the backend's)");
  if (opts_.step_tokens == 0) opts_.step_tokens = model.backend().default_prompt_rows();
  const int pool_tokens = store_.n_blocks() * store_.block_tokens();
  if (opts_.n_ctx <= 0) opts_.n_ctx = model.config().n_ctx_train > 0 ? model.config().n_ctx_train : pool_tokens;
  opts_.n_ctx = std::min(opts_.n_ctx, pool_tokens);
  hash_seed_ = prefix_hash_seed(opts_.model_id, opts_.k_type + "/" + opts_.v_type, "");
  hybrid_ = store_.shape().recurrent.n_layer > 0;
  if (hybrid_)
    checkpoints_ = std::make_unique<StateCheckpointCache>(store_.shape().recurrent, store_.memory(),
                                                          checkpoint_capacity(opts_, store_.shape()));
  mtp_pools_ = !opts_.spec.mtp_path.empty() || model_.config().n_nextn > 0;
  m_.kv_blocks_total = store_.n_blocks();
  m_.kv_block_tokens = store_.block_tokens();
  m_.kv_bytes_per_block = store_.block_bytes();
  if (const int n = sample_threads(model_.backend().kind()); n > 1) sample_pool_ = std::make_unique<ThreadPool>(n);
  backend_argmax_ = device_argmax(model_.backend().kind());
  thread_ = std::thread([this] { step_loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

ModelInfo Engine::model_info() const {
  ModelInfo i;
  i.id = opts_.model_id;
  i.n_ctx = opts_.n_ctx;
  i.n_vocab = model_.config().n_vocab;
  i.k_type = opts_.k_type;
  i.v_type = opts_.v_type;
  return i;
}

uint64_t Engine::submit(GenerationRequest req) {
  auto s = std::make_unique<Seq>();
  s->sampler = std::make_unique<Sampler>(req.sampling);
  check(req.top_logprobs <= 20, "top_logprobs must be at most 20");
  {
    SpecOptions so = opts_.spec;
    if (!req.spec.empty()) so.kind = req.spec;
    check(req.spec_n_max >= 0, "spec_n_max must be in [1, ", kMaxSpecNMax, "], got ", req.spec_n_max);
    if (req.spec_n_max > 0) so.n_max = req.spec_n_max;
    if (!req.spec_policy.empty()) so.policy = req.spec_policy;
    validate_spec(so, opts_.draft_model != nullptr);
    if (so.kind == "mtp")  // every MTP request shares the engine's head: their drafts run batched
      s->drafter = std::make_unique<MtpDrafter>(shared_mtp_head(so.mtp_path), opts_.n_ctx);
    else if (so.kind == "ngram+mtp")  // the same head; its drafts run one sequence at a time (the generic path)
      s->drafter = make_hybrid_drafter(std::make_unique<MtpDrafter>(shared_mtp_head(so.mtp_path), opts_.n_ctx));
    else
      s->drafter = make_drafter(so, model_, opts_.draft_model, opts_.n_ctx);
    s->spec_n_max = so.resolved_n_max();
    s->spec_adaptive = so.adaptive();
  }
  std::lock_guard<std::mutex> lk(mu_);
  check(!stopping_, "the engine is shutting down");
  if (!req.pool.empty()) {
    auto it = pools_.find(req.pool);
    check(it != pools_.end() && it->second.ready, "unknown pool '", req.pool, "'");
    s->tokens = it->second.tokens;
    s->pool = req.pool;
    s->n_pool = int(s->tokens.size());
  }
  check(!req.prompt.empty() || !s->tokens.empty(), "the prompt is empty");
  for (int32_t t : req.prompt)
    check(t >= 0 && t < model_.config().n_vocab, "token id ", t, " is out of range [0, ", model_.config().n_vocab, ")");
  s->tokens.insert(s->tokens.end(), req.prompt.begin(), req.prompt.end());
  s->n_context = int(s->tokens.size());
  check(s->n_context < opts_.n_ctx, "the prompt (", s->n_context, " tokens with the pool's) does not fit the context of ",
        opts_.n_ctx, " tokens");
  check(int(waiting_.size()) < opts_.max_waiting, "the server is full: ", waiting_.size(), " requests are waiting");
  s->id = next_id_++;
  s->req = std::move(req);
  const uint64_t id = s->id;
  waiting_.push_back(std::move(s));
  ++m_.requests_total;
  cv_.notify_all();
  return id;
}

void Engine::cancel(uint64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  cancelled_.push_back(id);
  cv_.notify_all();
}

PoolInfo Engine::create_pool(const std::string& name, const std::vector<int32_t>& tokens, const std::string& k_type,
                             const std::string& v_type) {
  check(valid_pool_name(name), "invalid pool name '", name.substr(0, 80), "': use 1 to 64 of A-Z a-z 0-9 . _ -");
  check(k_type.empty() || k_type == opts_.k_type, "this server's KV pool holds K as ", opts_.k_type,
        "; a pool of K type ", k_type, " is not supported (start the server with -ctk ", k_type, ")");
  check(v_type.empty() || v_type == opts_.v_type, "this server's KV pool holds V as ", opts_.v_type,
        "; a pool of V type ", v_type, " is not supported (start the server with -ctv ", v_type, ")");
  check(!tokens.empty(), "the pool's prompt is empty");
  for (int32_t t : tokens)
    check(t >= 0 && t < model_.config().n_vocab, "token id ", t, " is out of range [0, ", model_.config().n_vocab, ")");
  check(int(tokens.size()) < opts_.n_ctx, "the pool's prompt (", tokens.size(), " tokens) does not fit the context of ",
        opts_.n_ctx, " tokens");
  std::unique_lock<std::mutex> lk(mu_);
  check(!stopping_, "the engine is shutting down");
  check(pools_.find(name) == pools_.end(), "a pool named '", name, "' already exists");
  auto s = std::make_unique<Seq>();
  s->id = next_id_++;
  s->is_pool = true;
  s->pool = name;
  s->tokens = tokens;
  s->n_context = int(tokens.size());
  s->sampler = std::make_unique<Sampler>(SamplingParams{});
  std::string error;
  bool done = false;
  s->req.on_done = [&](const FinishInfo& fi) {  // runs on the step thread, under no lock of ours
    std::lock_guard<std::mutex> g(mu_);
    error = fi.reason == FinishReason::Stop ? "" : (fi.error.empty() ? "cancelled" : fi.error);
    done = true;
    cv_.notify_all();
  };
  pools_[name].tokens = tokens;
  waiting_.push_front(std::move(s));  // pools go first: agents are waiting for them
  cv_.notify_all();
  cv_.wait(lk, [&] { return done; });
  if (!error.empty()) {
    pools_.erase(name);
    fail("pool '", name, "' could not be prefilled: ", error);
  }
  return pool_info_locked(name, pools_.at(name));
}

PoolInfo Engine::pool_info_locked(const std::string& name, const Pool& p) const {
  PoolInfo i;
  i.name = name;
  i.n_tokens = int(p.tokens.size());
  i.kv_bytes = size_t(p.n_blocks) * store_.block_bytes();
  i.k_type = opts_.k_type;
  i.v_type = opts_.v_type;
  i.agents_attached = p.agents;
  i.hits = p.hits;
  return i;
}

std::vector<PoolInfo> Engine::list_pools() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<PoolInfo> out;
  for (const auto& [name, p] : pools_)
    if (p.ready) out.push_back(pool_info_locked(name, p));
  return out;
}

std::optional<PoolInfo> Engine::get_pool(const std::string& name) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = pools_.find(name);
  if (it == pools_.end() || !it->second.ready) return std::nullopt;
  return pool_info_locked(name, it->second);
}

bool Engine::delete_pool(const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = pools_.find(name);
  if (it == pools_.end() || !it->second.ready) return false;
  pools_to_free_.push_back(it->second.sid);  // agents running on it keep their references to its blocks
  pools_.erase(it);
  cv_.notify_all();
  return true;
}

ServiceMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lk(mu_);
  ServiceMetrics m = m_;
  m.requests_running = 0;
  for (const auto& s : running_) m.requests_running += s->is_pool ? 0 : 1;
  m.requests_waiting = int64_t(waiting_.size());
  m.prefix_hit_rate = m.prompt_tokens_total ? double(m.cached_prompt_tokens_total) / double(m.prompt_tokens_total) : 0;
  m.pool_bytes = 0;
  for (const auto& [name, p] : pools_) m.pool_bytes += size_t(p.n_blocks) * store_.block_bytes();
  return m;
}

void Engine::step_loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] {
        return stopping_ || !waiting_.empty() || !running_.empty() || !cancelled_.empty() || !pools_to_free_.empty();
      });
      if (stopping_) break;
    }
    try {
      step();
      refresh_kv_stats();
    } catch (const std::exception& e) {
      // A failure of the step as a whole (out of memory, a kernel error): fail what was running, keep serving.
      std::vector<Seq*> all;
      for (auto& s : running_) all.push_back(s.get());
      for (Seq* s : all) finish(*s, FinishReason::Error, e.what());
    }
  }
  // Shutdown: every request still known gets its on_done.
  std::vector<std::unique_ptr<Seq>> left;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& s : waiting_) left.push_back(std::move(s));
    for (auto& s : running_) left.push_back(std::move(s));
    waiting_.clear();
    running_.clear();
  }
  for (auto& s : left) {
    s->info.reason = FinishReason::Cancelled;
    if (s->req.on_done) s->req.on_done(s->info);
  }
}

void Engine::finish(Seq& s, FinishReason r, const std::string& error) {
  if (s.finished) return;
  s.finished = true;
  s.info.reason = r;
  s.info.error = error;
  s.info.prompt_tokens = s.n_context;
  s.info.cached_tokens = std::max(0, s.n_cached);
  s.info.completion_tokens = s.n_generated;
  s.info.time_to_first_token_s = s.ttft;
  const bool keep_pool = s.is_pool && r == FinishReason::Stop;
  if (s.sid >= 0 && !s.is_pool && s.kv && checkpoints_ && checkpoints_->capacity() > 0) {
    // Hybrid models: the sequence's last block-boundary checkpoint (from its last decode steps, or its prompt)
    // becomes an anchor, so that its next turn finds it however many prompt chunk ends come after.
    const int k = mgr_.n_computed(s.sid) / mgr_.block_tokens();
    if (const RecurrentState* st = s.kv->recurrent_state(); st && k > 0) {
      const BlockHash h = mgr_.chain_hash(s.sid, k - 1);
      if (checkpoints_->contains(h)) checkpoints_->save(h, *st, /*anchor=*/true);
    }
  }
  if (s.sid >= 0 && !keep_pool) mgr_.free(s.sid);
  std::unique_ptr<Seq> owned;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = running_.begin(); it != running_.end(); ++it)
      if (it->get() == &s) {
        owned = std::move(*it);
        running_.erase(it);
        break;
      }
    if (keep_pool) {
      Pool& p = pools_[s.pool];
      p.sid = s.sid;
      p.n_blocks = int(mgr_.block_table(s.sid).size());
      if (const RecurrentState* r = s.kv->recurrent_state()) {  // hybrid: checkpoint the state at the pool's end
        auto copy = std::make_shared<RecurrentState>(r->shape(), r->memory());  // device memory on a GPU
        copy->copy_from(*r);
        p.state = std::move(copy);
      }
      if (!s.pool_hidden.empty()) p.hidden = std::make_shared<const std::vector<float>>(std::move(s.pool_hidden));
      p.ready = true;
    } else if (!s.pool.empty() && !s.is_pool) {
      auto it = pools_.find(s.pool);
      if (it != pools_.end()) --it->second.agents;
    }
    if (r == FinishReason::Error) ++m_.requests_failed;
  }
  if (s.req.on_done) s.req.on_done(s.info);
}

void Engine::preempt(Seq& s) {
  mgr_.free(s.sid);
  s.sid = -1;
  s.kv.reset();
  std::lock_guard<std::mutex> lk(mu_);
  for (auto it = running_.begin(); it != running_.end(); ++it)
    if (it->get() == &s) {
      if (!s.pool.empty() && !s.is_pool) {
        auto p = pools_.find(s.pool);
        if (p != pools_.end()) --p->second.agents;
      }
      waiting_.push_front(std::move(*it));
      running_.erase(it);
      break;
    }
  ++m_.preemptions_total;
}

// Admits waiting sequences while there is room. Called with mu_ held; touches mgr_ (step thread only).
// A request whose prompt shares blocks with a running sequence's prompt still being computed waits for them
// (wait_for_running_prefix) and lets the requests behind it in; the others are admitted in order.
void Engine::admit_locked(std::vector<std::unique_ptr<Seq>>& failed) {
  for (auto it = waiting_.begin(); it != waiting_.end() && int(running_.size()) < opts_.parallel;) {
    if (wait_for_running_prefix(**it)) {
      ++it;
      continue;
    }
    std::unique_ptr<Seq> s = std::move(*it);
    it = waiting_.erase(it);
    try {
      admit_one_locked(*s);
    } catch (const std::exception& e) {
      // Its KV or recurrent state could not be made (device memory exhausted): the request fails alone,
      // and admission stops for this step. finish() (after mu_ is released) frees its blocks.
      s->info.error = e.what();
      failed.push_back(std::move(s));
      return;
    }
    running_.push_back(std::move(s));
  }
}

// Admits s (popped from waiting_): registers its blocks (sharing its pool's or the prefix cache's),
// makes its KV (and recurrent state) and seeds its drafter. Throws Error when the KV or the state cannot be
// made; s.sid is then set, so finish() releases what was registered.
void Engine::admit_one_locked(Seq& seq) {
  Seq* s = &seq;
  s->sid = next_sid_++;
  int n_computed = 0;
  auto pool = s->is_pool || s->pool.empty() ? pools_.end() : pools_.find(s->pool);
  if (pool != pools_.end() && pool->second.ready) {
    // An agent: share every block of its pool (the partial last one is copied on its first write).
    mgr_.fork(s->sid, pool->second.sid);
    n_computed = int(pool->second.tokens.size());
    mgr_.append_tokens(s->sid, std::span(s->tokens).subspan(size_t(n_computed)));
    ++pool->second.agents;
    if (s->n_cached < 0) ++pool->second.hits;
  } else {
    // Its pool (if any) was deleted while it waited: its content is in s->tokens; the prefix cache
    // may still hold the pool's full blocks.
    const BlockHash seed = seed_of(*s);
    if (!hybrid_) {
      n_computed = mgr_.add_sequence(s->sid, s->tokens, seed);
    } else if (checkpoints_->capacity() > 0) {
      // Hybrid models: a hit must end on a block whose end has a state checkpoint (a cached block holds
      // KV but no recurrent state); the state is restored below.
      n_computed = mgr_.add_sequence(s->sid, s->tokens, seed,
                                     [this](BlockHash h) { return checkpoints_->contains(h); });
      // Blocks cached past the hit (another prompt computed them, but no state is kept at their end):
      // this prompt leaves that prefix at `cached`, the first place every later prompt with it can hit.
      if (const int cached = mgr_.cached_prefix_tokens(s->tokens, seed); cached > n_computed)
        s->checkpoint_anchors.push_back(cached);
    } else {
      // No checkpoints: no automatic prefix caching. The sequence's own seed (never matched) keeps it from
      // hitting; named pools share instead.
      n_computed = mgr_.add_sequence(s->sid, s->tokens, seed ^ (0x9e3779b97f4a7c15ull * uint64_t(s->sid + 1)));
    }
  }
  if (s->n_cached < 0) {
    s->n_cached = std::min(n_computed, s->n_context);
    if (!s->is_pool) {
      m_.prompt_tokens_total += s->n_context;
      m_.cached_prompt_tokens_total += s->n_cached;
    }
  }
  s->kv = std::make_unique<PagedKv>(store_, opts_.n_ctx);
  s->kv->set_blocks(mgr_.block_table(s->sid));
  if (RecurrentState* r = s->kv->recurrent_state(); r && n_computed > 0) {
    if (pool != pools_.end() && pool->second.ready) {  // a hybrid agent: its pool's state
      check(pool->second.state != nullptr, "hybrid model: a pool without a state checkpoint");
      r->copy_from(*pool->second.state);
    } else {  // a prefix-cache hit: the checkpoint at the end of its last block
      checkpoints_->restore(mgr_.chain_hash(s->sid, n_computed / mgr_.block_tokens() - 1), *r);
    }
    check(r->n_tokens() == n_computed, "hybrid model: a state checkpoint at position ", r->n_tokens(),
          " for a prefix of ", n_computed, " tokens");
  }
  s->kv->reset(n_computed);
  if (pool != pools_.end() && pool->second.hidden && s->drafter && s->drafter->needs_target_hidden() &&
      pool->second.hidden->size() == size_t(n_computed) * size_t(model_.config().n_embd)) {
    // MTP: the pool's rows. The engine's MtpDrafter gets only the last one: the rows before it come
    // from the pool's shared head KV at its first draft (share_pool_mtp), not from 3 MB of copies.
    const size_t E = size_t(model_.config().n_embd);
    if ((dynamic_cast<MtpDrafter*>(s->drafter.get()) || dynamic_cast<MtpDrafter*>(hybrid_model(s->drafter.get()))) &&
        n_computed >= 2)
      s->drafter->target_hidden(pool->second.hidden->data() + size_t(n_computed - 1) * E, 1, n_computed - 1);
    else
      s->drafter->target_hidden(pool->second.hidden->data(), n_computed, 0);
    s->pool_hidden_src = pool->second.hidden;
  }
}

// Blocks for n more tokens of s, preempting the most recently admitted sequence not yet in this
// step's batch when the pool is short. False if even that cannot make room.
bool Engine::make_room(Seq& s, int n, std::vector<Seq*>& batch) {
  std::vector<KvSequenceManager::BlockCopy> copies;
  while (!mgr_.reserve(s.sid, n, copies)) {
    Seq* victim = nullptr;
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      Seq* c = it->get();
      if (c != &s && !c->is_pool && std::find(batch.begin(), batch.end(), c) == batch.end()) {
        victim = c;
        break;
      }
    }
    if (!victim) return false;
    preempt(*victim);
  }
  for (const auto& c : copies) store_.copy_block(c.src, c.dst);
  // PagedKv::set_blocks rebuilds n_layer x n_blocks row pointers (32 x 513 pairs for an 8B model at
  // 32k): only when the table changed (a new block every block_tokens decode steps, a copy on write),
  // not at every step of every sequence. The pointers are a function of the ids, so equal ids, equal pointers.
  const std::span<const BlockId> table = mgr_.block_table(s.sid);
  if (engine_step_old() || !std::ranges::equal(table, s.kv->block_table())) s.kv->set_blocks(table);
  return true;
}

void Engine::sample_and_emit(Seq& s, const float* logits) {
  emit(s, s.sampler->sample(logits, model_.config().n_vocab, s.tokens), logits, false);
}

bool Engine::emit(Seq& s, int32_t id, const float* logits, bool in_manager) {
  const int n_vocab = model_.config().n_vocab;
  TokenEvent ev;
  ev.id = id;
  if (s.n_generated == 0) s.ttft = seconds_since(s.t_submit);
  if (!s.req.ignore_eos && is_eog_ && is_eog_(ev.id)) return finish(s, FinishReason::Stop), false;
  if (s.req.top_logprobs >= 0) fill_logprobs(logits, n_vocab, s.req.top_logprobs, ev);
  ++s.n_generated;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++m_.generated_tokens_total;
  }
  s.tokens.push_back(ev.id);
  if (!in_manager) mgr_.append_tokens(s.sid, std::span(&s.tokens.back(), 1));
  if (s.req.on_token && !s.req.on_token(ev)) return finish(s, FinishReason::Cancelled), false;
  if (s.req.max_tokens >= 0 && s.n_generated >= s.req.max_tokens) return finish(s, FinishReason::Length), false;
  if (int(s.tokens.size()) >= opts_.n_ctx) return finish(s, FinishReason::ContextFull), false;
  return true;
}

// A decode step of a sequence with a drafter: rows [1 + k][n_vocab] for [last, drafts...] fed at
// positions p0... Keeps the accepted drafts' K/V (the manager's tokens and blocks are truncated to
// p0 + 1 + accepted, which are then marked computed) and emits the accepted drafts and the target's token.
void Engine::verify_and_emit(Seq& s, const float* rows, int p0) {
  const int n_vocab = model_.config().n_vocab;
  const int k = int(s.drafts.size());
  const VerifyResult r = verify_drafts(*s.sampler, rows, n_vocab, s.drafts, s.tokens);
  const int keep = p0 + 1 + r.n_accepted;
  if (r.n_accepted < k) mgr_.truncate(s.sid, keep);  // drops the rejected drafts' ids and blocks
  mgr_.mark_computed(s.sid, keep);
  s.kv->reset(keep);
  s.kv->set_blocks(mgr_.block_table(s.sid));
  s.spec_state.after_step(k, r.n_accepted, s.spec_source);
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++m_.spec_steps_total;
    m_.spec_drafted_tokens_total += k;
    m_.spec_accepted_tokens_total += r.n_accepted;
  }
  const std::vector<int32_t> drafts = std::move(s.drafts);
  s.drafts.clear();
  for (int i = 0; i < r.n_accepted; ++i)
    if (!emit(s, drafts[size_t(i)], rows + size_t(i) * size_t(n_vocab), true)) return;
  if (!emit(s, r.next, rows + size_t(r.n_accepted) * size_t(n_vocab), false)) return;
  s.drafter->accept(s.tokens, r.n_accepted);
}

void Engine::step() {
  const auto t0 = Clock::now();
  const double c0 = thread_cpu_seconds();
  std::vector<uint64_t> cancelled;
  std::vector<KvSequenceManager::SeqId> pools_to_free;
  std::vector<std::unique_ptr<Seq>> dropped;  // cancelled before they ran
  {
    std::lock_guard<std::mutex> lk(mu_);
    cancelled.swap(cancelled_);
    pools_to_free.swap(pools_to_free_);
    for (uint64_t id : cancelled)
      for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
        if ((*it)->id == id) {
          dropped.push_back(std::move(*it));
          waiting_.erase(it);
          break;
        }
  }
  for (auto& s : dropped) {
    s->info.reason = FinishReason::Cancelled;
    if (s->req.on_done) s->req.on_done(s->info);
  }
  for (uint64_t id : cancelled) {
    Seq* s = nullptr;
    for (auto& r : running_)
      if (r->id == id) s = r.get();
    if (s) finish(*s, FinishReason::Cancelled);
  }
  for (auto sid : pools_to_free) mgr_.free(sid);
  std::vector<std::unique_ptr<Seq>> failed;  // admission threw: finished below, outside mu_
  {
    std::lock_guard<std::mutex> lk(mu_);
    admit_locked(failed);
    std::erase_if(pool_drafts_, [&](const auto& p) { return !pools_.contains(p.first); });  // deleted pools
    std::erase_if(pool_mtps_, [&](const auto& p) { return !pools_.contains(p.first); });
  }
  for (auto& s : failed) {
    const std::string why = s->info.error;
    finish(*s, FinishReason::Error, why);
  }
  if (running_.empty()) return;

  // The batch: decodes first (one token each), then prompt chunks, under the token budget.
  std::vector<Seq*> order;
  for (auto& s : running_) order.push_back(s.get());
  std::stable_partition(order.begin(), order.end(),
                        [](Seq* s) { return int(s->tokens.size()) - s->kv->n_tokens() == 1; });
  plan_speculation(order);
  // The adaptive policy's clock is the wall clock, the clock of tokens per second. Process CPU time
  // (used before 2026-12-01d) also counts other threads of the process, e.g. the HTTP threads
  // streaming the previous step's tokens while the step thread drafts a 0.2 ms draft.
  std::map<std::string, DraftTiming> drafting;  // per drafter name, steady drafts only
  double draft_s = draft_before_batch(order, drafting);  // seconds drafting this step
  std::vector<Seq*> batch;
  std::vector<int> n_feed;
  int budget = opts_.step_tokens;
  for (Seq* s : order) {
    if (budget == 0) break;
    if (s->finished || s->sid < 0) continue;  // preempted by an earlier one of this loop
    int n = std::min(budget, int(s->tokens.size()) - s->kv->n_tokens());
    if (n <= 0) continue;
    if (checkpoints_ && checkpoints_->capacity() > 0 && s->n_generated == 0 && !s->is_pool && n > 1) {
      // A hybrid prompt chunk ends on a block boundary, where its state can be checkpointed
      // (checkpoint_after_step), and stops at the anchors it passes: the prompt's last full block (what
      // the same prompt, or one extending it, hits) and checkpoint_anchors.
      const int bt = mgr_.block_tokens(), p0 = s->kv->n_tokens(), size = int(s->tokens.size());
      const int end = p0 + n, last_full = (size - 1) / bt * bt;
      int cut = end;  // the first anchor inside (p0, end), if any
      for (int anchor : s->checkpoint_anchors)
        if (anchor > p0 && anchor < cut) cut = anchor;
      if (last_full > p0 && last_full < cut) cut = last_full;
      if (cut == end && end < size && end % bt != 0 && end - end % bt > p0) cut = end - end % bt;
      n = cut - p0;
    }
    if (n == 1 && s->drafter) {
      const int k = draft_limit(*s, budget);
      // The draft model's and the MTP head's are drafted already (draft_before_batch).
      if (!dynamic_cast<DraftModelDrafter*>(s->drafter.get()) && !dynamic_cast<MtpDrafter*>(s->drafter.get()) &&
          k > 0) {
        const auto td = Clock::now();
        if (s->spec_source == 1) share_pool_hybrid(*s);  // a hybrid agent's model: its pool's shared state
        s->drafter->draft(s->tokens, k, s->drafts, nullptr);
        const double t = seconds_since(td);
        draft_s += t;
        if (s->drafter->last_catch_up() <= Drafter::kSteadyCatchUp && !s->drafts.empty()) {
          DraftTiming& dk = drafting[s->drafter->source_name(s->spec_source)];
          dk.seconds += t;
          ++dk.calls;
          dk.tokens += int(s->drafts.size());
        }
      }
      if (int(s->drafts.size()) > k) s->drafts.resize(size_t(std::max(0, k)));
      if (!s->drafts.empty()) {
        mgr_.append_tokens(s->sid, s->drafts);
        n += int(s->drafts.size());
      }
    }
    bool room = make_room(*s, n, batch);
    if (!room && !s->drafts.empty()) {  // no room for the drafts: decode one token as usual
      mgr_.truncate(s->sid, int(s->tokens.size()));
      s->drafts.clear();
      n = 1;
      room = make_room(*s, n, batch);
    }
    if (!room) {
      if (batch.empty() && running_.size() == 1)
        finish(*s, FinishReason::Error, "the KV memory cannot hold this sequence (raise --kv-memory or -c)");
      continue;
    }
    batch.push_back(s);
    n_feed.push_back(n);
    budget -= n;
  }
  if (batch.empty()) return;

  const int n_vocab = model_.config().n_vocab;
  // The step's logit rows, one after the other in batch order in one host buffer kept from step to step
  // (Backend::allocate_host: page-locked on CUDA, so the model downloads them in one copy; a fresh 0.5 MB
  // vector per sequence and step cost page faults and zero-fill at 128k vocabularies).
  constexpr size_t kNoLogits = ~size_t(0);
  std::vector<size_t> logits_at(batch.size(), kNoLogits);  // offset in floats, or kNoLogits
  size_t logits_floats = 0;
  std::vector<float*> logits(batch.size(), nullptr);
  // Plain greedy rows (no drafter, no logprobs, Sampler::plain_argmax) with a backend argmax: their token.
  constexpr int32_t kNoArgmax = -2;
  std::vector<int32_t> argmax(batch.size(), kNoArgmax);
  std::vector<std::vector<int32_t>> spec_feed(batch.size());  // [last, drafts...] of speculating sequences
  std::vector<int> p0s(batch.size());
  std::vector<std::vector<float>> hidden(batch.size());  // [n_feed][n_embd] for drafters that read them (MTP)
  std::vector<Model::BatchSeq> fb;
  for (size_t i = 0; i < batch.size(); ++i) {
    Seq& s = *batch[i];
    const int p0 = p0s[i] = s.kv->n_tokens();
    if (s.drafter) {  // decoding with a drafter (drafts or not): every row's logits
      spec_feed[i].assign(1, s.tokens.back());
      spec_feed[i].insert(spec_feed[i].end(), s.drafts.begin(), s.drafts.end());
    }
    const bool spec = s.drafter && n_feed[i] == 1 + int(s.drafts.size()) && p0 + 1 == int(s.tokens.size());
    const bool last = spec || p0 + n_feed[i] == int(s.tokens.size());
    if (last && !s.is_pool && backend_argmax_ && !s.drafter && s.req.top_logprobs < 0 &&
        s.sampler->plain_argmax(s.tokens)) {
      argmax[i] = -1;  // fb[i].argmax below
    } else if (last && !s.is_pool) {
      logits_at[i] = logits_floats;
      logits_floats += size_t(spec ? n_feed[i] : 1) * size_t(n_vocab);
    }
    const std::span<const int32_t> toks =
        spec ? std::span<const int32_t>(spec_feed[i]) : std::span<const int32_t>(s.tokens).subspan(size_t(p0), size_t(n_feed[i]));
    if ((s.drafter && s.drafter->needs_target_hidden() && !s.is_pool) || (s.is_pool && mtp_pools_))
      hidden[i].resize(toks.size() * size_t(model_.config().n_embd));
    fb.push_back({toks, s.kv.get(), nullptr, spec, hidden[i].empty() ? nullptr : hidden[i].data()});
    if (argmax[i] != kNoArgmax) fb.back().argmax = &argmax[i];
  }
  if (logits_floats > 0) {
    float* base = step_logits_.get(model_.backend(), logits_floats);
    for (size_t i = 0; i < batch.size(); ++i)
      if (logits_at[i] != kNoLogits) fb[i].logits = logits[i] = base + logits_at[i];
  }
  const auto tf = Clock::now();
  const double cf = process_cpu_seconds(), tcf = thread_cpu_seconds();
  model_.forward_batch(fb);
  const double forward_s = seconds_since(tf), forward_cpu_s = process_cpu_seconds() - cf;
  const double forward_thread_cpu_s = thread_cpu_seconds() - tcf;
  int64_t n_rows = 0;
  int n_decoding = 0;
  bool decode_only = true;  // every row decodes or verifies (no prompt chunk): a sample of the step cost
  for (size_t i = 0; i < fb.size(); ++i) {
    n_rows += int64_t(fb[i].tokens.size());
    decode_only = decode_only && !batch[i]->is_pool && p0s[i] + 1 == int(batch[i]->tokens.size());
    ++n_decoding;
  }
  // The cost sample, in wall seconds (the policy's clock, above); per number of decoding sequences.
  if (decode_only) step_cost_.add(n_decoding, int(n_rows), forward_s);
  for (const auto& [name, d] : drafting) draft_cost_[name].add(d.calls, d.tokens, d.seconds);
  // The rows sample_and_emit will sample (a plain last row: no pool, no verify), sampled in parallel
  // when there is a pool and enough of them. Each sequence's Sampler, logits and tokens are its own and
  // nothing below changes them before its emit, so the tokens are those of the serial loop.
  constexpr int32_t kNotSampled = -2;
  std::vector<int32_t> sampled(batch.size(), kNotSampled);
  std::vector<std::exception_ptr> sample_error(batch.size());
  if (sample_pool_) {
    std::vector<size_t> rows;
    for (size_t i = 0; i < batch.size(); ++i)
      if (logits[i] && !batch[i]->is_pool && !(batch[i]->drafter && fb[i].all_logits)) rows.push_back(i);
    if (rows.size() >= 4)
      sample_pool_->parallel_for(int64_t(rows.size()), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const size_t i = rows[size_t(r)];
          Seq& s = *batch[i];
          try {
            sampled[i] = s.sampler->sample(logits[i], n_vocab, s.tokens);
          } catch (...) {
            sample_error[i] = std::current_exception();
            sampled[i] = -1;
          }
        }
      });
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    Seq& s = *batch[i];
    if (!hidden[i].empty() && s.is_pool) {  // rows at p0: the pool's chunks come in order
      s.pool_hidden.resize(size_t(p0s[i]) * size_t(model_.config().n_embd));
      s.pool_hidden.insert(s.pool_hidden.end(), hidden[i].begin(), hidden[i].end());
    } else if (!hidden[i].empty()) {
      s.drafter->target_hidden(hidden[i].data(), int(fb[i].tokens.size()), p0s[i]);
    }
    if (s.drafter && fb[i].all_logits) {
      try {
        verify_and_emit(s, logits[i], p0s[i]);
      } catch (const std::exception& e) {
        finish(s, FinishReason::Error, e.what());
      }
      continue;
    }
    mgr_.mark_computed(s.sid, s.kv->n_tokens());
    checkpoint_after_step(s);
    if (s.is_pool) {
      if (on_pool_progress) on_pool_progress(s.pool, s.kv->n_tokens(), int(s.tokens.size()));
      if (s.kv->n_tokens() == int(s.tokens.size())) finish(s, FinishReason::Stop);
      continue;
    }
    if (argmax[i] != kNoArgmax) {  // what sample() returns for this row (Sampler::plain_argmax)
      try {
        check(argmax[i] >= 0, "sampler: no finite logit among ", n_vocab, " (all NaN or -inf)");
        emit(s, argmax[i], nullptr, false);
      } catch (const std::exception& e) {
        finish(s, FinishReason::Error, e.what());
      }
    } else if (logits[i]) {
      try {
        // Neither a draft model's prompt nor an MTP head's rows are caught up here, one sequence at a
        // time: the first draft catches up, batched with the other sequences' (draft_before_batch), and
        // a sequence the adaptive policy never lets draft never pays it. Nor does an MTP agent copy its
        // pool's shared head rows here: its first draft does (share_pool_mtp in draft_before_batch), so
        // an agent of a batch where drafts cannot pay copies nothing (2026-12-02: 8 x 1535 rows per run).
        if (s.drafter && s.n_generated == 0 && !dynamic_cast<MtpDrafter*>(s.drafter.get()) &&
            !dynamic_cast<DraftModelDrafter*>(s.drafter.get()) && !hybrid_model(s.drafter.get())) {
          const auto td = Clock::now();
          s.drafter->prefill(std::span(s.tokens).first(size_t(s.n_context)));
          draft_s += seconds_since(td);
        }
        if (sampled[i] == kNotSampled) {
          sample_and_emit(s, logits[i]);
        } else {
          if (sample_error[i]) std::rethrow_exception(sample_error[i]);
          emit(s, sampled[i], logits[i], false);
        }
      } catch (const std::exception& e) {
        finish(s, FinishReason::Error, e.what());
      }
    }
  }
  const double post_s = seconds_since(tf) - forward_s;
  if (opts_.check_invariants) {
    mgr_.pool().verify();
    for (const auto& s : running_)
      if (s->sid >= 0)
        check(s->kv->n_tokens() == mgr_.n_computed(s->sid) && mgr_.n_tokens(s->sid) == int(s->tokens.size()),
              "engine: sequence ", s->id, " has ", s->kv->n_tokens(), " KV positions, the manager ",
              mgr_.n_computed(s->sid), " computed of ", mgr_.n_tokens(s->sid), " tokens, the sequence ",
              s->tokens.size(), " tokens");
  }
  const double dt = seconds_since(t0);
  const double host_cpu_s = thread_cpu_seconds() - c0 - forward_thread_cpu_s;
  std::lock_guard<std::mutex> lk(mu_);
  ++m_.steps_total;
  m_.step_seconds_total += dt;
  m_.step_rows_total += n_rows;
  m_.step_seqs_total += int64_t(batch.size());
  m_.forward_seconds_total += forward_s;
  m_.forward_cpu_seconds_total += forward_cpu_s;
  m_.draft_seconds_total += draft_s;
  m_.last_step_seconds = dt;
  if (decode_only) {
    ++m_.decode_steps_total;
    m_.decode_step_seqs_total += int64_t(batch.size());
    m_.decode_step_seconds_total += dt;
    m_.decode_forward_seconds_total += forward_s;
    m_.decode_post_seconds_total += post_s;
    m_.decode_host_cpu_seconds_total += host_cpu_s;
  }
}

void Engine::refresh_kv_stats() {
  const BlockPoolStats st = mgr_.pool().stats();
  std::lock_guard<std::mutex> lk(mu_);
  m_.kv_blocks_used = st.n_in_use;
  m_.kv_blocks_shared = st.n_shared;
  m_.kv_blocks_cached_idle = st.n_cached_idle;
}

}  // namespace polykv
