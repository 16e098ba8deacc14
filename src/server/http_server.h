// polykv's HTTP server: OpenAI-compatible completions and chat (streamed or not), named pools,
// llama-server's /tokenize and /detokenize, Prometheus /metrics, and a live status page at /.
// Written against InferenceService only (engine/service.h): the engine behind it is swappable.
//
// Routes (all answer JSON; errors as {"error": {"message", "type", "param", "code"}}):
//   GET  /                      status page (HTML)          GET  /health        {"status": "ok"} (no key needed)
//   GET  /v1/models             the served model            GET  /metrics       Prometheus text
//   GET  /v1/status             status page data            POST /tokenize, /detokenize
//   POST /v1/completions        POST /v1/chat/completions   ("stream": true -> server-sent events)
//   POST /v1/pools              GET /v1/pools               GET, DELETE /v1/pools/{name}
//
// Limits: request bodies over max_body_bytes -> 413; a prompt over the context -> 413; more than
// max_in_flight generation requests submitted and unfinished -> 503 (with Retry-After). A client that
// goes away (streaming or not) cancels its request, which frees its KV blocks.
#pragma once
#include <memory>
#include <string>

#include "engine/service.h"
#include "tokenizer/tokenizer.h"

namespace polykv::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port (bind() says which)
  std::string api_key;                   // non-empty: every route but /health and / needs "Authorization: Bearer KEY"
  size_t max_body_bytes = 16u << 20;     // request bodies
  int max_in_flight = 64;                // generation requests submitted and unfinished; beyond: 503
  int http_threads = 0;                  // 0: max_in_flight + 8 (idle connections and pool/metrics calls)
  std::string pool_k_type, pool_v_type;  // defaults for pools that name no types (empty: the engine's)
  bool log_requests = false;             // one line per request on stderr
};

class HttpServer {
 public:
  // chat_template: the model's Jinja chat template source (empty: a ChatML fallback). Throws Error
  // when it does not parse. service and tokenizer must outlive the server.
  HttpServer(InferenceService& service, const Tokenizer& tokenizer, const std::string& chat_template,
             ServerOptions opts);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int bind();   // binds host:port and returns the port; throws Error when it cannot
  void run();   // serves until stop(); call after bind()
  void stop();  // from any thread; in-flight requests are cancelled

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace polykv::server
