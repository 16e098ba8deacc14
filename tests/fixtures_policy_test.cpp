// When absent fixtures skip a test and when they fail it (tests/test_util.h: fixtures_required,
// fixtures_missing), so that CI never skips silently.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "test_util.h"

namespace polykv {
namespace {

// Sets (or, with nullopt, unsets) an environment variable for its lifetime, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

bool required_with(std::optional<std::string> require, std::optional<std::string> ci) {
  ScopedEnv a("POLYKV_REQUIRE_FIXTURES", std::move(require)), b("CI", std::move(ci));
  return test::fixtures_required();
}

TEST(FixturesPolicy, RequiredOnlyWhenAskedOrInCi) {
  EXPECT_FALSE(required_with(std::nullopt, std::nullopt));
  EXPECT_TRUE(required_with("1", std::nullopt));
  EXPECT_FALSE(required_with("0", std::nullopt));
  EXPECT_TRUE(required_with(std::nullopt, "true"));
  EXPECT_FALSE(required_with(std::nullopt, "false"));
  EXPECT_FALSE(required_with("0", "true"));  // an explicit 0 wins over CI
  EXPECT_TRUE(required_with("1", "false"));
}

TEST(FixturesPolicy, MissingNamesTheDirectory) {
  {
    ScopedEnv dir("POLYKV_FIXTURES", "/nonexistent/polykv-fixtures");
    const std::string why = test::fixtures_missing();
    EXPECT_NE(why.find("/nonexistent/polykv-fixtures"), std::string::npos) << why;
  }
  ScopedEnv dir("POLYKV_FIXTURES", test::test_data_dir());  // any existing directory counts as present
  EXPECT_EQ(test::fixtures_missing(), "");
}

}  // namespace
}  // namespace polykv
