// Shared helpers for tests: fixture paths, file loading, random data.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace polykv::test {

// ../shared/fixtures (or $POLYKV_FIXTURES). Tests that need it fail loudly when it is missing.
std::string fixtures_dir();
std::string test_data_dir();  // tests/data in the source tree
std::vector<uint8_t> read_file(const std::string& path);
std::vector<float> read_f32(const std::string& path);
std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f);

// Runs the polykv binary with args (a shell command line), stdin_text on its standard input when
// not empty; returns its exit code (-1 if it did not exit normally) and stdout + stderr together.
struct CliResult {
  int code;
  std::string out;
};
CliResult polykv(const std::string& args, const std::string& stdin_text = "");
std::string embedded_model();  // models/polykv-code-26m-q8_0.gguf in the source tree

}  // namespace polykv::test
