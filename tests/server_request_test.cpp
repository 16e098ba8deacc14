// Unit tests of the server's pure parts: request parsing and validation (hostile inputs included),
// stop strings, response formatting, the metrics text, and the pool-prefix check. No sockets.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/metrics_text.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/request_json.h"
#include "server/stop_matcher.h"

namespace polykv::server {
namespace {

// The status of the ApiError that f throws (0 when it does not throw one).
template <typename F>
int status_of(F&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const ApiError& e) {
    if (message) *message = e.what();
    return e.status();
  }
  return 0;
}

ChatRequest chat(const std::string& body) { return parse_chat_request(parse_request_json(body)); }
CompletionRequest completion(const std::string& body) { return parse_completion_request(parse_request_json(body)); }

TEST(ServerRequestJson, MalformedBodiesAre400) {
  for (const char* body : {"", "{", "{\"a\":}", "[1, 2]", "\"text\"", "42", "null", "{\"a\": 1} x", "{'a': 1}",
                           "{\"a\": \"\xff\xfe\"}", "{\"a\": \"\\ud800\"}", "{\"a\": NaN}", "{\"a\":1,}"}) {
    std::string msg;
    EXPECT_EQ(status_of([&] { parse_request_json(body); }, &msg), 400) << body;
    EXPECT_LT(msg.size(), 400u) << msg;
  }
  EXPECT_EQ(status_of([&] { parse_request_json("{\"a\": [1, {\"b\": null}]}"); }), 0);
}

TEST(ServerRequestJson, DeepNestingIsRefusedWhileParsing) {
  const std::string deep = "{\"a\":" + std::string(200000, '[');  // never closed: the limit hits first
  std::string msg;
  EXPECT_EQ(status_of([&] { parse_request_json(deep); }, &msg), 400);
  EXPECT_NE(msg.find("deeper"), std::string::npos) << msg;
  // Exactly at the limit parses; one more level does not.
  const int ok_depth = kMaxRequestJsonDepth - 1;  // plus the outer object
  const std::string at_limit =
      "{\"a\":" + std::string(size_t(ok_depth), '[') + std::string(size_t(ok_depth), ']') + "}";
  EXPECT_EQ(status_of([&] { parse_request_json(at_limit); }), 0);
  const std::string over =
      "{\"a\":" + std::string(size_t(ok_depth + 1), '[') + std::string(size_t(ok_depth + 1), ']') + "}";
  EXPECT_EQ(status_of([&] { parse_request_json(over); }), 400);
}

TEST(ServerRequestJson, LongGarbageGivesAShortMessage) {
  std::string msg;
  const std::string body = "{\"a\": \"" + std::string(100000, 'x');  // unterminated string
  EXPECT_EQ(status_of([&] { parse_request_json(body); }, &msg), 400);
  EXPECT_LT(msg.size(), 400u);
}

TEST(ServerRequestJson, DumpReplacesInvalidUtf8) {
  Json j = {{"t", std::string("a\xff"
                              "b")}};
  EXPECT_EQ(dump_json(j),
            "{\"t\":\"a\xEF\xBF\xBD"
            "b\"}");
}

TEST(ServerChatRequest, ParsesWhatClientsSend) {
  const ChatRequest r = chat(R"({"model": "m", "messages": [{"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
      "temperature": 0.5, "top_p": 0.9, "top_k": 7, "min_p": 0.1, "seed": -1, "stop": ["x", "yz"],
      "max_completion_tokens": 9, "max_tokens": 3, "stream": true, "stream_options": {"include_usage": true},
      "logprobs": true, "top_logprobs": 3, "n": 1, "presence_penalty": 0, "user": "u", "unknown": {"x": 1},
      "ignore_eos": true})");
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(r.sampling.seed, ~uint64_t(0));
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "yz"}));
  EXPECT_EQ(r.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_TRUE(r.ignore_eos);

  const ChatRequest d = chat(R"({"messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_EQ(d.max_tokens, -1);
  EXPECT_EQ(d.top_logprobs, -1);
  EXPECT_FALSE(d.seed_given);
  EXPECT_FALSE(d.stream);
  EXPECT_FALSE(d.ignore_eos);
  EXPECT_EQ(chat(R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true})").top_logprobs, 0);
  EXPECT_EQ(chat(R"({"messages": [{"role": "user", "content": "hi"}], "stop": "s", "seed": null})").stop,
            std::vector<std::string>{"s"});
}

TEST(ServerChatRequest, WrongTypesAndValuesAre400NamingTheParameter) {
  const std::string m = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{}", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": [1]})", "messages[0]"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content[0]"},
      {"{" + m + R"(, "temperature": "hot"})", "temperature"},
      {"{" + m + R"(, "temperature": -1})", "temperature"},
      {"{" + m + R"(, "temperature": 1e308})", "temperature"},
      {"{" + m + R"(, "top_p": 1.5})", "top_p"},
      {"{" + m + R"(, "min_p": -0.1})", "min_p"},
      {"{" + m + R"(, "top_k": 2.5})", "top_k"},
      {"{" + m + R"(, "max_tokens": 0})", "max_tokens"},
      {"{" + m + R"(, "max_tokens": -5})", "max_tokens"},
      {"{" + m + R"(, "max_tokens": 1e30})", "max_tokens"},
      {"{" + m + R"(, "max_tokens": "10"})", "max_tokens"},
      {"{" + m + R"(, "n": 2})", "n"},
      {"{" + m + R"(, "stream": "yes"})", "stream"},
      {"{" + m + R"(, "stream_options": {"include_usage": 1}})", "stream_options.include_usage"},
      {"{" + m + R"(, "stop": 5})", "stop"},
      {"{" + m + R"(, "stop": [""]})", "stop"},
      {"{" + m + R"(, "stop": ["a", 1]})", "stop"},
      {"{" + m + R"(, "seed": 1.5})", "seed"},
      {"{" + m + R"(, "seed": "1"})", "seed"},
      {"{" + m + R"(, "top_logprobs": 3})", "top_logprobs"},  // needs logprobs
      {"{" + m + R"(, "logprobs": true, "top_logprobs": 21})", "top_logprobs"},
      {"{" + m + R"(, "logprobs": 1})", "logprobs"},
      {"{" + m + R"(, "frequency_penalty": 0.5})", "frequency_penalty"},
      {"{" + m + R"(, "logit_bias": {"1": 5}})", "logit_bias"},
      {"{" + m + R"(, "response_format": {"type": "json_object"}})", "response_format"},
      {"{" + m + R"(, "pool": "a/b"})", "pool"},
      {"{" + m + R"(, "pool": 3})", "pool"},
      {"{" + m + R"(, "tools": {}})", "tools"},
      {"{" + m + R"(, "tool_choice": "required"})", "tool_choice"},
      {"{" + m + R"(, "ignore_eos": 1})", "ignore_eos"},
  };
  for (const auto& [body, param] : cases) {
    try {
      chat(body);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << body;
      EXPECT_EQ(e.param(), param) << body << ": " << e.what();
    }
  }
}

TEST(ServerCompletionRequest, PromptForms) {
  EXPECT_EQ(completion(R"({"prompt": "abc"})").prompt, "abc");
  EXPECT_EQ(completion(R"({"prompt": ["abc"]})").prompt, "abc");
  const CompletionRequest ids = completion(R"({"prompt": [1, 2, 3], "logprobs": 2})");
  EXPECT_TRUE(ids.prompt_is_ids);
  EXPECT_EQ(ids.prompt_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(ids.top_logprobs, 2);
  EXPECT_EQ(completion(R"({"prompt": [[4, 5]]})").prompt_ids, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(completion(R"({"prompt": "x", "n_predict": -1})").max_tokens, -1);
  EXPECT_EQ(completion(R"({"prompt": "x", "n_predict": 7})").max_tokens, 7);
  for (const char* bad :
       {R"({})", R"({"prompt": 5})", R"({"prompt": ["a", "b"]})", R"({"prompt": [1, "a"]})", R"({"prompt": [-1]})",
        R"({"prompt": [4294967296]})", R"({"prompt": [[1], [2]]})", R"({"prompt": {"a": 1}})",
        R"({"prompt": "x", "echo": true})", R"({"prompt": "x", "suffix": "y"})", R"({"prompt": "x", "best_of": 2})",
        R"({"prompt": "x", "logprobs": 21})", R"({"prompt": "x", "logprobs": true})"})
    EXPECT_EQ(status_of([&] { completion(bad); }), 400) << bad;
}

TEST(ServerPoolRequest, NamesAndSources) {
  const PoolRequest p = parse_pool_request(parse_request_json(
      R"({"name": "doc-1.v2_x", "messages": [{"role": "system", "content": "s"}], "cache_type_k": "f16"})"));
  EXPECT_EQ(p.name, "doc-1.v2_x");
  EXPECT_TRUE(p.from_messages);
  EXPECT_EQ(p.k_type, "f16");
  EXPECT_EQ(p.v_type, "");
  const PoolRequest q = parse_pool_request(parse_request_json(R"({"name": "d", "prompt": [1, 2]})"));
  EXPECT_FALSE(q.from_messages);
  EXPECT_EQ(q.prompt.prompt_ids.size(), 2u);
  for (const char* bad :
       {R"({"prompt": "x"})", R"({"name": "", "prompt": "x"})", R"({"name": "a b", "prompt": "x"})",
        R"({"name": "../etc", "prompt": "x"})", R"({"name": "d"})", R"({"name": "d", "prompt": "x", "messages": []})",
        R"({"name": "d", "messages": []})", R"({"name": "d", "prompt": "x", "cache_type_k": 1})"})
    EXPECT_EQ(status_of([&] { parse_pool_request(parse_request_json(bad)); }), 400) << bad;
  EXPECT_FALSE(valid_pool_name(std::string(65, 'a')));
  EXPECT_TRUE(valid_pool_name(std::string(64, 'a')));
}

TEST(ServerTokenizeRequest, DefaultsAndErrors) {
  const TokenizeRequest t = parse_tokenize_request(parse_request_json(R"({"content": "x", "with_pieces": true})"));
  EXPECT_FALSE(t.add_special);
  EXPECT_TRUE(t.parse_special);
  EXPECT_TRUE(t.with_pieces);
  EXPECT_EQ(status_of([] { parse_tokenize_request(parse_request_json(R"({"content": 1})")); }), 400);
  EXPECT_EQ(parse_detokenize_request(parse_request_json(R"({"tokens": [1, 2]})")).size(), 2u);
  EXPECT_EQ(status_of([] { parse_detokenize_request(parse_request_json(R"({"tokens": [1, 2.5]})")); }), 400);
  EXPECT_EQ(status_of([] { parse_detokenize_request(parse_request_json(R"({"tokens": "1"})")); }), 400);
}

// Feeds text in pieces of every size; the output must equal the text cut before the first stop.
std::string run_stops(const std::vector<std::string>& stops, const std::string& text, size_t piece, bool* matched) {
  StopMatcher m(stops);
  std::string out;
  for (size_t i = 0; i < text.size(); i += piece) out += m.push(text.substr(i, piece));
  out += m.flush();
  *matched = m.matched();
  return out;
}

TEST(ServerStopMatcher, CutsBeforeTheFirstStopWhateverThePieces) {
  const std::string text = "Hello world. STOP here. END";
  for (size_t piece = 1; piece <= text.size(); ++piece) {
    bool matched = false;
    EXPECT_EQ(run_stops({"END", "STOP"}, text, piece, &matched), "Hello world. ") << piece;
    EXPECT_TRUE(matched);
    EXPECT_EQ(run_stops({"nothing"}, text, piece, &matched), text) << piece;
    EXPECT_FALSE(matched);
    EXPECT_EQ(run_stops({}, text, piece, &matched), text);
    EXPECT_EQ(run_stops({"d. S"}, text, piece, &matched), "Hello worl") << piece;
  }
  // Overlapping candidates: "aab" after "aaa..." must still be found.
  bool matched = false;
  EXPECT_EQ(run_stops({"aab"}, "xaaaab", 1, &matched), "xaa");
  EXPECT_TRUE(matched);
}

TEST(ServerStopMatcher, HoldsBackOnlyAPossibleStart) {
  StopMatcher m({"</end>"});
  EXPECT_EQ(m.push("abc</e"), "abc");  // "</e" may begin the stop string
  EXPECT_EQ(m.push("x"), "</ex");
  EXPECT_EQ(m.push("</en"), "");
  EXPECT_EQ(m.push("d>tail"), "");
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.flush(), "");
  StopMatcher u({"é!"});
  EXPECT_EQ(u.push("caf\xC3\xA9"), "caf");  // held: a whole character, never half of one
  EXPECT_EQ(u.flush(), "\xC3\xA9");
}

TEST(ServerResponse, UsageAndFinishReasons) {
  FinishInfo fi;
  fi.prompt_tokens = 10;
  fi.cached_tokens = 7;
  fi.completion_tokens = 5;
  const Json u = usage_json(fi);
  EXPECT_EQ(u["total_tokens"], 15);
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 7);
  EXPECT_STREQ(finish_reason_name(FinishReason::Stop), "stop");
  EXPECT_STREQ(finish_reason_name(FinishReason::Length), "length");
  EXPECT_STREQ(finish_reason_name(FinishReason::ContextFull), "length");
}

TEST(ServerResponse, ChunksAndLogprobs) {
  ResponseMeta meta{Api::Chat, "chatcmpl-1", 123, "m"};
  std::vector<LogprobEntry> lp(1);
  lp[0].token = "\xC3";  // half a character: bytes carry it, the string gets U+FFFD when dumped
  lp[0].logprob = -INFINITY;
  lp[0].top = {{"a", -0.5f}};
  const Json first = stream_chunk(meta, "hi", true, nullptr, &lp);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "hi");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const Json& c = first["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(c["logprob"], -9999.0);
  EXPECT_EQ(c["bytes"], Json::array({0xC3}));
  EXPECT_NO_THROW(dump_json(first));
  const Json last = stream_chunk(meta, "", false, "length", nullptr);
  EXPECT_EQ(last["choices"][0]["delta"], Json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");

  meta.api = Api::Completion;
  lp[0].text_offset = 4;
  const Json comp = final_response(meta, "text", "stop", FinishInfo{}, &lp);
  EXPECT_EQ(comp["object"], "text_completion");
  EXPECT_EQ(comp["choices"][0]["text"], "text");
  EXPECT_EQ(comp["choices"][0]["logprobs"]["text_offset"][0], 4);
  EXPECT_EQ(comp["choices"][0]["logprobs"]["top_logprobs"][0]["a"], -0.5);
  EXPECT_EQ(usage_chunk(meta, FinishInfo{})["choices"], Json::array());
}

TEST(ServerMetrics, PrometheusTextIsWellFormed) {
  ModelInfo mi;
  mi.id = "m";
  ServiceMetrics m;
  m.requests_total = 3;
  m.kv_blocks_used = 2;
  m.kv_bytes_per_block = 1000;
  PoolInfo p;
  p.name = "we\"ird\\";
  p.n_tokens = 12;
  const std::string text = prometheus_text(mi, m, {p}, ServerCounters{});
  EXPECT_NE(text.find("# TYPE polykv_requests_total counter\npolykv_requests_total 3\n"), std::string::npos);
  EXPECT_NE(text.find("polykv_kv_bytes_used 2000\n"), std::string::npos);
  EXPECT_NE(text.find("polykv_pool_tokens{pool=\"we\\\"ird\\\\\"} 12\n"), std::string::npos) << text;
  // Every line is a comment or "name[{labels}] value".
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    ASSERT_NE(end, std::string::npos);
    const std::string line = text.substr(start, end - start);
    if (line[0] != '#') {
      EXPECT_EQ(line.rfind("polykv_", 0), 0u) << line;
      EXPECT_NE(line.find(' '), std::string::npos) << line;
    }
    start = end + 1;
  }
}

TEST(ServerChatPrompt, PoolPrefix) {
  EXPECT_EQ(tokens_after_pool("p", {1, 2}, {1, 2, 3, 4}), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(tokens_after_pool("p", {1, 2}, {1, 2}), std::vector<int32_t>{});
  std::string msg;
  EXPECT_EQ(status_of([] { tokens_after_pool("p", {1, 2, 3}, {1, 2, 9, 9}); }, &msg), 400);
  EXPECT_NE(msg.find("at token 2"), std::string::npos) << msg;
  EXPECT_EQ(status_of([] { tokens_after_pool("p", {1, 2, 3}, {1, 2}); }), 400);
}

TEST(ServerErrors, BodiesCarryTypeAndCode) {
  const Json e = error_body(ApiError(404, "unknown pool 'x'", "pool_not_found", "pool"));
  EXPECT_EQ(e["error"]["type"], "not_found_error");
  EXPECT_EQ(e["error"]["code"], "pool_not_found");
  EXPECT_EQ(e["error"]["param"], "pool");
  EXPECT_TRUE(error_body(500, "x")["error"]["param"].is_null());
}

}  // namespace
}  // namespace polykv::server
