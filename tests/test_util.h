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

}  // namespace polykv::test
