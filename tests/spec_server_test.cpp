// Speculative decoding through the server: the request fields "spec" and "spec_n_max" (validated as
// 400s), their effect end to end over HTTP on the real engine (same greedy text as without, drafted
// and accepted counters in /metrics), and the serve command's flags.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "server/api_error.h"
#include "server/metrics_text.h"
#include "server/openai_request.h"
#include "server_test_util.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace polykv {
namespace {

int status_of(const std::string& body) {
  try {
    server::parse_completion_request(server::parse_request_json(body));
  } catch (const server::ApiError& e) {
    return e.status();
  }
  return 0;
}

TEST(SpecServer, RequestFieldsAreParsedAndValidated) {
  const auto r = server::parse_completion_request(
      server::parse_request_json(R"({"prompt": "x", "spec": "ngram", "spec_n_max": 3})"));
  EXPECT_EQ(r.spec, "ngram");
  EXPECT_EQ(r.spec_n_max, 3);
  const auto d = server::parse_chat_request(
      server::parse_request_json(R"({"messages": [{"role": "user", "content": "x"}], "spec": "none"})"));
  EXPECT_EQ(d.spec, "none");
  EXPECT_EQ(d.spec_n_max, 0);
  for (const char* hybrid : {"ngram+mtp", "ngram+draft"})
    EXPECT_EQ(server::parse_completion_request(
                  server::parse_request_json(std::string(R"({"prompt": "x", "spec": ")") + hybrid + "\"}"))
                  .spec,
              hybrid);
  for (const char* bad : {R"({"prompt": "x", "spec": "bogus"})", R"({"prompt": "x", "spec": 3})",
                          R"({"prompt": "x", "spec": ""})", R"({"prompt": "x", "spec": "ngram+"})",
                          R"({"prompt": "x", "spec": "ngram+ngram"})", R"({"prompt": "x", "spec": "mtp+ngram"})",
                          R"({"prompt": "x", "spec_n_max": 0})", R"({"prompt": "x", "spec_n_max": 17})",
                          R"({"prompt": "x", "spec_n_max": 2.5})", R"({"prompt": "x", "spec_n_max": "4"})"})
    EXPECT_EQ(status_of(bad), 400) << bad;
}

TEST(SpecServer, MetricsExposeDraftedAndAcceptedTokens) {
  ServiceMetrics m;
  m.spec_drafted_tokens_total = 123;
  m.spec_accepted_tokens_total = 45;
  const std::string text = server::prometheus_text(ModelInfo{}, m, {}, server::ServerCounters{});
  EXPECT_NE(text.find("spec_drafted_tokens_total 123"), std::string::npos) << text;
  EXPECT_NE(text.find("spec_accepted_tokens_total 45"), std::string::npos) << text;
}

TEST(SpecServer, CompletionsWithSpeculationGiveThePlainGreedyText) {
  CpuBackend backend(2);
  auto model = Model::load(test::embedded_model(), backend);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  EngineOptions o;
  o.parallel = 4;
  o.kv_tokens = 8192;
  o.model_id = "embedded";
  o.check_invariants = true;
  Engine engine(*model, [&](int32_t id) { return tok.is_eog(id); }, o);
  test::TestServer srv(engine, tok);
  auto c = srv.client();
  const std::string prompt = R"("for i in range(10):\n    print(i)\nfor j in range(10):\n    print(")";
  auto ask = [&](const std::string& extra) {
    const auto r = c->Post("/v1/completions",
                           R"({"prompt": )" + prompt + R"(, "max_tokens": 24, "temperature": 0)" + extra + "}",
                           "application/json");
    EXPECT_TRUE(r);
    return r ? std::make_pair(r->status, r->body) : std::make_pair(0, std::string());
  };
  const auto base = ask("");
  ASSERT_EQ(base.first, 200) << base.second;
  const auto spec = ask(R"(, "spec": "ngram", "spec_n_max": 4)");
  ASSERT_EQ(spec.first, 200) << spec.second;
  EXPECT_EQ(test::Json::parse(spec.second)["choices"][0]["text"], test::Json::parse(base.second)["choices"][0]["text"]);
  EXPECT_EQ(ask(R"(, "spec": "draft")").first, 400);  // no draft model loaded
  EXPECT_EQ(ask(R"(, "spec_n_max": 99)").first, 400);
  const auto metrics = c->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("spec_accepted_tokens_total"), std::string::npos);
  EXPECT_GT(engine.metrics().spec_drafted_tokens_total, 0);
}

TEST(SpecServer, ServeFlagsAreValidated) {
  const std::string m = "serve -m " + test::embedded_model() + " --port 0 ";
  for (const std::string bad : {"--spec bogus", "--spec ngram --spec-n-max 0", "--spec draft"})
    EXPECT_EQ(test::polykv(m + bad).code, 2) << bad;
}

}  // namespace
}  // namespace polykv
