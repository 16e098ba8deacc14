// The server's set-up (threads, limits, error answers, logging), the shared handler helpers, and
// the small routes: /, /health, /v1/models, /v1/status, /metrics, /tokenize, /detokenize.
// Generation routes: generation_routes.cpp; pools: pool_routes.cpp.
#include "server/http_server.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>

#include "core/error.h"
#include "server/openai_request.h"
#include "server/server_state.h"
#include "server/status_page.h"
#include "tokenizer/utf8.h"

namespace polykv::server {

namespace {
constexpr int kListenBacklog = 1024;
}  // namespace

ServerState::ServerState(InferenceService& s, const Tokenizer& t, const std::string& chat_template, ServerOptions o)
    : service(s), tok(t), chat(t, chat_template.empty() ? kFallbackChatTemplate : chat_template), opts(std::move(o)) {}

ServerCounters ServerState::counters() const {
  ServerCounters c;
  c.http_requests = http_requests.load();
  c.http_errors = http_errors.load();
  c.rejected_busy = rejected_busy.load();
  c.in_flight = in_flight->load();
  c.max_in_flight = opts.max_in_flight;
  c.uptime_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return c;
}

std::string ServerState::response_id(const char* prefix) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%llx%06llx", prefix, static_cast<unsigned long long>(std::time(nullptr)),
                static_cast<unsigned long long>(next_response_id++));
  return buf;
}

void send_json(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status(), error_body(e));
  // A request refused before its body was read entirely must not leave bytes on the connection.
  if (e.status() == 413 || e.status() == 411) res.set_header("Connection", "close");
  if (e.status() == 401) res.set_header("WWW-Authenticate", "Bearer");
  if (e.status() == 503) res.set_header("Retry-After", "1");
}

namespace {

bool same_secret(const std::string& a, const std::string& b) {  // constant time in the content
  unsigned diff = unsigned(a.size() ^ b.size());
  for (size_t i = 0; i < a.size(); ++i) diff |= unsigned(uint8_t(a[i]) ^ uint8_t(i < b.size() ? b[i] : 0));
  return diff == 0;
}

}  // namespace

void guarded(ServerState& st, const httplib::Request& req, httplib::Response& res,
             const std::function<void()>& handler) {
  try {
    if (!st.opts.api_key.empty() && !same_secret(req.get_header_value("Authorization"), "Bearer " + st.opts.api_key))
      throw ApiError(401, "a valid API key is needed: Authorization: Bearer KEY", "invalid_api_key");
    handler();
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const Error& e) {
    send_error(res, ApiError(400, e.what(), "invalid_value"));
  } catch (const std::bad_alloc&) {
    send_error(res, ApiError(503, "out of memory", "out_of_memory"));
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "internal_error"));
  }
}

std::string read_body(const ServerState& st, httplib::Response& res, const httplib::ContentReader& reader) {
  std::string body;
  bool too_big = false;
  const size_t max = st.opts.max_body_bytes;
  const bool ok = reader([&](const char* data, size_t n) {
    if (body.size() + n > max) {
      too_big = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (too_big || res.status == 413)
    throw ApiError(413, "the request body is over " + std::to_string(max) + " bytes", "request_too_large");
  if (!ok) throw ApiError(400, "the request body could not be read", "invalid_body");
  return body;
}

std::vector<int32_t> checked_ids(const Tokenizer& tok, const std::vector<int64_t>& ids, const char* param) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= tok.n_vocab())
      bad_request(std::string("'") + param + "[" + std::to_string(i) + "]' = " + std::to_string(ids[i]) +
                      " is outside the vocabulary (" + std::to_string(tok.n_vocab()) + " tokens)",
                  param);
    out.push_back(int32_t(ids[i]));
  }
  return out;
}

namespace {

void register_info_routes(httplib::Server& http, ServerState& st) {
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(status_page_html(), "text/html; charset=utf-8");
  });
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) { send_json(res, 200, {{"status", "ok"}}); });
  http.Get("/v1/models", [&st](const httplib::Request& req, httplib::Response& res) {
    guarded(st, req, res, [&] {
      const ModelInfo m = st.service.model_info();
      Json model = {
          {"id", m.id},
          {"object", "model"},
          {"created", int64_t(std::time(nullptr))},
          {"owned_by", "polykv"},
          {"meta",
           {{"n_ctx", m.n_ctx}, {"n_vocab", m.n_vocab}, {"cache_type_k", m.k_type}, {"cache_type_v", m.v_type}}}};
      send_json(res, 200, {{"object", "list"}, {"data", Json::array({model})}});
    });
  });
  http.Get("/v1/status", [&st](const httplib::Request& req, httplib::Response& res) {
    guarded(st, req, res, [&] {
      send_json(res, 200,
                status_json(st.service.model_info(), st.service.metrics(), st.service.list_pools(), st.counters()));
    });
  });
  http.Get("/metrics", [&st](const httplib::Request& req, httplib::Response& res) {
    guarded(st, req, res, [&] {
      res.set_content(
          prometheus_text(st.service.model_info(), st.service.metrics(), st.service.list_pools(), st.counters()),
          "text/plain; version=0.0.4; charset=utf-8");
    });
  });
}

void register_text_routes(httplib::Server& http, ServerState& st) {
  http.Post("/tokenize",
            [&st](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
              guarded(st, req, res, [&] {
                const TokenizeRequest r = parse_tokenize_request(parse_request_json(read_body(st, res, reader)));
                const std::vector<int32_t> ids = st.tok.encode(r.content, r.add_special, r.parse_special);
                Json tokens = Json::array();
                for (int32_t id : ids) {
                  if (!r.with_pieces) {
                    tokens.push_back(id);
                    continue;
                  }
                  // llama-server: the piece as a string when it is valid UTF-8, else its bytes.
                  const std::string& piece = st.tok.token_to_piece(id);
                  Json p = Json::array();
                  if (utf8::is_valid(piece)) {
                    p = piece;
                  } else {
                    for (unsigned char c : piece) p.push_back(int(c));
                  }
                  tokens.push_back({{"id", id}, {"piece", std::move(p)}});
                }
                send_json(res, 200, {{"tokens", std::move(tokens)}});
              });
            });
  http.Post(
      "/detokenize", [&st](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
        guarded(st, req, res, [&] {
          const auto ids =
              checked_ids(st.tok, parse_detokenize_request(parse_request_json(read_body(st, res, reader))), "tokens");
          send_json(res, 200, {{"content", st.tok.decode(ids)}});
        });
      });
}

}  // namespace

struct HttpServer::Impl {
  Impl(InferenceService& s, const Tokenizer& t, const std::string& tmpl, ServerOptions o)
      : state(s, t, tmpl, std::move(o)) {}
  ServerState state;
  httplib::Server http;
  // stop() may come before run() got going (a signal at start-up): run() then returns at once, and a
  // stop() after run() began waits until httplib is listening so that its stop() takes effect.
  int listen_fd = -1;  // the listening socket (recorded by the socket-options hook at bind)
  std::mutex run_mu;
  bool stop_requested = false, run_entered = false;
  std::atomic<bool> run_returned{false};
};

HttpServer::HttpServer(InferenceService& service, const Tokenizer& tokenizer, const std::string& chat_template,
                       ServerOptions opts)
    : impl_(std::make_unique<Impl>(service, tokenizer, chat_template, std::move(opts))) {
  ServerState& st = impl_->state;
  httplib::Server& http = impl_->http;
  const int threads = st.opts.http_threads > 0 ? st.opts.http_threads : st.opts.max_in_flight + 8;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http.set_payload_max_length(st.opts.max_body_bytes);
  // Instead of httplib's defaults: SO_REUSEADDR (a quick restart rebinds through TIME_WAIT) but not
  // SO_REUSEPORT, with which a second server on the same port would bind too and silently share the
  // connections. The socket is recorded so bind() can raise its listen backlog.
  http.set_socket_options([impl = impl_.get()](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    impl->listen_fd = sock;
  });
  // Error statuses httplib answers itself (unknown route, body over the limit, unparsable request)
  // get the JSON error body too; answers that already have one are left alone.
  http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.content_provider_) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = "the request could not be handled (HTTP " + std::to_string(res.status) + ")";
    if (res.status == 400) message = "malformed HTTP request";
    if (res.status == 404) message = "no route " + req.method + " " + req.path;
    if (res.status == 413) message = "the request body is over the size limit";
    send_json(res, res.status, error_body(res.status, message, res.status == 404 ? "not_found" : ""));
    if (res.status == 413) res.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_json(res, 500, error_body(500, "internal error", "internal_error"));
  });
  http.set_logger([&st](const httplib::Request& req, const httplib::Response& res) {
    st.http_requests++;
    if (res.status >= 400) st.http_errors++;
    if (st.opts.log_requests) std::fprintf(stderr, "%s %s -> %d\n", req.method.c_str(), req.path.c_str(), res.status);
  });
  register_info_routes(http, st);
  register_text_routes(http, st);
  register_generation_routes(http, st);
  register_pool_routes(http, st);
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  const ServerOptions& o = impl_->state.opts;
  int port = o.port;
  if (port == 0) {
    port = impl_->http.bind_to_any_port(o.host);
  } else if (!impl_->http.bind_to_port(o.host, port)) {
    port = -1;
  }
  check(port > 0, "cannot listen on ", o.host, ":", o.port, " (address in use or not available)");
  // httplib listens with a backlog of 5: a burst of clients connecting at once (agents arriving
  // together) overflows it and waits for SYN retransmissions, 1 s and more each. Listening again
  // on the same socket sets the backlog (capped by net.core.somaxconn).
  if (impl_->listen_fd >= 0 && ::listen(impl_->listen_fd, kListenBacklog) != 0)
    std::fprintf(stderr, "polykv serve: warning: cannot raise the listen backlog: %s\n", std::strerror(errno));
  return port;
}

void HttpServer::run() {
  {
    std::lock_guard lk(impl_->run_mu);
    if (impl_->stop_requested) return;
    impl_->run_entered = true;
  }
  impl_->http.listen_after_bind();
  impl_->run_returned = true;
}

void HttpServer::stop() {
  {
    std::lock_guard lk(impl_->run_mu);
    impl_->stop_requested = true;
    if (!impl_->run_entered) return;
  }
  while (!impl_->http.is_running() && !impl_->run_returned) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->http.stop();
}

}  // namespace polykv::server
