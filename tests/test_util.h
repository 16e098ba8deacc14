// Shared helpers for tests: fixture paths, file loading, random data.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace polykv::test {

// ../shared/fixtures (or $POLYKV_FIXTURES). A test that reads it starts with
// POLYKV_REQUIRE_FIXTURES_OR_SKIP(); a helper that reads it is only called from such tests.
std::string fixtures_dir();
// Empty when fixtures_dir() is a directory; else why the fixture tests cannot run (the first call
// also prints that once on stderr, with how to get them).
std::string fixtures_missing();
// True when absent fixtures must fail the tests instead of skipping them: $POLYKV_REQUIRE_FIXTURES
// set and not "0", or else $CI == "true" (CI sets both; .ci/run sets the first).
bool fixtures_required();
// Empty when fixtures_dir()/models/random/<name>.gguf exists; else why the test cannot run. A machine may hold a
// part of the fixtures (the GPU machine's carry: docs/GPU.md), and a fixture model's reference files travel with it.
std::string fixture_model_missing(const std::string& name);
std::string test_data_dir();  // tests/data in the source tree
std::vector<uint8_t> read_file(const std::string& path);
std::vector<float> read_f32(const std::string& path);
std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f);
// log-softmax of x[0..n) in double (max subtracted first): how the golden tests compare logits.
std::vector<double> log_softmax(const float* x, int n);
// Loads the GGUF at path on a 2-thread CPU backend, runs tokens {1, 17, 200, 5, 99, 42} through an f32 KV cache and
// returns the last row's logits: a smoke run of a written model (synth, quantize).
std::vector<float> cpu_last_logits(const std::string& path);

// Runs the polykv binary with args (a shell command line), stdin_text (or nothing) on its standard
// input; returns its exit code (-1 if it did not exit normally) and stdout + stderr together.
struct CliResult {
  int code;
  std::string out;
};
CliResult polykv(const std::string& args, const std::string& stdin_text = "");
// As polykv(), with stdout and stderr kept apart.
struct CliStreams {
  int code;
  std::string out, err;
};
CliStreams polykv_streams(const std::string& args, const std::string& stdin_text = "");
std::string embedded_model();  // models/polykv-code-26m-q8_0.gguf in the source tree

}  // namespace polykv::test

// First statement of a test that reads the fixtures: without them the test is skipped with the
// reason, or fails where fixtures_required() (CI), so that nothing skips silently there.
#define POLYKV_REQUIRE_FIXTURES_OR_SKIP()                                                     \
  do {                                                                                        \
    if (const std::string polykv_missing_ = ::polykv::test::fixtures_missing(); !polykv_missing_.empty()) { \
      if (::polykv::test::fixtures_required()) FAIL() << polykv_missing_;                     \
      GTEST_SKIP() << polykv_missing_;                                                        \
    }                                                                                         \
  } while (0)

// POLYKV_REQUIRE_FIXTURES_OR_SKIP for a test that reads one fixture model (name: "qwen2", ...): skipped with the
// reason when the fixtures or that model's file are absent, failed where fixtures_required().
#define POLYKV_REQUIRE_FIXTURE_MODEL_OR_SKIP(name)                                                \
  do {                                                                                            \
    POLYKV_REQUIRE_FIXTURES_OR_SKIP();                                                            \
    if (const std::string polykv_missing_ = ::polykv::test::fixture_model_missing(name);          \
        !polykv_missing_.empty()) {                                                               \
      if (::polykv::test::fixtures_required()) FAIL() << polykv_missing_;                         \
      GTEST_SKIP() << polykv_missing_;                                                            \
    }                                                                                             \
  } while (0)
