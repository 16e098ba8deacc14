// When absent fixtures skip a test and when they fail it (tests/test_util.h: fixtures_required,
// fixtures_missing, fixture_model_missing), so that CI never skips silently.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
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

// A part of the fixtures (the GPU machine's carry): a model that is there counts as present, one left out names its
// file.
TEST(FixturesPolicy, ModelMissingNamesTheFile) {
  const std::string root = ::testing::TempDir() + "/polykv-partial-fixtures";
  std::filesystem::create_directories(root + "/models/random");
  std::ofstream(root + "/models/random/gemma3.gguf") << "GGUF";
  ScopedEnv dir("POLYKV_FIXTURES", root);
  EXPECT_EQ(test::fixture_model_missing("gemma3"), "");
  const std::string why = test::fixture_model_missing("qwen2");
  EXPECT_NE(why.find(root + "/models/random/qwen2.gguf"), std::string::npos) << why;
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace polykv
