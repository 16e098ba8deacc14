// `bench --spec mtp` at a depth: the depth's rows reach the MTP drafter (their target hidden states),
// so its head has no gap and drafts. Before, the depth was filled without hidden states and the head
// drafted nothing at any depth > 0 (every verify step a plain one-token step).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "test_util.h"

namespace polykv {
namespace {

TEST(SpecBenchDepth, MtpDraftsAfterTheDepthFill) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::string head = std::string(POLYKV_SOURCE_DIR) + "/models/polykv-code-26m-mtp-head-q8_0.gguf";
  const std::string text = test::fixtures_dir() + "/models/trained/ppl_dev.txt";
  for (int depth : {0, 300}) {
    SCOPED_TRACE(depth);
    const auto r = test::polykv_streams("bench -m '" + test::embedded_model() + "' --spec mtp --model-mtp '" + head +
                                        "' --spec-n-max 3 --text '" + text + "' -d " + std::to_string(depth) +
                                        " -p 64 -n 32 -r 1 -t 2 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.at("lossless").get<bool>());
    EXPECT_GT(j.at("drafted").get<int>(), 0) << r.out;
    EXPECT_GT(j.at("accepted").get<int>(), 0) << r.out;
  }
}

}  // namespace
}  // namespace polykv
