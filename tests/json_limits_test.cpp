// parse_json_limited (core/json_limits.h): the depth limit holds exactly and before anything
// recurses, flat documents of any size pass, and error messages stay short whatever the input. Also
// jinja::value_from_json on documents built in memory, which never went through the parser.
#include "core/json_limits.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "chat/chat_input.h"
#include "chat/jinja_json.h"
#include "core/error.h"

namespace polykv {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string nested_arrays(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string nested_objects(size_t depth) {
  std::string s;
  for (size_t k = 0; k < depth; ++k) s += "{\"a\": ";
  s += "1";
  for (size_t k = 0; k < depth; ++k) s += "}";
  return s;
}

// The message of the Error f throws ("" if it throws none; any other exception fails the test).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A json nested `depth` arrays deep, built without the parser: [[[...]]].
json deep_in_memory(size_t depth) {
  json root = json::array();
  json* inner = &root;
  for (size_t k = 1; k < depth; ++k) {
    inner->push_back(json::array());
    inner = &inner->back();
  }
  return root;
}

TEST(JsonLimits, DepthExactlyAtTheLimitParses) {
  EXPECT_EQ(parse_json_limited(nested_arrays(512), 512, "test").size(), 1u);
  EXPECT_TRUE(parse_json_limited(nested_objects(512), 512, "test").contains("a"));
  EXPECT_EQ(parse_json_limited("[]", 1, "test"), ordered_json::array());
  EXPECT_EQ(parse_json_limited("17", 0, "test"), ordered_json(17));
  // Depth counts containers, not values: the scalar inside [[1]] does not add a level.
  EXPECT_EQ(parse_json_limited<json>("[[1], {\"b\": [2]}]", 3, "test").dump(), "[[1],{\"b\":[2]}]");
}

TEST(JsonLimits, OneLevelPastTheLimitIsRefused) {
  for (const std::string& text : {nested_arrays(513), nested_objects(513)}) {
    const std::string err = error_of([&] { (void)parse_json_limited(text, 512, "messages"); });
    EXPECT_EQ(err, "messages JSON nested deeper than 512 levels");
  }
  EXPECT_EQ(error_of([] { (void)parse_json_limited<json>("[]", 0, "x"); }), "x JSON nested deeper than 0 levels");
  EXPECT_EQ(error_of([] { (void)parse_json_limited<json>("{\"a\": [1]}", 1, "x"); }),
            "x JSON nested deeper than 1 levels");
  // Mixed arrays and objects count alike.
  EXPECT_NE(error_of([] { (void)parse_json_limited<json>("[{\"a\": [{}]}]", 3, "x"); }), "");
  EXPECT_EQ(error_of([] { (void)parse_json_limited<json>("[{\"a\": [{}]}]", 4, "x"); }), "");
}

TEST(JsonLimits, VeryDeepInputFailsWithoutRecursing) {
  // A million levels: far past any stack, closed or not, arrays or objects.
  for (const std::string& text : {nested_arrays(1000000), std::string(1000000, '['), nested_objects(1000000)}) {
    EXPECT_EQ(error_of([&] { (void)parse_json_limited(text, kMaxJsonDepth, "tools"); }),
              "tools JSON nested deeper than 512 levels");
    EXPECT_NE(error_of([&] { (void)parse_json_limited<json>(text, kMaxJsonDepth, "tools"); }), "");
  }
}

TEST(JsonLimits, HugeFlatDocumentsParse) {
  std::string text = "[";
  for (int k = 0; k < 300000; ++k) text += std::to_string(k) + ",";
  text += "-1]";
  const json j = parse_json_limited<json>(text, 1, "flat");
  ASSERT_EQ(j.size(), 300001u);
  EXPECT_EQ(j[299999], 299999);
  EXPECT_EQ(j.back(), -1);
}

TEST(JsonLimits, WideObjectsParseInLinearTime) {
  // ordered_json::parse inserts each member after scanning the object for its key: O(n^2), ~30 s
  // for these 100 000 members. The limited parser indexes the keys of large objects.
  std::string obj = "{";
  for (int k = 0; k < 100000; ++k) obj += "\"key" + std::to_string(k) + "\": " + std::to_string(k) + ",";
  obj += "\"key0\": -1}";  // a duplicate, found through the index
  const auto start = std::chrono::steady_clock::now();
  const ordered_json o = parse_json_limited(obj, 1, "wide");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
  ASSERT_EQ(o.size(), 100000u);
  EXPECT_EQ(o.begin().key(), "key0");
  EXPECT_EQ(o["key0"], -1);
  EXPECT_EQ(o["key99999"], 99999);
}

TEST(JsonLimits, DuplicateKeysAsPythonAndNlohmann) {
  // The last value wins, at the first key's position, in small objects (a scan) and large ones (an index).
  std::string large = "{";
  for (int k = 0; k < 40; ++k) large += "\"k" + std::to_string(k) + "\": " + std::to_string(k) + ", ";
  large += "\"k3\": \"again\", \"k39\": [1], \"new\": null, \"k0\": {}}";
  for (const std::string text : {std::string(R"({"a": 1, "b": 2, "a": [3], "c": {"x": 1, "x": 2}})"), large}) {
    const ordered_json ours = parse_json_limited(text, 8, "dup");
    EXPECT_EQ(ours, ordered_json::parse(text)) << text;
    EXPECT_EQ(ours.dump(), ordered_json::parse(text).dump()) << text;
    EXPECT_EQ(parse_json_limited<json>(text, 8, "dup"), json::parse(text)) << text;
  }
  EXPECT_EQ(parse_json_limited(R"({"a": 1, "b": 2, "a": 3})", 1, "dup").dump(), R"({"a":3,"b":2})");
}

TEST(JsonLimits, SameDocumentsAsNlohmannParse) {
  // Every JSON file of the chat tests, both key orders; ordered_json compares in order.
  namespace fs = std::filesystem;
  int n = 0;
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(POLYKV_TEST_DATA_DIR) / "chat")) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    EXPECT_EQ(parse_json_limited(text, kMaxJsonDepth, "file"), ordered_json::parse(text)) << entry.path();
    EXPECT_EQ(parse_json_limited<json>(text, kMaxJsonDepth, "file"), json::parse(text)) << entry.path();
    ++n;
  }
  EXPECT_GE(n, 10);
  for (const char* text : {"0", "-0.0", "1e300", "18446744073709551615", "-9223372036854775808", "\"\\u00e9\\ud83d\\ude00\"",
                           " [ true , false , null ] ", "{}", "[]", "[[], {}, [{}]]"}) {
    EXPECT_EQ(parse_json_limited(text, 4, "scalar").dump(), ordered_json::parse(text).dump()) << text;
  }
}

TEST(JsonLimits, MalformedInputGivesShortErrors) {
  for (const char* text : {"", "[1,", "{\"a\" 1}", "[1] x", "nul", "{\"a\": 1,}", "[1e999]", "-"}) {
    const std::string err = error_of([&] { (void)parse_json_limited<json>(text, 512, "body"); });
    EXPECT_EQ(err.rfind("body is not valid JSON: ", 0), 0u) << text << " -> " << err;
  }
  // nlohmann echoes the whole bad token (here a 1 MB string): only its tail, with the offending byte, stays.
  const std::string huge = "[\"" + std::string(1 << 20, 'a') + "\x01\"]";
  const std::string err = error_of([&] { (void)parse_json_limited(huge, 512, "messages"); });
  EXPECT_LT(err.size(), 450u) << err.substr(0, 2000);
  EXPECT_NE(err.find("control character U+0001"), std::string::npos) << err;
  EXPECT_NE(err.find("...aaaa"), std::string::npos) << err;
  EXPECT_NE(err.find("<U+0001>'"), std::string::npos) << err;
  EXPECT_EQ(err.rfind("messages is not valid JSON: [json.exception.parse_error.101] parse error at line 1, column ", 0), 0u)
      << err;
  // Invalid UTF-8 in a long string: echoed as \xNN, so the message is ASCII (fit for a JSON reply).
  const std::string bad_utf8 = "[\"" + std::string(5000, 'b') + "\xc3\xa9\xff\"]";
  const std::string utf8_err = error_of([&] { (void)parse_json_limited(bad_utf8, 512, "m"); });
  EXPECT_LT(utf8_err.size(), 450u);
  EXPECT_NE(utf8_err.find("bbb\\xc3\\xa9\\xff'"), std::string::npos) << utf8_err;
  for (const char c : utf8_err) EXPECT_LT(static_cast<unsigned char>(c), 0x80u) << utf8_err;
  EXPECT_LT(error_of([&] { (void)parse_json_limited("[\"" + std::string(5000, 'c'), 512, "m"); }).size(), 450u);
}

TEST(JsonLimits, ExcerptsAreShortAndNeverRecurse) {
  EXPECT_EQ(json_excerpt(json(12)), "12");
  EXPECT_EQ(json_excerpt(json(-1.5)), "-1.5");
  EXPECT_EQ(json_excerpt(json(nullptr)), "null");
  EXPECT_EQ(json_excerpt(json("ab\"c")), "\"ab\\\"c\"");
  EXPECT_EQ(json_excerpt(json::array({1, 2, 3})), "an array of 3 elements");
  EXPECT_EQ(json_excerpt(ordered_json::object({{"a", 1}})), "an object of 1 member");
  const std::string long_excerpt = json_excerpt(json(std::string(1 << 20, 'z')), 64);
  EXPECT_LT(long_excerpt.size(), 80u);
  EXPECT_EQ(long_excerpt.substr(0, 4), "\"zzz");
  // A document far deeper than the parser allows, built in memory: described, not walked.
  const json deep = deep_in_memory(200000);
  EXPECT_EQ(json_excerpt(deep), "an array of 1 element");
}

TEST(JsonLimits, TruncateKeepsWholeCharacters) {
  EXPECT_EQ(truncate_for_message("hello", 5), "hello");
  EXPECT_EQ(truncate_for_message("hello", 3), "hel...");
  EXPECT_EQ(truncate_for_message("\xc3\xa9\xc3\xa9\xc3\xa9", 3), "\xc3\xa9...");  // "ééé" cut inside the 2nd é
  EXPECT_EQ(truncate_for_message("\xe2\x82\xac", 2), "...");                      // "€" cut inside the 1st
}

TEST(JsonLimits, ValueFromJsonChecksDepthBeforeRecursing) {
  // 512 levels convert (the interpreter's own limit); 513 fail, and so does 200000, without a crash.
  EXPECT_EQ(jinja::value_from_json(deep_in_memory(512)).nesting(), 512u);
  EXPECT_NE(error_of([] { (void)jinja::value_from_json(deep_in_memory(513)); }).find("nested deeper than 512"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)jinja::value_from_json(deep_in_memory(200000)); }), "");
  ordered_json deep_obj = ordered_json::object();
  ordered_json* inner = &deep_obj;
  for (int k = 1; k < 200000; ++k) inner = &((*inner)["a"] = ordered_json::object());
  EXPECT_NE(error_of([&] { (void)jinja::value_from_json(deep_obj); }), "");
}

TEST(JsonLimits, ChatInputForms) {
  ChatInput in = parse_chat_input(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(in.messages.size(), 1u);
  EXPECT_TRUE(in.tools.is_null());
  in = parse_chat_input(R"({"tools": [{"type": "function"}], "x": 1, "messages": []})");
  EXPECT_TRUE(in.messages.is_array());
  EXPECT_EQ(in.tools.size(), 1u);
  EXPECT_NE(error_of([] { (void)parse_chat_input(R"({"message": []})"); }).find("no \"messages\""),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)parse_chat_input(R"({"messages": "hi"})"); }).find("must be a JSON array"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)parse_chat_input("3"); }).find("must be a JSON array"), std::string::npos);
  EXPECT_EQ(error_of([] { (void)parse_chat_input(nested_arrays(513)); }),
            "messages JSON nested deeper than 512 levels");
}

}  // namespace
}  // namespace polykv
