// Unit tests of the Jinja engine behind chat templates: snippets whose expected output Python
// Jinja2 produced (tests/data/chat/jinja_cases*.json, made by tools/render_chat_templates.py), and
// hand-written checks of errors, malformed input and resource limits.
#include <gtest/gtest.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/chat_template.h"
#include "core/error.h"
#include "test_util.h"

namespace polykv {
namespace {

namespace fs = std::filesystem;

nlohmann::ordered_json load_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error("cannot open " + p.string());
  return nlohmann::ordered_json::parse(in);
}

std::tm fixed_now() {
  std::tm tm{};
  tm.tm_year = 2025 - 1900, tm.tm_mon = 2, tm.tm_mday = 14, tm.tm_hour = 9, tm.tm_min = 26, tm.tm_sec = 53;
  const std::time_t t = timegm(&tm);
  gmtime_r(&t, &tm);
  return tm;
}

std::string render(const std::string& source, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object(),
                   jinja::Limits limits = {}) {
  ChatTemplateOptions opts;
  opts.now = fixed_now();
  opts.limits = limits;
  return ChatTemplate(source).render_variables(vars, opts);
}

struct Snippet {
  std::string name, source;
  nlohmann::ordered_json context, expected;
};

// Runs while gtest registers the tests: a missing or unreadable case file becomes one failing case ("data_error")
// instead of an exception that would abort the whole test binary before any test ran (it did, on a GPU machine
// whose copy of the tree lacked tests/data: no GPU test ran).
std::vector<Snippet> snippets() {
  try {
    const fs::path dir = fs::path(test::test_data_dir()) / "chat";
    const auto cases = load_json(dir / "jinja_cases.json");
    const auto expected = load_json(dir / "jinja_cases.expected.json");
    std::vector<Snippet> out;
    for (const auto& c : cases)
      out.push_back({c["name"], c["template"], c["context"], expected.at(c["name"].get<std::string>())});
    return out;
  } catch (const std::exception& e) {
    return {Snippet{"case_data_unreadable", "", nlohmann::ordered_json::object(), {{"data_error", e.what()}}}};
  }
}

void PrintTo(const Snippet& s, std::ostream* os) { *os << s.name; }

class JinjaSnippet : public ::testing::TestWithParam<Snippet> {};

TEST_P(JinjaSnippet, MatchesPythonJinja2) {
  const Snippet& s = GetParam();
  if (s.expected.contains("data_error")) FAIL() << "the snippet cases: " << s.expected["data_error"].get<std::string>();
  if (s.expected.contains("error")) {
    EXPECT_THROW(render(s.source, s.context), Error) << "Python raised " << s.expected["error"];
    return;
  }
  std::string out;
  ASSERT_NO_THROW(out = render(s.source, s.context)) << s.source;
  EXPECT_EQ(out, s.expected["output"].get<std::string>()) << s.source;
}

INSTANTIATE_TEST_SUITE_P(Jinja, JinjaSnippet, ::testing::ValuesIn(snippets()),
                         [](const ::testing::TestParamInfo<Snippet>& info) { return info.param.name; });

std::string error_of(const std::string& source, jinja::Limits limits = {}) {
  try {
    render(source, nlohmann::ordered_json::object(), limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(JinjaErrors, UnsupportedConstructsNameTheConstructAndLine) {
  EXPECT_NE(error_of("a\n{% include 'x.j2' %}").find("line 2"), std::string::npos);
  EXPECT_NE(error_of("{% include 'x.j2' %}").find("include"), std::string::npos);
  EXPECT_NE(error_of("{% extends 'base' %}").find("extends"), std::string::npos);
  EXPECT_NE(error_of("{% raw %}x{% endraw %}").find("raw"), std::string::npos);
  EXPECT_NE(error_of("{% for x in y recursive %}{% endfor %}").find("recursive"), std::string::npos);
  EXPECT_NE(error_of("{{ f(*args) }}").find("*args"), std::string::npos);
  EXPECT_NE(error_of("{{ '%s' % 1 }}").find("formatting"), std::string::npos);
  EXPECT_NE(error_of("{% frobnicate %}").find("unknown tag 'frobnicate'"), std::string::npos);
}

TEST(JinjaErrors, MalformedTemplatesThrow) {
  const char* bad[] = {"{{", "{{ }}", "{% if %}", "{% if x %}", "{% for %}", "{% endfor %}", "{{ (1 }}", "{{ [1, }}",
                       "{{ 'abc }}", "{# never closed", "{% set %}", "{% macro %}", "{{ a.1.  }}", "{{ 1 +}}",
                       "{% break %}", "{{ a | }}", "{{ a is }}", "{% if x %}{% else %}{% else %}{% endif %}",
                       "{% for x in y %}{% endif %}", "{{ x[1:2:3:4] }}", "{{ {'a' 1} }}", "{{ ) }}", "{{ @ }}",
                       "{{ '\\x4' }}", "{% macro m(a=1, b) %}{% endmacro %}"};
  for (const char* source : bad) EXPECT_THROW(render(source), Error) << source;
  // Python ints are unbounded; ours are int64 and say so instead of wrapping.
  EXPECT_THROW(render("{{ 99999999999999999999 }}"), Error);
  EXPECT_EQ(render("}} %} #}"), "}} %} #}");  // stray closers outside tags are plain text
}

TEST(JinjaErrors, RaiseExceptionMessageIsKept) {
  EXPECT_NE(error_of("{{ raise_exception('roles must alternate') }}").find("roles must alternate"),
            std::string::npos);
}

TEST(JinjaLimits, DeepNestingIsRejectedNotCrashing) {
  EXPECT_THROW(render("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"), Error);
  EXPECT_THROW(render("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}"), Error);
  EXPECT_THROW(render(std::string(20000, '-') + "1" == "" ? "" : "{{ " + std::string(20000, '-') + "1 }}"), Error);
  EXPECT_THROW(render("{{ " + std::string(5000, '!') + " }}"), Error);
  std::string nested_ifs;
  for (int k = 0; k < 2000; ++k) nested_ifs += "{% if true %}";
  for (int k = 0; k < 2000; ++k) nested_ifs += "{% endif %}";
  EXPECT_THROW(render(nested_ifs), Error);
  std::string not_chain = "{{ ";
  for (int k = 0; k < 5000; ++k) not_chain += "not ";
  EXPECT_THROW(render(not_chain + "x }}"), Error);
  // Moderate nesting still works.
  EXPECT_EQ(render("{{ " + std::string(50, '(') + "1" + std::string(50, ')') + " }}"), "1");
}

TEST(JinjaLimits, InfiniteRecursionAndHugeWorkTerminate) {
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("recursion"), std::string::npos);
  EXPECT_NE(error_of("{{ range(1000000)|length }}").find("MAX_RANGE"), std::string::npos);
  jinja::Limits small;
  small.max_loop_iterations = 10000;
  small.max_output_bytes = 1 << 16;
  EXPECT_NE(error_of("{% for a in range(1000) %}{% for b in range(1000) %}{% endfor %}{% endfor %}", small)
                .find("loop iterations"),
            std::string::npos);
  EXPECT_NE(error_of("{% for a in range(10000) %}xxxxxxxxxxxxxxxxxxxxxxxxxxxx{% endfor %}", small).find("output"),
            std::string::npos);
  EXPECT_THROW(render("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                      nlohmann::ordered_json::object(), small),
               Error);
  EXPECT_THROW(render("{{ 'x' * 100000000000 }}"), Error);
  EXPECT_THROW(render("{{ 9223372036854775807 + 1 }}"), Error);
  // Found by the fuzzer: empty sequences times a huge count used to loop 2^40 times.
  EXPECT_EQ(render("{{ '' * 45 * 5555555545 * 444 }}"), "");
  EXPECT_EQ(render("{{ ([] * 4611686018427387904)|length }}"), "0");
  EXPECT_THROW(render("{{ '-' * 2**41 }}"), Error);
}

TEST(JinjaErrors, OutOfRangeIntegersAreErrorsNotAborts) {
  // Found by the fuzzer: `x.<digits>` past int64 threw std::out_of_range through the parser.
  EXPECT_NE(error_of("{{ a.88888888888888888888888888 }}").find("out of range"), std::string::npos);
  // attribute='0.999…' in a filter indexes nothing, as in Python.
  EXPECT_EQ(render("{{ [[1]]|map(attribute='0.99999999999999999999999')|first is undefined }}"), "True");
}

TEST(JinjaLimits, CyclesAndDeepValuesAreBounded) {
  // A macro stored in the scope it captures and a namespace holding itself are reference cycles;
  // the interpreter breaks them after rendering (the fuzzer's leak checker covers this).
  EXPECT_EQ(render("{% macro m() %}x{% endmacro %}{% set ns = namespace(f=m) %}{% set ns.me = ns %}{{ ns.f() }}"), "x");
  // Printing a self-referencing namespace stops with an error (Python would print "{...}").
  EXPECT_THROW(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), Error);
  // Lists nested thousands deep would make destruction/printing recurse too deep: capped.
  EXPECT_NE(error_of("{% set ns = namespace(l=[]) %}{% for i in range(5000) %}{% set ns.l = [ns.l] %}{% endfor %}")
                .find("nested deeper"),
            std::string::npos);
  EXPECT_EQ(render("{% set ns = namespace(l=[]) %}{% for i in range(3) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}"),
            "[[[[]]]]");
}

TEST(JinjaApi, OrderedJsonKeepsKeyOrderLikePython) {
  const auto messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi", "b": 1, "a": 2}])");
  ChatTemplateOptions opts;
  EXPECT_EQ(render_chat_template("{{ messages[0]|tojson }}", messages, nlohmann::ordered_json(), opts),
            R"({"role": "user", "content": "hi", "b": 1, "a": 2})");
  // nlohmann::json sorts keys.
  EXPECT_EQ(render_chat_template("{{ messages[0]|tojson }}", nlohmann::json::parse(messages.dump()), nlohmann::json(), opts),
            R"({"a": 2, "b": 1, "content": "hi", "role": "user"})");
}

TEST(JinjaApi, ContextVariablesAsTransformersPassesThem) {
  ChatTemplateOptions opts;
  opts.add_generation_prompt = true;
  opts.bos_token = "<s>";
  opts.eos_token = "</s>";
  opts.extra = {{"enable_thinking", false}};
  const std::string out = render_chat_template(
      "{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}{{ tools }}{{ documents }}{{ enable_thinking }}"
      "{{ messages|length }}{{ tools is none }}",
      nlohmann::json::array(), nlohmann::json(), opts);
  EXPECT_EQ(out, "<s></s>TrueNoneNoneFalse0True");
}

}  // namespace
}  // namespace polykv
