// Collects one engine request's tokens and waits for its end: the client side of Engine tests (CPU
// and GPU). Requests are greedy.
#pragma once
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "engine/service.h"

namespace polykv::test {

struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> ids;
  bool done = false;
  FinishInfo info;
  GenerationRequest request(std::vector<int32_t> prompt, int max_tokens, const std::string& pool = "",
                            bool ignore_eos = false) {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.pool = pool;
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0;
    r.ignore_eos = ignore_eos;
    r.on_token = [this](const TokenEvent& e) {
      std::lock_guard<std::mutex> lk(mu);
      ids.push_back(e.id);
      return true;
    };
    r.on_done = [this](const FinishInfo& fi) {
      std::lock_guard<std::mutex> lk(mu);
      info = fi;
      done = true;
      cv.notify_all();
    };
    return r;
  }
  void wait() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return done; });
  }
};

}  // namespace polykv::test
