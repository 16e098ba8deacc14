// `polykv eval ppl` on a hybrid model (qwen35): the recurrent state travels with the KV through eval's
// chunked forward passes. Chunks of 7 rows run the delta rule token by token, chunks of 128 in the
// chunked form; both must give the same perplexity (float rounding only).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "test_util.h"

namespace polykv {
namespace {

double nll_mean(int chunk) {
  const std::string f = test::fixtures_dir();
  const auto r = test::polykv_streams("eval ppl -m " + f + "/models/random/qwen35.gguf --ids " + f +
                                      "/models/trained/ppl_dev_ids.i32 -c 128 --rows 2 -t 1 --json --chunk " +
                                      std::to_string(chunk));
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out)["nll_mean"].get<double>();
}

TEST(HybridEval, PerplexityIndependentOfChunking) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const double a = nll_mean(7), b = nll_mean(128);
  EXPECT_TRUE(std::isfinite(a));
  EXPECT_GT(a, 1.0);  // a random-weight model: far from certain
  EXPECT_NEAR(a, b, 1e-5 * a);
}

}  // namespace
}  // namespace polykv
