#include "test_util.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace polykv::test {

std::string fixtures_dir() {
  if (const char* env = std::getenv("POLYKV_FIXTURES")) return env;
  return POLYKV_FIXTURES_DIR;
}

std::string test_data_dir() { return POLYKV_TEST_DATA_DIR; }

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open test file " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::vector<float> read_f32(const std::string& path) {
  auto bytes = read_file(path);
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> out(n);
  for (auto& v : out) v = dist(rng);
  return out;
}

}  // namespace polykv::test
