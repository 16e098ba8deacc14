// Micro benchmark of the CPU MoE expert FFN in decode (backend/cpu/moe_cpu.h moe_experts_cpu, 1..4
// tokens): GB/s of the ACTIVE expert bytes (k experts × gate/up/down per distinct expert chosen) per
// call, against the same bytes read by three dense matmuls of k·F rows (the floor the expert path
// could reach with no per-expert overhead). Experts are random (a fresh top-k per call, so most are
// not in cache: n_expert × 3 matrices exceed the last-level cache). min-of-N and median over N calls;
// the experts and the dense matmuls alternate call by call (interleaved). Findings: docs/MOE.md.
// Not part of the CMake build; after building polykv_lib:
//   g++ -std=c++20 -O2 -Isrc bench/moe_experts_bench.cpp build/libpolykv_lib.a \
//       $(pkg-config --libs libpcre2-8) -lpthread -o build/moe_experts_bench
//   build/moe_experts_bench [threads=2] [calls=200] [shape=qwen3-30b-a3b|gpt-oss-20b] [type=q4_0|mxfp4|q8_0] [cpu]
// "cpu": time calls by the process's CPU time (all threads, spinning included) instead of the wall
// clock: on a shared machine it leaves out the time the OS ran other processes.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/moe_cpu.h"
#include "quant/quant.h"

using namespace polykv;
#include <ctime>

static bool g_cpu = false;
static double now_s() {
  timespec ts;
  clock_gettime(g_cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Mat {
  std::vector<uint8_t> bytes;
  WeightMatrix m;
};

static Mat random_matrix(DType t, int64_t n_in, int64_t n_out, uint32_t seed) {
  Mat w;
  const size_t rb = row_bytes(t, n_in);
  w.bytes.resize(rb * size_t(n_out));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    if (o < 64) {  // quantize a few rows, copy them around (fast setup; values do not matter)
      for (auto& v : row) v = nd(rng);
      quantize_row_ref(t, row.data(), w.bytes.data() + size_t(o) * rb, n_in);
    } else {
      std::copy_n(w.bytes.data() + size_t(o % 64) * rb, rb, w.bytes.data() + size_t(o) * rb);
    }
  }
  w.m = {t, w.bytes.data(), n_in, n_out, rb};
  pack_for_matmul(w.m);
  return w;
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 200;
  const std::string shape = argc > 3 ? argv[3] : "qwen3-30b-a3b";
  const DType type = dtype_from_name(argc > 4 ? argv[4] : "q4_0");
  g_cpu = argc > 5 && std::string(argv[5]) == "cpu";
  const bool oss = shape == "gpt-oss-20b";
  const int E = oss ? 2880 : 2048, F = oss ? 2880 : 768, ne = oss ? 32 : 128, k = oss ? 4 : 8;
  ThreadPool pool(threads);
  std::vector<Mat> store;
  store.reserve(size_t(3 * ne));
  MoeExperts ex;
  ex.n_embd = E, ex.n_ff = F;
  for (int e = 0; e < ne; ++e) {
    store.push_back(random_matrix(type, E, F, uint32_t(3 * e)));
    ex.gate.push_back(store.back().m);
    store.push_back(random_matrix(type, E, F, uint32_t(3 * e + 1)));
    ex.up.push_back(store.back().m);
    store.push_back(random_matrix(type, F, E, uint32_t(3 * e + 2)));
    ex.down.push_back(store.back().m);
  }
  // Dense equivalent of one token's k experts: gate/up [k·F × E], down as k matrices' bytes in one
  // [E × k·F] matrix; several copies so that they are not cache-resident either.
  const int n_dense = std::max(2, ne / k);
  std::vector<Mat> dg, du, dd;
  for (int i = 0; i < n_dense; ++i) {
    dg.push_back(random_matrix(type, E, int64_t(k) * F, uint32_t(1000 + i)));
    du.push_back(random_matrix(type, E, int64_t(k) * F, uint32_t(2000 + i)));
    dd.push_back(random_matrix(type, int64_t(k) * F, E, uint32_t(3000 + i)));
  }
  const double bytes_per_expert = double(ex.gate[0].row_stride * F * 2 + ex.down[0].row_stride * E);
  std::printf("[%s] %s %s, %d threads, %d experts top-%d, E %d F %d, %.2f MB per expert\n", g_cpu ? "process CPU time" : "wall clock", shape.c_str(),
              dtype_name(type), threads, ne, k, E, F, bytes_per_expert / 1e6);
  std::mt19937 rng(7);
  MoeScratch scratch;
  for (int n_tok : {1, 2, 4}) {
    std::vector<float> x(size_t(n_tok) * E, 0.1f), out(size_t(n_tok) * E);
    std::vector<int32_t> ids(size_t(n_tok) * k);
    std::vector<float> wts(ids.size(), 1.0f / float(k));
    std::vector<double> t_moe, gbs_moe, t_dense;
    for (int c = 0; c < calls; ++c) {
      std::vector<int32_t> perm(static_cast<size_t>(ne));
      for (int i = 0; i < ne; ++i) perm[size_t(i)] = i;
      int distinct = 0;
      std::vector<bool> used(static_cast<size_t>(ne), false);
      for (int t = 0; t < n_tok; ++t) {
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int j = 0; j < k; ++j) {
          ids[size_t(t * k + j)] = perm[size_t(j)];
          if (!used[size_t(perm[size_t(j)])]) used[size_t(perm[size_t(j)])] = true, ++distinct;
        }
      }
      double t0 = now_s();
      moe_experts_cpu(ex, x.data(), ids.data(), wts.data(), n_tok, k, out.data(), pool, scratch);
      const double s = now_s() - t0;
      t_moe.push_back(s);
      gbs_moe.push_back(distinct * bytes_per_expert / s / 1e9);
      const int d = c % n_dense;
      std::vector<float> g(size_t(n_tok) * k * F), u(g.size());
      t0 = now_s();
      matmul(dg[size_t(d)].m, x.data(), g.data(), n_tok, pool);
      matmul(du[size_t(d)].m, x.data(), u.data(), n_tok, pool);
      matmul(dd[size_t(d)].m, g.data(), out.data(), n_tok, pool);
      t_dense.push_back(now_s() - t0);
    }
    const double dense_bytes = k * bytes_per_expert;
    std::printf("tokens %d: experts min %.3f ms (%.1f GB/s of active bytes, best) median %.3f ms | dense same "
                "bytes (k experts) min %.3f ms (%.1f GB/s) median %.3f ms\n",
                n_tok, *std::min_element(t_moe.begin(), t_moe.end()) * 1e3,
                *std::max_element(gbs_moe.begin(), gbs_moe.end()), median(t_moe) * 1e3,
                *std::min_element(t_dense.begin(), t_dense.end()) * 1e3,
                dense_bytes / *std::min_element(t_dense.begin(), t_dense.end()) / 1e9, median(t_dense) * 1e3);
  }
  return 0;
}
