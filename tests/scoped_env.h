// Sets environment variables for a scope, then unsets them: for tests of the switches read at each call
// (POLYKV_ENGINE_ARGMAX, POLYKV_GREEDY_PIPELINE, ...).
#pragma once
#include <cstdlib>
#include <initializer_list>
#include <utility>
#include <vector>

namespace polykv::test {

struct ScopedEnv {
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) : vars_(vars) {
    for (const auto& [k, v] : vars_) setenv(k, v, 1);
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : vars_) unsetenv(k);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<const char*, const char*>> vars_;
};

}  // namespace polykv::test
