// `polykv run --spec mtp` on a model with a (random) MTP block gives the same greedy output as `run`
// without speculation, for --spec-n-max 1..4 (greedy identity holds whatever the drafts are). Needs
// the speculative loop's CLI options; skipped with the reason where this build has none.
#include <gtest/gtest.h>

#include <string>

#include "mtp_test_model.h"
#include "test_util.h"

namespace polykv {
namespace {

TEST(MtpSpecCli, GreedyIdentity) {
  const std::string model = test::mtp_test_model();
  const char* prompts[] = {"def fibonacci(n):\n    ", "import os\nimport sys\n\n", "class Config:\n    \"\"\""};
  for (const char* p : prompts) {
    const std::string base = "run -m '" + model + "' -n 40 --temp 0 -t 2 -c 256 -p '" + p + "'";
    const auto plain = test::polykv_streams(base);
    ASSERT_EQ(plain.code, 0) << plain.err;
    for (int k = 1; k <= 4; ++k) {
      const auto spec = test::polykv_streams(base + " --spec mtp --spec-n-max " + std::to_string(k));
      if (spec.code == 2 && spec.err.find("spec") != std::string::npos) GTEST_SKIP() << "no --spec in this build: " << spec.err;
      ASSERT_EQ(spec.code, 0) << spec.err;
      EXPECT_EQ(spec.out, plain.out) << "prompt '" << p << "', --spec-n-max " << k;
    }
  }
}

}  // namespace
}  // namespace polykv
