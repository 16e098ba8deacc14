// `polykv bench --verify-k LIST` (cli/bench_verify.h): the verify-step cost curve's JSON, and usage
// errors (exit 2) for a bad list.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace polykv {
namespace {

TEST(VerifyBenchCli, ReportsEveryWidthAgainstTheFirst) {
  const auto r = test::polykv("bench -m " + test::embedded_model() +
                              " -t 2 -d 40 --verify-k 1,3,8 -r 2 --verify-steps 1 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  ASSERT_EQ(j["verify"].size(), 3u);
  EXPECT_EQ(j["depth"], 40);
  EXPECT_EQ(j["verify_reps"], 2);
  const int ks[] = {1, 3, 8};
  for (size_t i = 0; i < 3; ++i) {
    const auto& row = j["verify"][i];
    EXPECT_EQ(row["k"], ks[i]);
    EXPECT_EQ(row["step_ms_reps"].size(), 2u);
    EXPECT_GT(row["step_ms"].get<double>(), 0.0);
    EXPECT_LE(row["step_ms_min"].get<double>(), row["step_ms_max"].get<double>());
  }
  EXPECT_EQ(j["verify"][0]["ratio"].get<double>(), 1.0);
}

TEST(VerifyBenchCli, BadListsAreUsageErrors) {
  for (const char* list : {"0", "1,1", "1,,2", "a", "65"}) {
    const auto r = test::polykv("bench -m " + test::embedded_model() + " --verify-k " + list);
    EXPECT_EQ(r.code, 2) << list << ": " << r.out;
    EXPECT_NE(r.out.find("--verify-k"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace polykv
