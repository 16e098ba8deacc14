#include "server/metrics_text.h"

#include <cstdio>
#include <sstream>

namespace polykv::server {

namespace {

// Writes one metric family: # HELP, # TYPE and its sample (name, no labels).
class Exposition {
 public:
  void metric(const char* name, const char* type, const char* help, double value) {
    os_ << "# HELP polykv_" << name << ' ' << help << "\n# TYPE polykv_" << name << ' ' << type << "\npolykv_" << name
        << ' ' << number(value) << '\n';
  }
  // A labelled family: one sample per (label value, value).
  void family(const char* name, const char* type, const char* help, const char* label,
              const std::vector<std::pair<std::string, double>>& samples) {
    os_ << "# HELP polykv_" << name << ' ' << help << "\n# TYPE polykv_" << name << ' ' << type << '\n';
    for (const auto& [lv, v] : samples)
      os_ << "polykv_" << name << '{' << label << "=\"" << escape(lv) << "\"} " << number(v) << '\n';
  }
  std::string str() const { return os_.str(); }

 private:
  static std::string number(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
  }
  static std::string escape(const std::string& s) {  // label values: \ " and newline escaped
    std::string out;
    for (char c : s) {
      if (c == '\\' || c == '"') out += '\\';
      out += c == '\n' ? std::string("\\n") : std::string(1, c);
    }
    return out;
  }
  std::ostringstream os_;
};

}  // namespace

std::string prometheus_text(const ModelInfo& model, const ServiceMetrics& m, const std::vector<PoolInfo>& pools,
                            const ServerCounters& c) {
  Exposition e;
  e.metric("requests_total", "counter", "Generation requests accepted by the engine.", double(m.requests_total));
  e.metric("requests_running", "gauge", "Requests being generated now.", double(m.requests_running));
  e.metric("requests_waiting", "gauge", "Requests queued, not yet running.", double(m.requests_waiting));
  e.metric("requests_failed_total", "counter", "Requests that ended with an engine error.", double(m.requests_failed));
  e.metric("prompt_tokens_total", "counter", "Prompt tokens of finished requests (pool tokens included).",
           double(m.prompt_tokens_total));
  e.metric("cached_prompt_tokens_total", "counter", "Prompt tokens served from cached or shared KV.",
           double(m.cached_prompt_tokens_total));
  e.metric("generated_tokens_total", "counter", "Tokens generated.", double(m.generated_tokens_total));
  e.metric("preemptions_total", "counter", "Sequences preempted to be recomputed later.", double(m.preemptions_total));
  e.metric("spec_steps_total", "counter", "Speculative verify steps of sequences with a drafter.",
           double(m.spec_steps_total));
  e.metric("spec_drafted_tokens_total", "counter", "Tokens proposed by drafters.", double(m.spec_drafted_tokens_total));
  e.metric("spec_accepted_tokens_total", "counter", "Drafted tokens the target accepted.",
           double(m.spec_accepted_tokens_total));
  e.metric("spec_draft_forwards_total", "counter",
           "Draft-model forward passes (one per draft position for all the step's sequences drafting with it).",
           double(m.spec_draft_forwards_total));
  e.metric("spec_draft_shared_tokens_total", "counter",
           "Draft-model KV positions copied from a pool's shared draft KV instead of prefilled per agent.",
           double(m.spec_draft_shared_tokens_total));
  e.metric("spec_mtp_passes_total", "counter",
           "MTP head passes while drafting (one per catch-up round and draft position for all the step's sequences).",
           double(m.spec_mtp_passes_total));
  e.metric("spec_mtp_shared_rows_total", "counter",
           "MTP head KV rows copied from a pool's shared head KV instead of computed per agent.",
           double(m.spec_mtp_shared_rows_total));
  e.metric("kv_blocks_total", "gauge", "KV blocks in the pool.", double(m.kv_blocks_total));
  e.metric("kv_blocks_used", "gauge", "KV blocks in use.", double(m.kv_blocks_used));
  e.metric("kv_blocks_shared", "gauge", "KV blocks used by more than one sequence.", double(m.kv_blocks_shared));
  e.metric("kv_blocks_cached_idle", "gauge", "Unreferenced cached KV blocks (reusable, evictable).",
           double(m.kv_blocks_cached_idle));
  e.metric("kv_block_tokens", "gauge", "Tokens per KV block.", double(m.kv_block_tokens));
  e.metric("kv_block_bytes", "gauge", "Bytes of one KV block (all layers).", double(m.kv_bytes_per_block));
  e.metric("kv_bytes_used", "gauge", "Bytes of KV blocks in use.",
           double(m.kv_blocks_used) * double(m.kv_bytes_per_block));
  e.metric("prefix_hit_rate", "gauge", "Cached prompt tokens / prompt tokens.", m.prefix_hit_rate);
  e.metric("pool_bytes", "gauge", "KV bytes held by named pools.", double(m.pool_bytes));
  e.metric("prefix_waits_total", "counter",
           "Requests that waited for a running sequence to compute their prompt's prefix (prefix-aware admission).",
           double(m.prefix_waits_total));
  e.metric("state_checkpoints", "gauge",
           "Hybrid models: recurrent-state checkpoints held for automatic prefix caching.",
           double(m.state_checkpoints));
  e.metric("state_checkpoint_evictions_total", "counter",
           "Hybrid models: recurrent-state checkpoints evicted (least recently used).",
           double(m.state_checkpoint_evictions_total));
  e.metric("pools", "gauge", "Named pools.", double(pools.size()));
  e.metric("steps_total", "counter", "Engine steps run.", double(m.steps_total));
  e.metric("step_seconds_total", "counter", "Seconds spent in engine steps.", m.step_seconds_total);
  e.metric("step_seconds_last", "gauge", "Duration of the last engine step.", m.last_step_seconds);
  e.metric("step_rows_total", "counter", "Rows (tokens) computed by the target's forward passes.",
           double(m.step_rows_total));
  e.metric("step_seqs_total", "counter", "Sequences in the target's forward passes (summed over steps).",
           double(m.step_seqs_total));
  e.metric("forward_seconds_total", "counter", "Seconds inside the target's forward passes.", m.forward_seconds_total);
  e.metric("forward_cpu_seconds_total", "counter", "Process CPU seconds inside the target's forward passes.",
           m.forward_cpu_seconds_total);
  e.metric("spec_draft_seconds_total", "counter", "Seconds spent drafting (draft-model passes included).",
           m.draft_seconds_total);
  std::vector<std::pair<std::string, double>> tokens, agents;
  for (const PoolInfo& p : pools) {
    tokens.emplace_back(p.name, double(p.n_tokens));
    agents.emplace_back(p.name, double(p.agents_attached));
  }
  e.family("pool_tokens", "gauge", "Tokens of a named pool.", "pool", tokens);
  e.family("pool_agents", "gauge", "Requests running on a named pool.", "pool", agents);
  e.metric("http_requests_total", "counter", "HTTP requests answered.", double(c.http_requests));
  e.metric("http_errors_total", "counter", "HTTP requests answered with a 4xx or 5xx status.", double(c.http_errors));
  e.metric("http_rejected_busy_total", "counter", "Requests refused with 503 because the queue was full.",
           double(c.rejected_busy));
  e.metric("in_flight", "gauge", "Generation requests submitted and not finished.", double(c.in_flight));
  e.metric("context_tokens", "gauge", ("Context limit of one sequence (model " + model.id + ").").c_str(),
           double(model.n_ctx));
  e.metric("uptime_seconds", "gauge", "Seconds since the server started.", c.uptime_s);
  return e.str();
}

Json pool_json(const PoolInfo& p) {
  Json j;
  j["name"] = p.name;
  j["object"] = "pool";
  j["tokens"] = p.n_tokens;
  j["kv_bytes"] = p.kv_bytes;
  j["cache_type_k"] = p.k_type;
  j["cache_type_v"] = p.v_type;
  j["agents"] = p.agents_attached;
  j["hits"] = p.hits;
  return j;
}

Json status_json(const ModelInfo& model, const ServiceMetrics& m, const std::vector<PoolInfo>& pools,
                 const ServerCounters& c) {
  Json j;
  j["model"] = {{"id", model.id},
                {"n_ctx", model.n_ctx},
                {"n_vocab", model.n_vocab},
                {"cache_type_k", model.k_type},
                {"cache_type_v", model.v_type}};
  j["requests"] = {{"total", m.requests_total},       {"running", m.requests_running},
                   {"waiting", m.requests_waiting},   {"failed", m.requests_failed},
                   {"in_flight", c.in_flight},        {"max_in_flight", c.max_in_flight},
                   {"rejected_busy", c.rejected_busy}};
  j["tokens"] = {{"prompt", m.prompt_tokens_total},
                 {"cached_prompt", m.cached_prompt_tokens_total},
                 {"generated", m.generated_tokens_total},
                 {"prefix_hit_rate", m.prefix_hit_rate}};
  j["kv"] = {{"blocks_total", m.kv_blocks_total},
             {"blocks_used", m.kv_blocks_used},
             {"blocks_shared", m.kv_blocks_shared},
             {"blocks_cached_idle", m.kv_blocks_cached_idle},
             {"block_tokens", m.kv_block_tokens},
             {"bytes_per_block", m.kv_bytes_per_block},
             {"bytes_used", size_t(m.kv_blocks_used) * m.kv_bytes_per_block},
             {"pool_bytes", m.pool_bytes},
             {"state_checkpoints", m.state_checkpoints},
             {"state_checkpoint_evictions", m.state_checkpoint_evictions_total}};
  j["steps"] = {{"total", m.steps_total},
                {"seconds_total", m.step_seconds_total},
                {"last_seconds", m.last_step_seconds},
                {"preemptions", m.preemptions_total},
                {"prefix_waits", m.prefix_waits_total}};
  Json pl = Json::array();
  for (const PoolInfo& p : pools) pl.push_back(pool_json(p));
  j["pools"] = std::move(pl);
  j["http"] = {{"requests", c.http_requests}, {"errors", c.http_errors}, {"uptime_s", c.uptime_s}};
  return j;
}

}  // namespace polykv::server
