// Helpers of the server tests: an HttpServer on a free loopback port on its own thread, a client for
// it, and parsing of server-sent events.
#pragma once
#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/http_server.h"
#include "server/request_json.h"

namespace polykv::test {

using server::Json;

class TestServer {
 public:
  TestServer(InferenceService& service, const Tokenizer& tok, server::ServerOptions opts = {},
             const std::string& chat_template = "") {
    opts.host = "127.0.0.1";
    opts.port = 0;
    server_ = std::make_unique<server::HttpServer>(service, tok, chat_template, opts);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
  }
  ~TestServer() {
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  std::unique_ptr<httplib::Client> client(const std::string& api_key = "") const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(60, 0);
    if (!api_key.empty()) c->set_bearer_token_auth(api_key.c_str());
    return c;
  }

 private:
  std::unique_ptr<server::HttpServer> server_;
  int port_ = 0;
  std::thread thread_;
};

inline Json json_of(const httplib::Result& r) { return Json::parse(r->body); }

// The JSON payloads of `data: ...` events, in order; "[DONE]" as the string "[DONE]".
inline std::vector<Json> sse_events(const std::string& body) {
  std::vector<Json> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string ev = body.substr(pos, end - pos);
    if (ev.rfind("data: ", 0) == 0) {
      const std::string data = ev.substr(6);
      out.push_back(data == "[DONE]" ? Json("[DONE]") : Json::parse(data));
    }
    pos = end + 2;
  }
  return out;
}

// POSTs body and streams the answer: on_chunk gets each piece of the body as it arrives; returning
// false drops the connection.
inline httplib::Result post_streaming(httplib::Client& c, const std::string& path, const std::string& body,
                                      const std::function<bool(const std::string&)>& on_chunk) {
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) { return on_chunk(std::string(data, n)); };
  return c.send(req);
}

// Polls cond every 10 ms for up to timeout; returns whether it came true.
inline bool eventually(const std::function<bool()>& cond,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

}  // namespace polykv::test
