// The server against a fake InferenceService whose requests run until told otherwise: a client
// that goes away (streaming or not) cancels its request, a stop string cancels generation, a full
// queue answers 503, the API key guards every route but /health and /, and engine failures reach
// the client as JSON errors. Deterministic: nothing here depends on the model's speed.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "core/error.h"
#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "server_test_util.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace polykv {
namespace {

using server::Json;
using test::json_of;

// Requests emit the `script` tokens cyclically, one per `interval`, until max_tokens (never when
// max_tokens < 0) or cancel. max_tokens == 13 ends with FinishReason::Error after one token;
// max_tokens == 17 makes submit() throw.
class FakeService : public InferenceService {
 public:
  explicit FakeService(std::vector<int32_t> script) : script_(std::move(script)) {}
  ~FakeService() override {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }
  ModelInfo model_info() const override {
    ModelInfo m;
    m.id = "fake";
    m.n_ctx = 4096;
    m.n_vocab = 8000;
    return m;
  }
  uint64_t submit(GenerationRequest req) override {
    check(req.max_tokens != 17, "the fake refuses max_tokens 17");
    std::lock_guard lk(mu_);
    const uint64_t id = next_id_++;
    active_++;
    threads_.emplace_back([this, id, req = std::move(req)] { run(id, req); });
    return id;
  }
  void cancel(uint64_t id) override {
    std::lock_guard lk(mu_);
    cancelled_.insert(id);
  }
  PoolInfo create_pool(const std::string&, const std::vector<int32_t>&, const std::string&,
                       const std::string&) override {
    fail("no pools in the fake");
  }
  std::vector<PoolInfo> list_pools() const override { return {}; }
  std::optional<PoolInfo> get_pool(const std::string&) const override { return std::nullopt; }
  bool delete_pool(const std::string&) override { return false; }
  ServiceMetrics metrics() const override {
    ServiceMetrics m;
    m.requests_running = active_;
    return m;
  }

  bool was_cancelled(uint64_t id) {
    std::lock_guard lk(mu_);
    return cancelled_.count(id) > 0;
  }
  int active() const { return active_; }
  uint64_t last_id() {
    std::lock_guard lk(mu_);
    return next_id_ - 1;
  }

 private:
  void run(uint64_t id, const GenerationRequest& req) {
    FinishInfo fi;
    fi.prompt_tokens = int(req.prompt.size());
    for (size_t i = 0;; ++i) {
      if (stop_ || was_cancelled(id)) {
        fi.reason = FinishReason::Cancelled;
        break;
      }
      if (req.max_tokens >= 0 && fi.completion_tokens >= req.max_tokens) {
        fi.reason = FinishReason::Length;
        break;
      }
      TokenEvent ev;
      ev.id = script_[i % script_.size()];
      fi.completion_tokens++;
      if (!req.on_token(ev)) {
        fi.reason = FinishReason::Cancelled;
        break;
      }
      if (req.max_tokens == 13) {
        fi.reason = FinishReason::Error;
        fi.error = "the fake broke";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    active_--;
    req.on_done(fi);
  }

  std::vector<int32_t> script_;
  std::mutex mu_;
  std::set<uint64_t> cancelled_;
  std::vector<std::thread> threads_;
  uint64_t next_id_ = 1;
  std::atomic<int> active_{0};
  std::atomic<bool> stop_{false};
};

class ServerCancel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CpuBackend backend(1);
    auto model = Model::load(test::embedded_model(), backend);
    tok_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(model->gguf()));
  }
  static void TearDownTestSuite() { tok_.reset(); }
  void start(server::ServerOptions so = {}) {
    fake_ = std::make_unique<FakeService>(tok_->encode(" hello world, this is a test.", false, false));
    server_ = std::make_unique<test::TestServer>(*fake_, *tok_, so);
  }
  void TearDown() override {
    server_.reset();
    fake_.reset();
  }
  Json status() { return json_of(server_->client()->Get("/v1/status")); }
  bool drained() {
    return test::eventually([&] { return status()["requests"]["in_flight"] == 0 && fake_->active() == 0; });
  }

  static std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<FakeService> fake_;
  std::unique_ptr<test::TestServer> server_;
};

std::unique_ptr<Tokenizer> ServerCancel::tok_;

TEST_F(ServerCancel, DroppedStreamCancelsItsRequest) {
  start();
  auto c = server_->client();
  int chunks = 0;
  auto r = test::post_streaming(*c, "/v1/chat/completions",
                                R"({"messages": [{"role": "user", "content": "x"}], "stream": true})",
                                [&](const std::string&) { return ++chunks < 3; });
  EXPECT_FALSE(r);
  const uint64_t id = fake_->last_id();
  EXPECT_TRUE(test::eventually([&] { return fake_->was_cancelled(id); }));
  EXPECT_TRUE(drained());
}

TEST_F(ServerCancel, DroppedNonStreamedRequestIsCancelledToo) {
  start();
  auto c = server_->client();
  c->set_read_timeout(0, 300000);  // gives up after 0.3 s of silence and closes the connection
  auto r = c->Post("/v1/completions", R"({"prompt": "x"})", "application/json");
  EXPECT_FALSE(r);
  const uint64_t id = fake_->last_id();
  EXPECT_TRUE(test::eventually([&] { return fake_->was_cancelled(id); }));
  EXPECT_TRUE(drained());
}

TEST_F(ServerCancel, StopStringCancelsGeneration) {
  start();
  auto c = server_->client();
  auto r = c->Post("/v1/completions", R"({"prompt": "x", "stop": "is a"})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json_of(r)["choices"][0]["text"], " hello world, this ");
  EXPECT_EQ(json_of(r)["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(fake_->was_cancelled(fake_->last_id()));
  EXPECT_TRUE(drained());
}

TEST_F(ServerCancel, FullQueueIs503AndRecovers) {
  server::ServerOptions so;
  so.max_in_flight = 1;
  start(so);
  std::atomic<bool> leave{false};
  std::thread first([&] {
    auto c = server_->client();
    test::post_streaming(*c, "/v1/completions", R"({"prompt": "x", "stream": true})",
                         [&](const std::string&) { return !leave.load(); });
  });
  ASSERT_TRUE(test::eventually([&] { return fake_->active() == 1; }));
  auto c = server_->client();
  auto busy = c->Post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 503);
  EXPECT_EQ(json_of(busy)["error"]["code"], "server_busy");
  EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
  EXPECT_EQ(c->Get("/health")->status, 200);
  leave = true;
  first.join();
  ASSERT_TRUE(drained());
  auto ok = c->Post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(status()["requests"]["rejected_busy"], 1);
}

TEST_F(ServerCancel, ApiKeyGuardsEverythingButHealthAndThePage) {
  server::ServerOptions so;
  so.api_key = "s3cret";
  start(so);
  auto anon = server_->client();
  EXPECT_EQ(anon->Get("/health")->status, 200);
  EXPECT_EQ(anon->Get("/")->status, 200);
  for (const char* path : {"/v1/models", "/v1/status", "/metrics", "/v1/pools"}) {
    auto r = anon->Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
    EXPECT_EQ(json_of(r)["error"]["type"], "authentication_error");
  }
  auto wrong = server_->client("s3cre");
  EXPECT_EQ(wrong->Get("/v1/models")->status, 401);
  // A refused POST with a body, then the same connection is used again.
  auto r = anon->Post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(anon->Get("/health")->status, 200);
  auto right = server_->client("s3cret");
  EXPECT_EQ(right->Get("/v1/models")->status, 200);
  auto ok = right->Post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(ServerCancel, EngineErrorsReachTheClient) {
  start();
  auto c = server_->client();
  auto r = c->Post("/v1/completions", R"({"prompt": "x", "max_tokens": 13})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(json_of(r)["error"]["code"], "generation_failed");
  auto s = c->Post("/v1/completions", R"({"prompt": "x", "max_tokens": 13, "stream": true})", "application/json");
  ASSERT_TRUE(s);
  const auto events = test::sse_events(s->body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(events[events.size() - 2]["error"]["code"], "generation_failed");
  auto refused = c->Post("/v1/completions", R"({"prompt": "x", "max_tokens": 17})", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_NE(json_of(refused)["error"]["message"].get<std::string>().find("refuses"), std::string::npos);
  EXPECT_TRUE(drained());
}

}  // namespace
}  // namespace polykv

namespace polykv {
namespace {

// A burst of connections at once (agents arriving together) is accepted without waiting for SYN
// retransmissions (1 s each): httplib's listen backlog of 5 is raised at bind().
TEST_F(ServerCancel, BurstOfConnectionsIsAcceptedAtOnce) {
  start();
  constexpr int n = 64;
  std::atomic<int> ready{0}, ok{0};
  std::atomic<bool> go{false};
  std::vector<double> seconds(n);
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i) {
    clients.emplace_back([&, i] {
      auto c = server_->client();
      ready++;
      while (!go) std::this_thread::yield();
      const auto t0 = std::chrono::steady_clock::now();
      auto r = c->Get("/health");
      seconds[size_t(i)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r && r->status == 200) ok++;
    });
  }
  while (ready < n) std::this_thread::yield();
  go = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok, n);
  EXPECT_LT(*std::max_element(seconds.begin(), seconds.end()), 0.9);
}

}  // namespace
}  // namespace polykv

namespace polykv {
namespace {

// A second server on a port in use fails to bind (httplib's default SO_REUSEPORT would let both
// bind and share the connections).
TEST_F(ServerCancel, SecondServerOnTheSamePortIsRefused) {
  start();
  server::ServerOptions so;
  so.host = "127.0.0.1";
  so.port = server_->port();
  server::HttpServer second(*fake_, *tok_, "", so);
  EXPECT_THROW(second.bind(), Error);
}

}  // namespace
}  // namespace polykv
