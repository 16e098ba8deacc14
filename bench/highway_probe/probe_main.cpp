// Highway probe (docs/ISA.md "Highway or per-ISA kernels"): the q8_0 x q8_0 row dot written once
// with Highway against polykv's hand-written AVX2 and AVX-512 row kernels (and scalar), same data,
// thread CPU time per pass over all rows, min of N interleaved repetitions; an L2-resident matrix
// and a DRAM-sized one. Prints JSON. x86 only (the aarch64 build is probe_arm64.cpp's check).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "core/fp16.h"
#include "q8_dot_hwy.h"

using namespace polykv;

static double thread_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 15;
  const int64_t n_in = 4096, n_blocks = n_in / 32;
  std::printf("{\"n_in\": %ld, \"reps\": %d, \"sizes\": [\n", long(n_in), reps);
  const int64_t row_counts[] = {48, 8192};  // 48 x 4352 B = 204 KiB (L2); 8192 rows = 34 MiB x 4 copies (DRAM)
  for (int si = 0; si < 2; ++si) {
    const int64_t n_out = row_counts[si];
    // DRAM case: 4 copies, cycled, so that no pass finds the matrix in the 32+ MiB L3.
    const int copies = si == 0 ? 1 : 4;
    const size_t row_bytes = size_t(n_blocks) * 34;
    std::vector<uint8_t> w(row_bytes * size_t(n_out) * size_t(copies));
    std::mt19937 rng(1);
    for (auto& b : w) b = uint8_t(rng());
    for (size_t r = 0; r < size_t(n_out) * copies; ++r)
      for (int64_t b = 0; b < n_blocks; ++b) {
        const uint16_t h = f32_to_fp16(0.001f * float(int(rng() % 2000) - 1000) / 1000.0f);
        std::memcpy(&w[r * row_bytes + size_t(b) * 34], &h, 2);
      }
    std::vector<float> x(static_cast<size_t>(n_in));
    for (auto& v : x) v = float(int(rng() % 20001) - 10000) / 5000.0f;
    std::vector<int8_t> qs(static_cast<size_t>(n_in));
    std::vector<float> d(static_cast<size_t>(n_blocks));
    std::vector<int32_t> sums(static_cast<size_t>(n_blocks));
    cpu::quantize_act_q8_32(x.data(), n_in, qs.data(), d.data(), sums.data());
    cpu::ActRow act;
    act.qs = qs.data();
    act.d = d.data();
    act.sum = sums.data();
    struct K {
      std::string name;
      cpu::RowDotFn polykv;
      float (*hwy)(const uint8_t*, const int8_t*, const float*, int64_t);
      double best = 1e30;
      double max_rel = 0;
    };
    std::vector<K> ks = {{"polykv_scalar", cpu::row_dot_scalar(DType::Q8_0), nullptr},
                         {"polykv_avx2", cpu::row_dot_avx2(DType::Q8_0), nullptr},
                         {"polykv_avx512", cpu::row_dot_avx512(DType::Q8_0), nullptr},
                         {std::string("hwy_") + hwy_probe_target_avx2(), nullptr, hwy_q8_0_dot_avx2},
                         {std::string("hwy_") + hwy_probe_target_avx512(), nullptr, hwy_q8_0_dot_avx512}};
    std::vector<float> ref(static_cast<size_t>(n_out)), out(static_cast<size_t>(n_out));
    for (int64_t r = 0; r < n_out; ++r) ks[0].polykv(&w[size_t(r) * row_bytes], &act, 1, n_in, &ref[size_t(r)]);
    int copy = 0;
    for (int rep = 0; rep < reps; ++rep)
      for (K& k : ks) {
        if (!k.polykv && !k.hwy) continue;
        const uint8_t* base = &w[size_t(copy) * row_bytes * size_t(n_out)];
        copy = (copy + 1) % copies;
        const double t0 = thread_s();
        for (int64_t r = 0; r < n_out; ++r) {
          const uint8_t* row = base + size_t(r) * row_bytes;
          if (k.polykv)
            k.polykv(row, &act, 1, n_in, &out[size_t(r)]);
          else
            out[size_t(r)] = k.hwy(row, qs.data(), d.data(), n_blocks);
        }
        k.best = std::min(k.best, thread_s() - t0);
        if (copies == 1 || base == w.data())
          for (int64_t r = 0; r < n_out; ++r)
            k.max_rel = std::max(k.max_rel, double(std::fabs(out[size_t(r)] - ref[size_t(r)])) /
                                                (1e-6 + std::fabs(ref[size_t(r)])));
      }
    std::printf("  {\"rows\": %ld, \"matrix_bytes\": %zu, \"kernels\": [\n", long(n_out), row_bytes * size_t(n_out));
    for (size_t i = 0; i < ks.size(); ++i) {
      const K& k = ks[i];
      if (!k.polykv && !k.hwy) continue;
      const double gbs = double(row_bytes) * double(n_out) / k.best / 1e9;
      std::printf("    {\"kernel\": \"%s\", \"min_thread_s\": %.6f, \"GB_per_s\": %.2f, \"max_rel_err_vs_scalar\": %.1e}%s\n",
                  k.name.c_str(), k.best, gbs, k.max_rel, i + 1 < ks.size() ? "," : "");
    }
    std::printf("  ]}%s\n", si == 0 ? "," : "");
  }
  std::printf("]}\n");
}
