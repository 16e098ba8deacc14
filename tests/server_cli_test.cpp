// `polykv serve` as a process: flags, start-up on a free port, serving, and a clean stop on SIGTERM.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "server/request_json.h"
#include "test_util.h"

namespace polykv {
namespace {

TEST(ServerCli, BadFlagsExitWithTwo) {
  const std::string m = " -m " + test::embedded_model();
  EXPECT_EQ(test::polykv("serve").code, 2);  // no model
  EXPECT_EQ(test::polykv("serve" + m + " --port 70000").code, 2);
  EXPECT_EQ(test::polykv("serve" + m + " --kv-memory 64 -c 512").code, 2);  // one budget, not both
  EXPECT_EQ(test::polykv("serve" + m + " --parallel 0").code, 2);
  EXPECT_EQ(test::polykv("serve" + m + " --ubatch 0").code, 2);       // the engine's step budget: 1..65536
  EXPECT_EQ(test::polykv("serve" + m + " -ub 70000").code, 2);
  EXPECT_EQ(test::polykv("serve" + m + " --no-such-flag").code, 2);
  EXPECT_EQ(test::polykv("serve" + m + " --port 0 -ctk q9_9").code, 2);  // known before loading anything
  EXPECT_EQ(test::polykv("serve" + m + " --port 0 -ctv turbo3w").code, 2);  // the shared pool has no V window
  EXPECT_EQ(test::polykv("serve -m /nonexistent.gguf --port 0").code, 1);
}

TEST(ServerCli, ServesOnAFreePortAndStopsOnSigterm) {
  int err[2];
  ASSERT_EQ(pipe(err), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(err[1], 2);
    close(err[0]);
    const std::string model = test::embedded_model();
    execl(POLYKV_BINARY, POLYKV_BINARY, "serve", "-m", model.c_str(), "--port", "0", "-t", "2", "-c", "1536",
          "--api-key", "k", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(err[1]);
  FILE* in = fdopen(err[0], "r");
  std::string log;
  int port = 0;
  char line[4096];
  while (port == 0 && std::fgets(line, sizeof line, in)) {
    log += line;
    const char* at = std::strstr(line, "listening on http://127.0.0.1:");
    if (at) port = std::atoi(at + std::strlen("listening on http://127.0.0.1:"));
  }
  ASSERT_GT(port, 0) << log;
  httplib::Client c("127.0.0.1", port);
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(c.Get("/v1/models")->status, 401);
  c.set_bearer_token_auth("k");
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(server::Json::parse(models->body)["data"][0]["meta"]["n_ctx"], 1536);  // -c
  auto r = c.Post("/v1/completions", R"({"prompt": "def f():", "max_tokens": 3})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  // A large pool reports its prefill progress on stderr.
  server::Json ids = server::Json::array();
  for (int i = 0; i < 1100; ++i) ids.push_back(300 + i % 50);
  auto pool = c.Post("/v1/pools", server::dump_json({{"name", "big"}, {"prompt", ids}}), "application/json");
  ASSERT_TRUE(pool);
  EXPECT_EQ(pool->status, 200) << pool->body;
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  while (std::fgets(line, sizeof line, in)) log += line;
  std::fclose(in);
  EXPECT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 0) << log;
  EXPECT_NE(log.find("stopping"), std::string::npos) << log;
  EXPECT_NE(log.find("pool 'big': prefilled 1100 / 1100 tokens"), std::string::npos) << log;
}

}  // namespace
}  // namespace polykv
