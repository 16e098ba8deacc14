// TEMPORARY (issue #8): see sequential_service.h.
#include "engine/sequential_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>
#include <numeric>

#include "core/error.h"

namespace polykv {

namespace {

using Clock = std::chrono::steady_clock;

// Fills ev.logprob and ev.top from logits at temperature 1 (NaN and -inf never count).
void fill_logprobs(const float* logits, int n_vocab, int top_n, TokenEvent& ev) {
  float mx = -INFINITY;
  for (int i = 0; i < n_vocab; ++i)
    if (logits[i] > mx) mx = logits[i];
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i)
    if (logits[i] > -INFINITY) sum += std::exp(double(logits[i]) - mx);
  const double log_z = double(mx) + std::log(sum);
  auto lp = [&](int i) { return std::isnan(logits[i]) ? -INFINITY : float(double(logits[i]) - log_z); };
  ev.logprob = lp(ev.id);
  if (top_n <= 0) return;
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
  std::iota(ids.begin(), ids.end(), 0);
  const size_t n = size_t(std::min(top_n, n_vocab));
  std::partial_sort(ids.begin(), ids.begin() + ptrdiff_t(n), ids.end(), [&](int32_t a, int32_t b) {
    const float la = lp(a), lb = lp(b);
    return la != lb ? la > lb : a < b;
  });
  for (size_t i = 0; i < n; ++i) ev.top.push_back({ids[i], lp(ids[i])});
}

void check_sampling(const SamplingParams& s) {
  check(std::isfinite(s.temperature) && s.temperature >= 0, "temperature must be a finite number >= 0");
  check(std::isfinite(s.top_p) && s.top_p >= 0 && s.top_p <= 1, "top_p must be in [0, 1]");
  check(std::isfinite(s.min_p) && s.min_p >= 0 && s.min_p <= 1, "min_p must be in [0, 1]");
  check(std::isfinite(s.repeat_penalty) && s.repeat_penalty > 0, "repeat_penalty must be a finite number > 0");
}

}  // namespace

SequentialService::SequentialService(std::shared_ptr<Model> model, SequentialServiceOptions opts)
    : model_(std::move(model)), tok_(Tokenizer::from_gguf(model_->gguf())), opts_(std::move(opts)),
      threads_(opts_.threads) {
  const int n_ctx = opts_.n_ctx > 0 ? opts_.n_ctx : model_->config().n_ctx_train;
  check(n_ctx > 1, "the context size must be at least 2 tokens");
  opts_.n_ctx = n_ctx;
  scratch_ = std::make_unique<KvCache>(make_kv_cache(model_->kv_shape(), opts_.k_type, opts_.v_type, n_ctx, 256, n_ctx));
  info_.id = opts_.model_id;
  info_.n_ctx = n_ctx;
  info_.n_vocab = model_->config().n_vocab;
  info_.k_type = opts_.k_type;
  info_.v_type = opts_.v_type;
  m_.kv_block_tokens = 256;
  m_.kv_bytes_per_block = scratch_->bytes_per_token() * 256;
  m_.kv_blocks_total = (n_ctx + 255) / 256;
  worker_ = std::thread([this] { worker_loop(); });
}

SequentialService::~SequentialService() {
  std::deque<Job> left;
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    if (running_id_) cancelled_.insert(running_id_);
    left.swap(queue_);
  }
  cv_.notify_all();
  worker_.join();
  for (Job& j : left) {
    if (j.pool_job) continue;  // its create_pool caller gets a broken promise
    FinishInfo fi;
    fi.reason = FinishReason::Cancelled;
    if (j.req.on_done) j.req.on_done(fi);
  }
}

uint64_t SequentialService::submit(GenerationRequest req) {
  check_sampling(req.sampling);
  check(req.top_logprobs <= 20, "top_logprobs must be at most 20");
  for (int32_t id : req.prompt) check(tok_.valid(id), "token id ", id, " is outside the vocabulary");
  Job job;
  job.submitted = Clock::now();
  std::lock_guard lk(mu_);
  if (!req.pool.empty()) {
    auto it = pools_.find(req.pool);
    check(it != pools_.end(), "unknown pool '", req.pool, "'");
    job.pool = it->second;
  }
  const int64_t n_context = int64_t(req.prompt.size()) + (job.pool ? int64_t(job.pool->tokens.size()) : 0);
  check(n_context > 0, "the prompt is empty");
  check(n_context < info_.n_ctx, "the prompt (", n_context, " tokens) does not fit the context of ", info_.n_ctx,
        " tokens");
  check(req.max_tokens < 0 || n_context + req.max_tokens <= info_.n_ctx, "the prompt (", n_context,
        " tokens) plus max_tokens (", req.max_tokens, ") is over the context of ", info_.n_ctx, " tokens");
  job.id = next_id_++;
  job.req = std::move(req);
  if (job.pool) job.pool->agents++;
  queue_.push_back(std::move(job));
  m_.requests_total++;
  cv_.notify_all();
  return queue_.back().id;
}

void SequentialService::cancel(uint64_t id) {
  std::lock_guard lk(mu_);
  const bool queued = std::any_of(queue_.begin(), queue_.end(), [&](const Job& j) { return j.id == id; });
  if (queued || id == running_id_) cancelled_.insert(id);
}

bool SequentialService::is_cancelled(uint64_t id) {
  std::lock_guard lk(mu_);
  return stop_ || cancelled_.count(id) > 0;
}

void SequentialService::worker_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      running_id_ = job.id;
    }
    if (job.pool_job) {
      job.pool_job();
    } else {
      run_request(job);
    }
    std::lock_guard lk(mu_);
    cancelled_.erase(job.id);
    running_id_ = 0;
  }
}

void SequentialService::prefill(KvCache& kv, std::span<const int32_t> tokens, float* logits,
                                const std::string& progress_label, const std::function<bool()>& cancelled) {
  const size_t chunk = size_t(std::max(1, opts_.prefill_chunk));
  const bool report = !progress_label.empty() && tokens.size() >= size_t(opts_.progress_min_tokens);
  const auto t0 = Clock::now();
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    if (cancelled && cancelled()) return;
    model_->forward(tokens.subspan(i, std::min(chunk, tokens.size() - i)), kv, logits, false, threads_);
    const size_t done = std::min(tokens.size(), i + chunk);
    if (report && (done == tokens.size() || (i / chunk) % 4 == 3)) {
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      std::fprintf(stderr, "%s: prefilled %zu / %zu tokens (%.0f%%, %.1f s, %.0f tok/s)\n", progress_label.c_str(),
                   done, tokens.size(), 100.0 * double(done) / double(tokens.size()), s, double(done) / std::max(s, 1e-9));
    }
  }
}

int SequentialService::blocks_of(size_t bytes) const {
  return int(bytes / std::max<size_t>(1, m_.kv_bytes_per_block));
}

FinishInfo SequentialService::generate_into(Job& job, KvCache& kv, const std::vector<int32_t>& context, int n_cached,
                                            int n_base) {
  const GenerationRequest& req = job.req;
  const int n_vocab = info_.n_vocab;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  FinishInfo fi;
  fi.prompt_tokens = int(context.size());
  fi.cached_tokens = n_cached;
  auto cancelled = [&] { return is_cancelled(job.id); };
  prefill(kv, std::span(context).subspan(size_t(n_cached)), logits.data(), "", cancelled);
  std::vector<int32_t> history = context;
  Sampler sampler(req.sampling);
  for (;;) {
    if (cancelled()) {
      fi.reason = FinishReason::Cancelled;
      return fi;
    }
    TokenEvent ev;
    ev.id = sampler.sample(logits.data(), n_vocab, history);
    if (tok_.is_eog(ev.id)) {
      fi.reason = FinishReason::Stop;
      return fi;
    }
    if (req.top_logprobs >= 0) fill_logprobs(logits.data(), n_vocab, req.top_logprobs, ev);
    if (fi.completion_tokens++ == 0)
      fi.time_to_first_token_s = std::chrono::duration<double>(Clock::now() - job.submitted).count();
    history.push_back(ev.id);
    if (req.on_token && !req.on_token(ev)) {
      fi.reason = FinishReason::Cancelled;
      return fi;
    }
    if (req.max_tokens >= 0 && fi.completion_tokens >= req.max_tokens) {
      fi.reason = FinishReason::Length;
      return fi;
    }
    if (kv.n_tokens() >= kv.max_tokens()) {
      fi.reason = FinishReason::ContextFull;
      return fi;
    }
    const auto t0 = Clock::now();
    model_->forward(std::span(&ev.id, 1), kv, logits.data(), false, threads_);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::lock_guard lk(mu_);
    running_blocks_ = (kv.n_tokens() - n_base + m_.kv_block_tokens - 1) / m_.kv_block_tokens;
    m_.steps_total++;
    m_.step_seconds_total += s;
    m_.last_step_seconds = s;
  }
}

void SequentialService::run_request(Job& job) {
  Pool* pool = job.pool.get();
  KvCache& kv = pool ? *pool->kv : *scratch_;
  std::vector<int32_t> context = pool ? pool->tokens : std::vector<int32_t>{};
  context.insert(context.end(), job.req.prompt.begin(), job.req.prompt.end());
  const int n_base = pool ? int(pool->tokens.size()) : 0;  // what kv holds now, and again afterwards
  // An empty prompt after a pool: the last pool token is fed again for the next token's logits.
  const int n_cached = int(context.size()) > n_base ? n_base : n_base - 1;
  FinishInfo fi;
  try {
    kv.truncate(n_cached);
    fi = generate_into(job, kv, context, n_cached, n_base);
  } catch (const std::exception& e) {
    fi.reason = FinishReason::Error;
    fi.error = e.what();
    fi.prompt_tokens = int(context.size());
  }
  try {
    kv.truncate(n_base);  // positions >= n_base are overwritten by the next request
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sequential service: cannot roll back a cache: %s\n", e.what());
  }
  if (pool) {
    pool->agents--;
    pool->hits++;
  }
  {
    std::lock_guard lk(mu_);
    running_blocks_ = 0;
    m_.prompt_tokens_total += fi.prompt_tokens;
    m_.cached_prompt_tokens_total += fi.cached_tokens;
    m_.generated_tokens_total += fi.completion_tokens;
    if (fi.reason == FinishReason::Error) m_.requests_failed++;
  }
  if (job.req.on_done) job.req.on_done(fi);
}

PoolInfo SequentialService::info_of(const Pool& p) {
  PoolInfo i;
  i.name = p.name;
  i.n_tokens = int(p.tokens.size());
  i.kv_bytes = p.kv_bytes;
  i.k_type = p.k_type;
  i.v_type = p.v_type;
  i.agents_attached = p.agents.load();
  i.hits = p.hits.load();
  return i;
}

PoolInfo SequentialService::create_pool(const std::string& name, const std::vector<int32_t>& tokens,
                                        const std::string& k_type, const std::string& v_type) {
  check(!name.empty(), "a pool needs a name");
  check(!tokens.empty(), "pool '", name, "' has no tokens");
  check(int64_t(tokens.size()) < info_.n_ctx, "pool '", name, "' (", tokens.size(),
        " tokens) does not fit the context of ", info_.n_ctx, " tokens");
  for (int32_t id : tokens) check(tok_.valid(id), "token id ", id, " is outside the vocabulary");
  auto pool = std::make_shared<Pool>();
  pool->name = name;
  pool->tokens = tokens;
  pool->k_type = k_type.empty() ? opts_.k_type : k_type;
  pool->v_type = v_type.empty() ? opts_.v_type : v_type;
  // Throws for a bad type name before anything is queued; n_ctx rollback: no block is ever released.
  pool->kv = std::make_unique<KvCache>(
      make_kv_cache(model_->kv_shape(), pool->k_type, pool->v_type, info_.n_ctx, 256, info_.n_ctx));
  // The job owns the promise: a job dropped unrun (service destroyed) breaks it, so get() throws.
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  Job job;
  job.pool_job = [this, pool, done] {
    try {
      std::vector<float> logits(static_cast<size_t>(info_.n_vocab));
      prefill(*pool->kv, pool->tokens, logits.data(), "pool '" + pool->name + "'", nullptr);
      pool->kv_bytes = pool->kv->allocated_bytes();
      done->set_value();
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  };
  {
    std::lock_guard lk(mu_);
    check(!pools_.count(name), "a pool named '", name, "' already exists");
    pools_[name] = nullptr;  // reserved while it prefills
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  try {
    finished.get();
  } catch (...) {
    std::lock_guard lk(mu_);
    pools_.erase(name);
    throw;
  }
  std::lock_guard lk(mu_);
  pools_[name] = pool;
  m_.pool_bytes += pool->kv_bytes;
  pool_blocks_ += blocks_of(pool->kv_bytes);
  return info_of(*pool);
}

std::vector<PoolInfo> SequentialService::list_pools() const {
  std::lock_guard lk(mu_);
  std::vector<PoolInfo> out;
  for (const auto& [name, p] : pools_)
    if (p) out.push_back(info_of(*p));
  return out;
}

std::optional<PoolInfo> SequentialService::get_pool(const std::string& name) const {
  std::lock_guard lk(mu_);
  auto it = pools_.find(name);
  if (it == pools_.end() || !it->second) return std::nullopt;
  return info_of(*it->second);
}

bool SequentialService::delete_pool(const std::string& name) {
  std::lock_guard lk(mu_);
  auto it = pools_.find(name);
  if (it == pools_.end() || !it->second) return false;
  const size_t bytes = it->second->kv_bytes;
  pools_.erase(it);  // requests holding it keep it alive until they finish
  m_.pool_bytes -= bytes;
  pool_blocks_ -= blocks_of(bytes);
  return true;
}

ServiceMetrics SequentialService::metrics() const {
  std::lock_guard lk(mu_);
  ServiceMetrics m = m_;
  m.requests_waiting = int64_t(std::count_if(queue_.begin(), queue_.end(), [](const Job& j) { return j.id != 0; }));
  m.requests_running = running_id_ != 0 ? 1 : 0;
  m.kv_blocks_used = pool_blocks_ + running_blocks_;
  m.kv_blocks_total = m_.kv_blocks_total + pool_blocks_;
  m.prefix_hit_rate = m.prompt_tokens_total > 0 ? double(m.cached_prompt_tokens_total) / double(m.prompt_tokens_total) : 0;
  return m;
}

}  // namespace polykv
