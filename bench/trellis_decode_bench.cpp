// One-off micro benchmark of reading turbo*t V rows: the active ISA's trellis decoder (decode_rotated_fast,
// what attention's tiles run) on head_dim 128, one thread, best of 7 passes. Two footprints: 32 rows decoded
// over and over (one attention tile, in L1: the decoder's own cost) and 262144 rows once each (13 MB of
// turbo3t: the rows stream from memory, as at depth). Not part of the CMake build; after building polykv_lib:
//   g++ -std=c++20 -O2 -Isrc bench/trellis_decode_bench.cpp build/libpolykv_lib.a \
//       $(pkg-config --libs libpcre2-8 icu-uc) -lpthread -o build/trellis_decode_bench
//   build/trellis_decode_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "quant/turbo_trellis.h"

using namespace polykv;

int main() {
  constexpr int kHeadDim = 128, kPasses = 7;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (int bits : {2, 3, 4}) {
    const size_t row_bytes = turbo::trellis::head_bytes(bits, kHeadDim);
    for (int rows : {32, 262144}) {
      const int reps = rows == 32 ? 8192 : 1;
      std::vector<uint8_t> code(row_bytes * size_t(rows));
      std::vector<float> x(kHeadDim), out(size_t(32) * kHeadDim);
      for (int r = 0; r < std::min(rows, 4096); ++r) {
        for (float& v : x) v = normal(rng);
        turbo::trellis::quantize_head(bits, x.data(), code.data() + size_t(r) * row_bytes, kHeadDim);
      }
      for (int r = 4096; r < rows; ++r)  // copies of the first 4096 (the decoder's work does not depend on values)
        std::copy_n(code.data() + size_t(r % 4096) * row_bytes, row_bytes, code.data() + size_t(r) * row_bytes);
      double best = 1e30;
      float sink = 0;
      for (int pass = 0; pass < kPasses; ++pass) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int rep = 0; rep < reps; ++rep)
          for (int r = 0; r < rows; ++r)
            turbo::trellis::decode_rotated_fast(bits, code.data() + size_t(r) * row_bytes,
                                                out.data() + size_t(r % 32) * kHeadDim, kHeadDim);
        sink += out[0];
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::printf("turbo%dt rows %6d x %4d: %.2f ns per row (%.3f ns per value)  [%g]\n", bits, rows, reps,
                  1e9 * best / (double(rows) * reps), 1e9 * best / (double(rows) * reps * kHeadDim), double(sink));
    }
  }
}
