#include "test_util.h"

#include "backend/cpu/cpu_backend.h"
#include "kv/kv_cache.h"
#include "model/model.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace polykv::test {

std::string fixtures_dir() {
  if (const char* env = std::getenv("POLYKV_FIXTURES")) return env;
  return POLYKV_FIXTURES_DIR;
}

std::string fixtures_missing() {
  const std::string dir = fixtures_dir();
  if (std::filesystem::is_directory(dir)) return {};
  const std::string why = "fixtures not found at " + dir + " (clone them beside the checkout as ../shared/fixtures, or "
                          "set POLYKV_FIXTURES)";
  static const bool told = [&] {
    std::fprintf(stderr, "[ NOTE     ] %s: the tests that need them %s\n", why.c_str(),
                 fixtures_required() ? "fail (POLYKV_REQUIRE_FIXTURES or CI=true is set)"
                                     : "are skipped (POLYKV_REQUIRE_FIXTURES=1 makes them fail)");
    return true;
  }();
  (void)told;
  return why;
}

std::string fixture_model_missing(const std::string& name) {
  const std::string path = fixtures_dir() + "/models/random/" + name + ".gguf";
  if (std::filesystem::exists(path)) return {};
  return "fixture model " + path + " is absent (this machine holds a part of the fixtures)";
}

bool fixtures_required() {
  if (const char* req = std::getenv("POLYKV_REQUIRE_FIXTURES")) return std::string(req) != "0";
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
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

namespace {

// Runs a shell command line with stdin_text (or nothing) on its standard input; returns its stdout.
CliResult run_shell(std::string cmd, const std::string& stdin_text) {
  std::string in_path;
  if (!stdin_text.empty()) {
    in_path = std::filesystem::temp_directory_path() /
              ("polykv_cli_in_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand()));
    std::ofstream(in_path) << stdin_text;
    cmd += " < " + in_path;
  } else {
    cmd += " < /dev/null";  // never the test runner's own stdin
  }
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), &pclose);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p.get())) > 0) out.append(buf.data(), n);
  const int status = pclose(p.release());
  if (!in_path.empty()) std::filesystem::remove(in_path);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The polykv binary as a shell command: POLYKV_TEST_EMULATOR (e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu",
// scripts/arm64-test.sh) runs a cross-built binary under emulation; POLYKV_TEST_BINARY replaces the build
// tree's path (the GPU machine runs a carried build-gpu/polykv, scripts/gpu-lib.sh).
std::string polykv_command() {
  const char* emu = std::getenv("POLYKV_TEST_EMULATOR");
  const char* bin = std::getenv("POLYKV_TEST_BINARY");
  return (emu && *emu ? std::string(emu) + " " : std::string()) + (bin && *bin ? std::string(bin) : POLYKV_BINARY);
}

}  // namespace

CliResult polykv(const std::string& args, const std::string& stdin_text) {
  return run_shell(polykv_command() + " " + args + " 2>&1", stdin_text);
}

CliStreams polykv_streams(const std::string& args, const std::string& stdin_text) {
  const std::string err_path = std::filesystem::temp_directory_path() /
                               ("polykv_cli_err_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand()));
  const CliResult r = run_shell(polykv_command() + " " + args + " 2>" + err_path, stdin_text);
  const std::vector<uint8_t> err = read_file(err_path);
  std::filesystem::remove(err_path);
  return {r.code, r.out, std::string(err.begin(), err.end())};
}

std::string embedded_model() { return std::string(POLYKV_SOURCE_DIR) + "/models/polykv-code-26m-q8_0.gguf"; }

std::vector<double> log_softmax(const float* x, int n) {
  double mx = -INFINITY, s = 0;
  for (int i = 0; i < n; ++i) mx = std::max(mx, double(x[i]));
  for (int i = 0; i < n; ++i) s += std::exp(double(x[i]) - mx);
  std::vector<double> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[size_t(i)] = double(x[i]) - mx - std::log(s);
  return out;
}

std::vector<float> cpu_last_logits(const std::string& path) {
  CpuBackend be(2);
  auto m = Model::load(path, be);
  KvCache kv(m->kv_shape(), KvType::F32, KvType::F32, 64, 16);
  const std::vector<int32_t> ids = {1, 17, 200, 5, 99, 42};
  std::vector<float> logits(size_t(m->config().n_vocab));
  m->forward(ids, kv, logits.data(), false);
  return logits;
}

}  // namespace polykv::test
