// End-to-end tests of the polykv binary: real commands on the embedded model, and bad input (wrong
// flags, missing or corrupt files) giving a usage message or a clear error and a non-zero exit code.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "test_util.h"

namespace polykv {
namespace {

using test::polykv;
using test::embedded_model;
using Result = test::CliResult;

TEST(Cli, UsageErrorsExitWithTwo) {
  EXPECT_EQ(polykv("").code, 2);
  EXPECT_EQ(polykv("frobnicate").code, 2);
  for (const char* verb : {"run", "logits", "bench", "inspect", "tokenize", "template", "quantize", "synth"}) {
    const Result r = polykv(std::string(verb) + " --no-such-flag");
    EXPECT_EQ(r.code, 2) << verb << ": " << r.out;
  }
  EXPECT_EQ(polykv("run -m " + embedded_model()).code, 2);  // neither -p nor --ids
  EXPECT_EQ(polykv("bench -m x -t -3").code, 2);
  EXPECT_EQ(polykv("run -m " + embedded_model() + " -p hi --k-eq 2").code, 2);  // out of [0, 1]
}

TEST(Cli, MissingAndCorruptFilesGiveClearErrors) {
  Result r = polykv("run -m /nonexistent.gguf -p hi");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("/nonexistent.gguf"), std::string::npos) << r.out;

  const std::string bad = std::filesystem::temp_directory_path() / "polykv_corrupt.gguf";
  {
    std::ifstream in(embedded_model(), std::ios::binary);
    std::vector<char> head(5000);
    in.read(head.data(), std::streamsize(head.size()));
    std::ofstream(bad, std::ios::binary).write(head.data(), std::streamsize(head.size()));
  }
  r = polykv("run -m " + bad + " -p hi");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("error"), std::string::npos) << r.out;
  r = polykv("inspect " + bad);
  EXPECT_EQ(r.code, 1);
  std::filesystem::remove(bad);

  r = polykv("logits -m " + embedded_model() + " --ids 1,2,99999999 -o /dev/null");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("out of range"), std::string::npos) << r.out;
  // Malformed ids and unknown KV types are usage errors (2), not runtime ones (tests/cli_exit_codes_test.cpp).
  r = polykv("logits -m " + embedded_model() + " --ids 1,x -o /dev/null");
  EXPECT_EQ(r.code, 2);
  r = polykv("run -m " + embedded_model() + " -p hi -ctv turbo9w");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("turbo9w"), std::string::npos) << r.out;
  r = polykv("run -m " + embedded_model() + " -p hi -ctk q9_9");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("q9_9"), std::string::npos) << r.out;
  r = polykv("run -m " + embedded_model() + " -p 'a much longer prompt than three tokens' -c 3 -n 4");  // prompt longer than the context
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("context"), std::string::npos) << r.out;
}

TEST(Cli, RunGeneratesDeterministically) {
  const std::string args = "run -m " + embedded_model() + " -p 'def add(a, b):' -n 24 --seed 7 -t 2";
  const Result a = polykv(args), b = polykv(args);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_EQ(a.out.substr(0, a.out.find("prompt:")), b.out.substr(0, b.out.find("prompt:")));
  EXPECT_NE(a.out.find("generated: 24 tokens"), std::string::npos) << a.out;
}

TEST(Cli, LogitsMatchInProcessForward) {
  const std::string out = std::filesystem::temp_directory_path() / "polykv_logits.f32";
  const Result r = polykv("logits -m " + embedded_model() + " --ids 1,317,296,452 -o " + out + " -t 1 -ctk f16 -ctv f16");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<float> got = test::read_f32(out);
  std::filesystem::remove(out);
  CpuBackend backend(1);
  auto model = Model::load(embedded_model(), backend);
  ASSERT_EQ(got.size(), size_t(4 * model->config().n_vocab));
  KvCache kv(model->kv_shape(), KvType::F16, KvType::F16, 8);
  std::vector<float> ref(got.size());
  const std::vector<int32_t> ids = {1, 317, 296, 452};
  model->forward(ids, kv, ref.data(), true);
  EXPECT_EQ(got, ref);
}

TEST(Cli, TokenizeDetokenizeRoundTrip) {
  const std::string text = "import numpy as np\n\ndef f(x):\n    return x ** 2  # ünïcode ✓\n";
  const Result ids = polykv("tokenize -m " + embedded_model(), text);
  ASSERT_EQ(ids.code, 0) << ids.out;
  EXPECT_EQ(ids.out.rfind("1 ", 0), 0u) << "BOS first: " << ids.out;
  const Result back = polykv("detokenize -m " + embedded_model(), ids.out);
  ASSERT_EQ(back.code, 0) << back.out;
  EXPECT_EQ(back.out, text);
}

TEST(Cli, TemplateRendersFixtureTemplate) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::string conv = std::string(POLYKV_SOURCE_DIR) + "/tests/data/chat/conversations/multi_turn.json";
  const Result r = polykv("template --template " + test::fixtures_dir() +
                          "/chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja --messages " + conv +
                          " --add-generation-prompt");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("<|im_start|>assistant\n"), std::string::npos);
  EXPECT_EQ(polykv("template --template /nonexistent.jinja --messages " + conv).code, 1);
}

}  // namespace
}  // namespace polykv
