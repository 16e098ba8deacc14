// Internal to src/server: what the route files share (the service, the tokenizer, counters, the
// record of how each pool was made) and the small helpers every handler uses.
#pragma once
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/http_server.h"
#include "server/metrics_text.h"
#include "server/request_json.h"

namespace polykv::server {

// How a pool was made: chat requests on it re-render its messages to find where they continue.
struct PoolSource {
  bool from_messages = false;
  Json messages;                // when from_messages
  std::vector<int32_t> tokens;  // what was prefilled
};

struct ServerState {
  ServerState(InferenceService& s, const Tokenizer& t, const std::string& chat_template, ServerOptions o);

  InferenceService& service;
  const Tokenizer& tok;
  ChatEncoder chat;
  ServerOptions opts;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  std::atomic<int64_t> http_requests{0}, http_errors{0}, rejected_busy{0};
  // Shared with the engine's on_done callbacks, which may run after the server is gone.
  std::shared_ptr<std::atomic<int64_t>> in_flight = std::make_shared<std::atomic<int64_t>>(0);
  std::atomic<uint64_t> next_response_id{1};

  std::mutex pools_mu;
  std::map<std::string, PoolSource> pool_sources;

  ServerCounters counters() const;
  std::string response_id(const char* prefix);  // "chatcmpl-<hex>"
};

// Answers status with a JSON body.
void send_json(httplib::Response& res, int status, const Json& body);
void send_error(httplib::Response& res, const ApiError& e);

// Runs a handler: checks the API key (after the body is read, so a refused request never leaves
// body bytes on a kept-alive connection) and turns ApiError, polykv::Error (400) and anything else
// (500) into JSON errors. body is the request body (empty for GET).
void guarded(ServerState& st, const httplib::Request& req, httplib::Response& res,
             const std::function<void()>& handler);

// Reads a request body of at most opts.max_body_bytes through httplib's content reader (bounded also
// for chunked and compressed bodies); ApiError 413 beyond, 400 when it cannot be read.
std::string read_body(const ServerState& st, httplib::Response& res, const httplib::ContentReader& reader);

// Token ids a client sent, checked against the vocabulary (400 naming param).
std::vector<int32_t> checked_ids(const Tokenizer& tok, const std::vector<int64_t>& ids, const char* param);

void register_generation_routes(httplib::Server& http, ServerState& st);
void register_pool_routes(httplib::Server& http, ServerState& st);

}  // namespace polykv::server
