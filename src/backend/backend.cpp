// make_backend: the device name → a backend. The CUDA backend is linked only with POLYKV_CUDA; a
// build without it still parses "cuda" names so that it can say why it cannot run them.
#include "backend/backend.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/argmax_ref.h"
#include "core/error.h"
#include "core/printable.h"

#ifdef POLYKV_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace polykv {
namespace {

// "cuda" → 0, "cuda:N" → N; -1 if `device` names no CUDA device.
int cuda_index(const std::string& device) {
  if (device == "cuda") return 0;
  if (device.rfind("cuda:", 0) != 0 || device.size() == 5 || device.size() > 9) return -1;
  int n = 0;
  for (size_t i = 5; i < device.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(device[i]))) return -1;
    n = n * 10 + (device[i] - '0');
  }
  return n;
}

}  // namespace

void Backend::argmax_rows(const float* x, int rows, int cols, int32_t* out) {
  std::vector<float> row(size_t(std::max(cols, 0)));
  std::vector<int32_t> ids(size_t(std::max(rows, 0)));
  for (int r = 0; r < rows; ++r) {
    if (cols > 0) download(row.data(), x + size_t(r) * size_t(cols), size_t(cols) * sizeof(float));
    ids[size_t(r)] = argmax_first_ref(row.data(), cols);
  }
  if (rows > 0) upload(out, ids.data(), size_t(rows) * sizeof(int32_t));
}

void Backend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  std::vector<uint8_t> tmp(bytes);
  download(tmp.data(), src, bytes);
  upload(dst, tmp.data(), bytes);
}

void* Backend::allocate_host(size_t bytes) {
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  check(p != nullptr, "cannot allocate ", bytes, " bytes of host memory");
  return p;
}

void Backend::release_host(void* p) { std::free(p); }

bool cuda_available() {
#ifdef POLYKV_HAVE_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(const BackendOptions& opts) {
  const std::string& d = opts.device;
  if (d == "cpu") return std::make_unique<CpuBackend>(opts.threads);
  if (d == "auto") {
    if (cuda_available()) return make_backend({"cuda", opts.threads, opts.batch_invariant});
    return std::make_unique<CpuBackend>(opts.threads);
  }
  const int index = cuda_index(d);
  check(index >= 0, "unknown device '", printable(d, 40), "': use cpu, cuda, cuda:N or auto");
#ifdef POLYKV_HAVE_CUDA
  const int n = cuda_device_count();
  check(n > 0, "device ", d, ": no CUDA GPU is visible");
  check(index < n, "device ", d, ": only ", n, " CUDA GPU", n == 1 ? " is" : "s are", " visible (cuda:0",
        n > 1 ? " .. cuda:" + std::to_string(n - 1) : std::string(), ")");
  return make_cuda_backend(index, opts.batch_invariant);
#else
  fail("device ", d, ": this polykv was built without CUDA");
#endif
}

}  // namespace polykv
