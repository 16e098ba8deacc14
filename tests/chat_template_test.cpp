// Every real chat template in shared/fixtures/chat-templates x every conversation in
// tests/data/chat/conversations must render byte-identically to Python Jinja2 with transformers'
// environment (expected outputs made by tools/render_chat_templates.py), or throw where Python raised.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/chat_template.h"
#include "core/error.h"
#include "test_util.h"

namespace polykv {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + p.string());
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

struct Case {
  std::string template_name, conversation_name;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.template_name << " x " << c.conversation_name; }

std::string case_label(const Case& c) {
  std::string s = c.template_name + "__" + c.conversation_name;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

std::vector<std::string> stems(const fs::path& dir, const std::string& ext) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ext) out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

fs::path templates_dir() { return fs::path(test::fixtures_dir()) / "chat-templates"; }
fs::path chat_data_dir() { return fs::path(test::test_data_dir()) / "chat"; }

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& t : stems(templates_dir(), ".jinja"))
    for (const auto& c : stems(chat_data_dir() / "conversations", ".json")) cases.push_back({t, c});
  // No templates (fixtures absent): one placeholder, so that the suite is instantiated (gtest fails an
  // empty one) and its test reports the skip, or fails when the fixtures are required or incomplete.
  if (cases.empty()) cases.push_back({"fixtures", "missing"});
  return cases;
}

// The fixed date tools/render_chat_templates.py gives strftime_now: 2025-03-14 09:26:53.
std::tm fixed_now() {
  std::tm tm{};
  tm.tm_year = 2025 - 1900;
  tm.tm_mon = 2;
  tm.tm_mday = 14;
  tm.tm_hour = 9;
  tm.tm_min = 26;
  tm.tm_sec = 53;
  const std::time_t t = timegm(&tm);  // normalizes weekday / day of year
  gmtime_r(&t, &tm);
  return tm;
}

// Renders one case; returns true with `out` set, or false with `error` set when it threw.
bool render_case(const Case& c, std::string& out, std::string& error) {
  const std::string source = slurp(templates_dir() / (c.template_name + ".jinja"));
  const auto conv = nlohmann::ordered_json::parse(
      slurp(chat_data_dir() / "conversations" / (c.conversation_name + ".json")));
  ChatTemplateOptions opts;
  opts.add_generation_prompt = conv.value("add_generation_prompt", false);
  opts.bos_token = "<s>";
  opts.eos_token = "</s>";
  opts.now = fixed_now();
  if (conv.contains("extra")) opts.extra = nlohmann::json::parse(conv["extra"].dump());
  const nlohmann::ordered_json tools = conv.contains("tools") ? conv["tools"] : nlohmann::ordered_json();
  try {
    out = render_chat_template(source, conv["messages"], tools, opts);
    return true;
  } catch (const Error& e) {
    error = e.what();
    return false;
  }
}

class ChatTemplateFixture : public ::testing::TestWithParam<Case> {};

TEST_P(ChatTemplateFixture, RendersLikeTransformers) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const Case& c = GetParam();
  const fs::path stem = chat_data_dir() / "expected" / (c.template_name + "__" + c.conversation_name);
  std::string out, error;
  const bool ok = render_case(c, out, error);
  if (fs::exists(stem.string() + ".error.txt")) {
    EXPECT_FALSE(ok) << "Python raised " << slurp(stem.string() + ".error.txt") << "but we rendered:\n" << out;
    return;
  }
  ASSERT_TRUE(ok) << "we threw: " << error;
  EXPECT_EQ(out, slurp(stem.string() + ".txt"));
}

INSTANTIATE_TEST_SUITE_P(ChatTemplate, ChatTemplateFixture, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return case_label(info.param); });

// A summary across all pairs (the individual cases above say which fail).
TEST(ChatTemplateSummary, CountsMatchingRenders) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const auto cases = all_cases();
  ASSERT_GE(cases.size(), 46u * 8u) << "fixtures missing: " << templates_dir();
  size_t pass = 0;
  for (const auto& c : cases) {
    const fs::path stem = chat_data_dir() / "expected" / (c.template_name + "__" + c.conversation_name);
    std::string out, error;
    const bool ok = render_case(c, out, error);
    if (fs::exists(stem.string() + ".error.txt")) pass += !ok;
    else pass += ok && out == slurp(stem.string() + ".txt");
  }
  std::printf("chat templates: %zu / %zu template x conversation pairs match transformers\n", pass, cases.size());
  EXPECT_EQ(pass, cases.size());
}

}  // namespace
}  // namespace polykv
