// Hostile JSON and file arguments given to the binary: deeply nested documents, huge values in error
// messages, directories in place of files. Each must end in a clear error and exit code 1, never a
// crash (a stack overflow shows up here as exit code 139) or a silent success.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"

namespace polykv {
namespace {

using test::embedded_model;
using test::polykv;
using Result = test::CliResult;

// A temporary file holding `text`, removed at the end of the test.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& text)
      : path_(std::filesystem::temp_directory_path() / ("polykv_json_limits_" + std::to_string(::getpid()) + "_" + name)) {
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string nested_arrays(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string qwen_template() { return test::fixtures_dir() + "/chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja"; }

const char* kConversation = R"([{"role": "user", "content": "hi"}])";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(JsonLimitsCli, TemplateRefusesDeeplyNestedMessages) {
  const TempFile deep("deep_messages.json", nested_arrays(50000));
  const Result r = polykv("template --template " + qwen_template() + " --messages " + deep.path());
  EXPECT_EQ(r.code, 1) << r.out.substr(0, 2000);
  EXPECT_TRUE(contains(r.out, "messages JSON nested deeper than 512 levels")) << r.out.substr(0, 2000);

  // The same inside the {"messages": [...]} form, and unclosed (invalid as well as deep).
  const TempFile wrapped("deep_wrapped.json", "{\"messages\": " + nested_arrays(50000) + "}");
  EXPECT_EQ(polykv("template --template " + qwen_template() + " --messages " + wrapped.path()).code, 1);
  const TempFile unclosed("deep_unclosed.json", std::string(50000, '['));
  EXPECT_EQ(polykv("template --template " + qwen_template() + " --messages " + unclosed.path()).code, 1);
}

TEST(JsonLimitsCli, TemplateRefusesDeeplyNestedTools) {
  const TempFile messages("messages.json", kConversation);
  const TempFile deep("deep_tools.json", nested_arrays(50000));
  const Result r =
      polykv("template --template " + qwen_template() + " --messages " + messages.path() + " --tools " + deep.path());
  EXPECT_EQ(r.code, 1) << r.out.substr(0, 2000);
  EXPECT_TRUE(contains(r.out, "tools JSON nested deeper than 512 levels")) << r.out.substr(0, 2000);
}

TEST(JsonLimitsCli, TemplateAcceptsNestingUpToTheLimit) {
  // 510 levels inside a message ([ messages [ message { content ... ) stays within 512.
  const TempFile messages("nested_ok.json",
                          R"([{"role": "user", "content": "hi", "extra": )" + nested_arrays(510) + "}]");
  const Result r = polykv("template --template " + qwen_template() + " --messages " + messages.path());
  EXPECT_EQ(r.code, 0) << r.out.substr(0, 2000);
  EXPECT_TRUE(contains(r.out, "<|im_start|>user\nhi<|im_end|>")) << r.out;
}

TEST(JsonLimitsCli, TemplateErrorMessagesStayShort) {
  // A 1 MB string with a raw control character at its end is invalid JSON; nlohmann's message quotes
  // the whole token read so far. The error must name the file without echoing the megabyte.
  const TempFile bad("huge_token.json", "[\"" + std::string(1 << 20, 'a') + "\x01\"]");
  const Result r = polykv("template --template " + qwen_template() + " --messages " + bad.path());
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.out, "not valid JSON")) << r.out.substr(0, 2000);
  EXPECT_LT(r.out.size(), 1000u) << r.out.substr(0, 2000);
}

TEST(JsonLimitsCli, TemplateRefusesDirectoriesAsFiles) {
  const TempFile messages("messages.json", kConversation);
  const std::string dir = std::filesystem::temp_directory_path();
  Result r = polykv("template --template " + dir + " --messages " + messages.path());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "is a directory")) << r.out;
  EXPECT_TRUE(r.out.find("<|im_start|>") == std::string::npos) << r.out;

  r = polykv("template --template " + qwen_template() + " --messages " + dir);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "is a directory")) << r.out;

  r = polykv("template --template " + qwen_template() + " --messages " + messages.path() + " --tools " + dir);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "is a directory")) << r.out;
}

TEST(JsonLimitsCli, TemplateRefusesUnreadableFiles) {
  const TempFile messages("readable.json", kConversation);
  // A missing file, and a path through a regular file, for each file-taking flag.
  for (const std::string& bad : {std::string("/nonexistent/m.json"), messages.path() + "/x.json"}) {
    for (const std::string& args : {"--template " + bad + " --messages " + messages.path(),
                                    "--template " + qwen_template() + " --messages " + bad,
                                    "--template " + qwen_template() + " --messages " + messages.path() + " --tools " + bad}) {
      const Result r = polykv("template " + args);
      EXPECT_EQ(r.code, 1) << args << ": " << r.out;
      EXPECT_TRUE(contains(r.out, "cannot open '" + bad + "'")) << args << ": " << r.out;
    }
  }
  if (::geteuid() == 0) return;  // root reads files whatever their permissions
  const TempFile unreadable("unreadable.json", kConversation);
  std::filesystem::permissions(unreadable.path(), std::filesystem::perms::none);
  const Result r = polykv("template --template " + qwen_template() + " --messages " + unreadable.path());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "cannot open")) << r.out;
}

TEST(JsonLimitsCli, NeedleRefusesDeeplyNestedPromptIds) {
  const TempFile cases("deep_needle.jsonl", R"({"expected": "x", "prompt_ids": )" + nested_arrays(100000) + "}\n");
  const Result r = polykv("eval needle -m " + embedded_model() + " --cases " + cases.path());
  EXPECT_EQ(r.code, 1) << r.out.substr(0, 2000);
  EXPECT_TRUE(contains(r.out, "line 1")) << r.out.substr(0, 2000);
  EXPECT_TRUE(contains(r.out, "nested deeper than 512 levels")) << r.out.substr(0, 2000);
}

TEST(JsonLimitsCli, NeedleErrorDoesNotEchoHugeValues) {
  // A bad token id that is a 1 MB string, or a large nested array: the message names the problem only.
  const TempFile str_case("huge_id.jsonl",
                          R"({"expected": "x", "prompt_ids": [1, ")" + std::string(1 << 20, 'z') + "\"]}\n");
  Result r = polykv("eval needle -m " + embedded_model() + " --cases " + str_case.path());
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.out, "not a token id")) << r.out.substr(0, 2000);
  EXPECT_LT(r.out.size(), 1000u) << r.out.substr(0, 2000);

  std::string big_array = "[";
  for (int k = 0; k < 100000; ++k) big_array += "12345,";
  big_array += "1]";
  const TempFile arr_case("huge_array_id.jsonl", R"({"expected": "x", "prompt_ids": [1, )" + big_array + "]}\n");
  r = polykv("eval needle -m " + embedded_model() + " --cases " + arr_case.path());
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.out, "not a token id")) << r.out.substr(0, 2000);
  EXPECT_LT(r.out.size(), 1000u) << r.out.substr(0, 2000);
}

TEST(JsonLimitsCli, NeedleRefusesADirectory) {
  const Result r = polykv("eval needle -m " + embedded_model() + " --cases " +
                          std::filesystem::temp_directory_path().string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "is a directory")) << r.out;
}

}  // namespace
}  // namespace polykv
