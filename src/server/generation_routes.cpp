// POST /v1/completions and POST /v1/chat/completions: validate, build the prompt tokens (after a
// pool's when the request names one), check the context and the queue limit, submit, then answer
// from the request's channel: server-sent events (stream) or one JSON object. Both answers are
// written by a chunked content provider that polls the connection, so a client that goes away
// cancels its request (and its KV blocks are freed) whether it streamed or not.
#include <chrono>
#include <ctime>
#include <optional>

#include "core/error.h"
#include "engine/sampler.h"
#include "server/generation_stream.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/server_state.h"
#include "server/sse.h"

namespace polykv::server {

namespace {

constexpr std::chrono::milliseconds kPollInterval{100};

// A validated request ready to submit.
struct Prepared {
  Api api = Api::Chat;
  GenerationParams params;
  std::vector<int32_t> prompt;  // after the pool's tokens
  int pool_tokens = 0;
};

int pool_tokens_or_404(ServerState& st, const std::string& pool) {
  const auto info = st.service.get_pool(pool);
  if (!info) throw ApiError(404, "unknown pool '" + pool + "'", "pool_not_found", "pool");
  return info->n_tokens;
}

Prepared prepare_chat(ServerState& st, const Json& body) {
  ChatRequest r = parse_chat_request(body);
  Prepared p;
  p.api = Api::Chat;
  if (r.pool.empty()) {
    p.prompt = st.chat.tokenize(r.messages, r.tools, r.template_kwargs, true);
  } else {
    PoolSource src;
    {
      std::lock_guard lk(st.pools_mu);
      auto it = st.pool_sources.find(r.pool);
      if (it != st.pool_sources.end()) src = it->second;
    }
    p.pool_tokens = pool_tokens_or_404(st, r.pool);
    if (!src.from_messages)
      bad_request("pool '" + r.pool + "' was made from a prompt, not messages: continue it with /v1/completions, or " +
                      "create the pool from messages",
                  "pool", "pool_not_chat");
    Json all = src.messages;
    for (const Json& m : r.messages) all.push_back(m);
    p.prompt = tokens_after_pool(r.pool, src.tokens, st.chat.tokenize(all, r.tools, r.template_kwargs, true));
  }
  p.params = std::move(r);
  return p;
}

Prepared prepare_completion(ServerState& st, const Json& body) {
  CompletionRequest r = parse_completion_request(body);
  Prepared p;
  p.api = Api::Completion;
  if (!r.pool.empty()) p.pool_tokens = pool_tokens_or_404(st, r.pool);
  if (r.prompt_is_ids) {
    p.prompt = checked_ids(st.tok, r.prompt_ids, "prompt");
  } else {
    // A prompt after a pool continues its text: no BOS. Special tokens written in a completion
    // prompt are parsed, as llama-server does (the client writes the whole prompt).
    p.prompt = st.tok.encode(r.prompt, /*add_special=*/r.pool.empty(), /*parse_special=*/true);
  }
  p.params = std::move(r);
  return p;
}

void check_context(const ServerState& st, const Prepared& p) {
  const int n_ctx = st.service.model_info().n_ctx;
  const int64_t n = int64_t(p.pool_tokens) + int64_t(p.prompt.size());
  if (n == 0) bad_request("the prompt is empty", p.api == Api::Chat ? "messages" : "prompt");
  const std::string what = p.params.pool.empty() ? std::to_string(n) + " tokens"
                                                 : std::to_string(n) + " tokens (pool '" + p.params.pool +
                                                       "': " + std::to_string(p.pool_tokens) +
                                                       ", request: " + std::to_string(p.prompt.size()) + ")";
  if (n >= n_ctx)
    throw ApiError(413, "the prompt is " + what + ", over the context limit of " + std::to_string(n_ctx) + " tokens",
                   "context_length_exceeded", p.api == Api::Chat ? "messages" : "prompt");
  if (p.params.max_tokens >= 0 && n + p.params.max_tokens > n_ctx)
    bad_request("the prompt is " + what + " and max_tokens is " + std::to_string(p.params.max_tokens) +
                    ": together over the context limit of " + std::to_string(n_ctx) + " tokens",
                "max_tokens", "context_length_exceeded");
}

// Drives one submitted request's answer from the HTTP thread (owned by the content provider).
struct Pump {
  Pump(ServerState& s, std::shared_ptr<RequestChannel> c, const Prepared& p, ResponseMeta m)
      : st(s),
        ch(std::move(c)),
        text(s.tok, p.params.stop, p.params.top_logprobs >= 0),
        meta(std::move(m)),
        stream(p.params.stream),
        include_usage(p.params.include_usage),
        logprobs(p.params.top_logprobs >= 0) {}

  ServerState& st;
  std::shared_ptr<RequestChannel> ch;
  uint64_t id = 0;
  TextAssembler text;
  ResponseMeta meta;
  bool stream, include_usage, logprobs;
  bool first = true, finished = false, cancelled = false;
  std::string all_text;  // non-streamed answers
  std::vector<LogprobEntry> all_logprobs;

  void cancel() {
    if (cancelled) return;
    cancelled = true;
    ch->cancel();
    st.service.cancel(id);
  }

  bool write(httplib::DataSink& sink, const std::string& s) {
    if (s.empty() || sink.write(s.data(), s.size())) return true;
    cancel();  // the client went away
    return false;
  }

  // Sends (or keeps, when not streaming) a piece of the answer; finish_reason non-null on the last.
  bool emit(httplib::DataSink& sink, TextAssembler::Delta& d, const char* finish_reason) {
    if (!stream) {
      all_text += d.text;
      for (auto& e : d.logprobs) all_logprobs.push_back(std::move(e));
      return true;
    }
    if (d.text.empty() && d.logprobs.empty() && !finish_reason) return true;
    const bool was_first = std::exchange(first, false);
    return write(sink,
                 sse_event(stream_chunk(meta, d.text, was_first, finish_reason, logprobs ? &d.logprobs : nullptr)));
  }

  // One call of the content provider: wait a little for tokens, send what is ready. Returns false to
  // abort the response (the client is gone).
  bool step(httplib::DataSink& sink) {
    if (!sink.is_writable()) {
      cancel();
      return false;
    }
    std::vector<TokenEvent> tokens;
    std::optional<FinishInfo> done;
    ch->wait(tokens, done, kPollInterval);
    // One chunk per token (as OpenAI and llama-server stream), unless its text is held back.
    for (const TokenEvent& ev : tokens) {
      TextAssembler::Delta d = text.push({ev});
      if (text.stop_matched() && !cancelled) cancel();  // a stop string: generation ends here
      if (!emit(sink, d, nullptr)) return false;
    }
    if (!done) return true;

    TextAssembler::Delta last = text.finish();
    if (done->reason == FinishReason::Error) {
      const Json err = error_body(500, "generation failed: " + done->error, "generation_failed");
      if (stream) {
        if (!emit(sink, last, nullptr) || !write(sink, sse_event(err)) || !write(sink, sse_done())) return false;
      } else if (!write(sink, dump_json(err))) {
        return false;
      }
    } else {
      const char* reason = text.stop_matched() ? "stop" : finish_reason_name(done->reason);
      if (stream) {
        if (!emit(sink, last, reason)) return false;
        if (include_usage && !write(sink, sse_event(usage_chunk(meta, *done)))) return false;
        if (!write(sink, sse_done())) return false;
      } else {
        emit(sink, last, reason);
        if (!write(sink, dump_json(final_response(meta, all_text, reason, *done, logprobs ? &all_logprobs : nullptr))))
          return false;
      }
    }
    finished = true;
    sink.done();
    return true;
  }
};

void handle_generation(ServerState& st, Api api, const httplib::Request& req, httplib::Response& res,
                       const httplib::ContentReader& reader) {
  guarded(st, req, res, [&] {
    const Json body = parse_request_json(read_body(st, res, reader));
    const Prepared p = api == Api::Chat ? prepare_chat(st, body) : prepare_completion(st, body);
    check_context(st, p);

    GenerationRequest g;
    g.pool = p.params.pool;
    g.prompt = p.prompt;
    g.cache_salt = p.params.cache_salt;
    g.sampling = p.params.sampling;
    if (!p.params.seed_given) g.sampling.seed = random_seed();
    g.max_tokens = p.params.max_tokens;
    g.top_logprobs = p.params.top_logprobs;
    g.ignore_eos = p.params.ignore_eos;
    g.spec = p.params.spec;
    g.spec_n_max = p.params.spec_n_max;
    g.spec_policy = p.params.spec_policy;

    // Admission: at most max_in_flight requests submitted and unfinished.
    if (++*st.in_flight > st.opts.max_in_flight) {
      --*st.in_flight;
      st.rejected_busy++;
      throw ApiError(
          503, "the server is busy (" + std::to_string(st.opts.max_in_flight) + " requests in flight); retry later",
          "server_busy");
    }
    auto ch = std::make_shared<RequestChannel>();
    RequestChannel::attach(ch, g);
    // in_flight drops before the answer can complete: a client that reads /v1/status right after its
    // answer sees itself gone.
    g.on_done = [ch, in_flight = st.in_flight](const FinishInfo& fi) {
      --*in_flight;
      ch->on_done(fi);
    };
    uint64_t id = 0;
    try {
      id = st.service.submit(std::move(g));
    } catch (const Error& e) {
      --*st.in_flight;
      if (!p.params.pool.empty() && !st.service.get_pool(p.params.pool))
        throw ApiError(404, "unknown pool '" + p.params.pool + "'", "pool_not_found", "pool");
      throw;
    } catch (...) {
      --*st.in_flight;
      throw;
    }

    ResponseMeta meta;
    meta.api = api;
    meta.id = st.response_id(api == Api::Chat ? "chatcmpl" : "cmpl");
    meta.created = int64_t(std::time(nullptr));
    meta.model = p.params.model.empty() ? st.service.model_info().id : p.params.model;
    auto pump = std::make_shared<Pump>(st, ch, p, std::move(meta));
    pump->id = id;
    res.status = 200;
    if (p.params.stream) {
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Accel-Buffering", "no");
    }
    res.set_chunked_content_provider(
        p.params.stream ? "text/event-stream" : "application/json",
        [pump](size_t, httplib::DataSink& sink) { return pump->step(sink); },
        [pump](bool) {
          if (!pump->finished) pump->cancel();  // aborted: the server stops or the client left
        });
  });
}

}  // namespace

void register_generation_routes(httplib::Server& http, ServerState& st) {
  http.Post("/v1/chat/completions",
            [&st](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
              handle_generation(st, Api::Chat, req, res, reader);
            });
  http.Post("/v1/completions",
            [&st](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
              handle_generation(st, Api::Completion, req, res, reader);
            });
  // llama-server's names for the same endpoints.
  http.Post("/chat/completions",
            [&st](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
              handle_generation(st, Api::Chat, req, res, reader);
            });
  http.Post("/completions",
            [&st](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
              handle_generation(st, Api::Completion, req, res, reader);
            });
}

}  // namespace polykv::server
