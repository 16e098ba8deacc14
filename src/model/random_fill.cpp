#include "model/random_fill.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "quant/quant.h"

namespace polykv {
namespace {

// Standard normal pairs by Marsaglia's polar method from a SplitMix64 stream: each 64-bit draw
// gives a point (x, y) in [-1, 1)^2 from two 32-bit halves; points outside the unit disk (or at the
// origin) are rejected (~21%). No trigonometry, one log per pair.
class NormalStream {
 public:
  explicit NormalStream(uint64_t seed) : state_(seed) {}

  // Writes n values (n may be odd: the last pair's second value is dropped).
  void fill(float* out, int64_t n, float mean, float stddev) {
    for (int64_t i = 0; i < n; i += 2) {
      float x, y, s;
      do {
        const uint64_t r = next();
        x = float(int32_t(uint32_t(r))) * 0x1.0p-31f;
        y = float(int32_t(uint32_t(r >> 32))) * 0x1.0p-31f;
        s = x * x + y * y;
      } while (s >= 1.0f || s == 0.0f);
      const float k = stddev * std::sqrt(-2.0f * std::log(s) / s);
      out[i] = mean + k * x;
      if (i + 1 < n) out[i + 1] = mean + k * y;
    }
  }

 private:
  uint64_t next() { return mix64(state_ += 0x9E3779B97F4A7C15ull); }
  uint64_t state_;
};

constexpr int64_t kChunkValues = 1 << 16;  // values per chunk (rounded to whole rows)

}  // namespace

uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void fill_random(const RandomFill& s, uint8_t* dst, size_t n_bytes) {
  const size_t rb = row_bytes(s.type, s.ne0);
  check(s.rows >= 0 && rb * size_t(s.rows) == n_bytes, "fill_random: ", n_bytes, " bytes for ", s.rows,
        " rows of ", rb);
  const int64_t rows_per_chunk = std::max<int64_t>(1, kChunkValues / s.ne0);
  const int64_t n_chunks = (s.rows + rows_per_chunk - 1) / rows_per_chunk;

  std::atomic<int64_t> next_chunk{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    try {
      std::vector<float> row(size_t(s.ne0));
      for (int64_t c; (c = next_chunk.fetch_add(1)) < n_chunks;) {
        NormalStream rng(mix64(s.seed ^ mix64(uint64_t(c))));
        const int64_t end = std::min(s.rows, (c + 1) * rows_per_chunk);
        for (int64_t r = c * rows_per_chunk; r < end; ++r) {
          rng.fill(row.data(), s.ne0, s.mean, s.stddev);
          quantize_row_ref(s.type, row.data(), dst + size_t(r) * rb, s.ne0);
        }
      }
    } catch (...) {
      std::lock_guard lock(error_mu);
      if (!error) error = std::current_exception();
      next_chunk.store(n_chunks);  // stop the others early
    }
  };

  int n_threads = s.n_threads > 0 ? s.n_threads : int(std::max(1u, std::thread::hardware_concurrency()));
  n_threads = int(std::min<int64_t>(n_threads, n_chunks));
  std::vector<std::thread> helpers;
  helpers.reserve(size_t(n_threads - 1));
  for (int t = 1; t < n_threads; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::exception& e) {  // no thread could be made: stop and join the others first
      next_chunk.store(n_chunks);
      for (auto& h : helpers) h.join();
      fail("cannot start thread ", t + 1, " of ", n_threads, ": ", e.what(), "; use fewer threads");
    }
  }
  work();  // the caller is worker 0
  for (auto& h : helpers) h.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace polykv
