// libFuzzer target: arbitrary bytes as a request body, through every request parser of the server
// (src/server/openai_request.h): chat and text completions, pools, tokenize, detokenize. Each parse
// must end in a validated struct or an ApiError with a 4xx status; a crash, a sanitizer report, a
// hang or any other exception is a bug. Accepted requests are also formatted back (dump_json), so
// what the parsers let through is safe to echo.
//   scripts/fuzz.sh runs it as build-fuzz/fuzz_openai_request with the seeds in fuzz/seeds/openai_request/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/request_json.h"

namespace {

using polykv::server::ApiError;
using polykv::server::Json;

template <typename F>
void expect_4xx(F&& parse) {
  try {
    parse();
  } catch (const ApiError& e) {
    if (e.status() < 400 || e.status() >= 500) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 20) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  Json j;
  try {
    j = polykv::server::parse_request_json(body);
  } catch (const ApiError& e) {
    if (e.status() != 400) std::abort();
    return 0;
  }
  using namespace polykv::server;
  expect_4xx([&] {
    const ChatRequest r = parse_chat_request(j);
    if (!r.messages.is_array() || (r.top_logprobs > kMaxTopLogprobs) || r.max_tokens == 0) std::abort();
    validate_sampling(r.sampling);  // what the parser returns must pass the check again
    (void)dump_json(r.messages);
  });
  expect_4xx([&] {
    const CompletionRequest r = parse_completion_request(j);
    for (int64_t id : r.prompt_ids)
      if (id < 0 || id > INT32_MAX) std::abort();
    for (const std::string& s : r.stop)
      if (s.empty() || s.size() > kMaxStopBytes) std::abort();
  });
  expect_4xx([&] {
    const PoolRequest r = parse_pool_request(j);
    if (!valid_pool_name(r.name)) std::abort();
  });
  expect_4xx([&] { parse_tokenize_request(j); });
  expect_4xx([&] { parse_detokenize_request(j); });
  (void)dump_json(j);
  return 0;
}
