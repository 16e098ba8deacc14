// Ternary mat-vec benchmark (issue #11: "ternary mat-vec at >= 80% of the bandwidth floor").
// For each type, copies of an n_out x n_in matrix (default 14336 x 4096, an FFN up/gate projection)
// totalling >= --mib MiB (far past the L3: every call reads DRAM) are multiplied by 1 (and --tokens)
// activation rows and each count of --tokens (a comma list, default 2,4,8: small batches such as a
// speculative verify step), one copy per matmul() call, with the same thread pool. GB/s = weight bytes / time.
// The floor is the machine's read bandwidth as `polykv bench` measures it (measure_read_bandwidth,
// core/sysinfo.h) with the same threads, measured in every repetition; the types and the bandwidth
// probe are interleaved within each repetition so that a disturbance on a shared machine hits them
// alike. Prints one JSON object (per type and repetition: GB/s and its fraction of that
// repetition's bandwidth). Weights are random bytes with finite fp16 scales: the kernels' work does
// not depend on the values. Also prints each type's one-core compute ceiling per batch size
// (hot_core_gbs: GB/s of weights, a batch reading each weight once). Built and
// run by bench/ternary_bench.sh.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/packed_weights.h"
#include "backend/cpu/ternary_kernels.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "core/sysinfo.h"
#include "core/thread_pool.h"

using namespace polykv;

namespace {

struct Copies {
  DType type;
  size_t matrix_bytes = 0;  // file bytes of one copy (a packed copy has as many): the floor's byte count
  // The matrices' bytes; in transparent huge pages (cpu::alloc_packed_bytes) unless --thp 0, as the engine
  // holds its weights since 2026-12-04 (matmul.h, pack_for_matmul).
  std::unique_ptr<uint8_t, void (*)(void*)> buf{nullptr, nullptr};
  std::vector<uint8_t> bytes;
  uint8_t* data = nullptr;  // buf or bytes
  size_t size = 0;
  std::vector<WeightMatrix> ws;
};

bool g_thp = true;  // --thp 0: the matrices in ordinary pages (std::vector)

Copies make_copies(DType t, int64_t n_in, int64_t n_out, size_t total_bytes) {
  Copies c;
  c.type = t;
  const size_t rb = row_bytes(t, n_in);
  c.matrix_bytes = rb * size_t(n_out);
  const size_t n = std::max<size_t>(1, (total_bytes + c.matrix_bytes - 1) / c.matrix_bytes);
  c.size = n * c.matrix_bytes;
  if (g_thp) {
    c.buf = cpu::alloc_packed_bytes(c.size);
    c.data = c.buf.get();
  } else {
    c.bytes.resize(c.size);
    c.data = c.bytes.data();
  }
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i + 8 <= c.size; i += 8) {  // xorshift64: fast random bytes
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    std::memcpy(&c.data[i], &s, 8);
  }
  const DTypeInfo& info = dtype_info(t);
  const uint16_t d = f32_to_fp16(0.01f);
  for (size_t b = 0; b < c.size / size_t(info.type_size); ++b)  // the scale is each block's last field
    std::memcpy(&c.data[(b + 1) * size_t(info.type_size) - 2], &d, 2);
  for (size_t k = 0; k < n; ++k) {
    c.ws.push_back({t, c.data + k * c.matrix_bytes, n_in, n_out, rb});
    pack_for_matmul(c.ws.back());  // as the engine does (q4_0 / q8_0 ...; no-op for the ternary types)
  }
  return c;
}

double thread_cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Seconds for one pass over every copy, n_tok tokens each; the best of `sweeps` passes.
double sweep_seconds(const Copies& c, const std::vector<float>& x, std::vector<float>& y, int n_tok, ThreadPool& pool,
                     int sweeps) {
  double best = 1e30;
  for (int s = 0; s < sweeps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    for (const WeightMatrix& w : c.ws) matmul(w, x.data(), y.data(), n_tok, pool);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// Compute ceiling: GB/s of weights one core sustains on an L2-resident matrix (the first 512 rows of
// the first copy), one thread, timed by that thread's CPU time (time the OS gave to other processes
// is left out: meaningful on a loaded machine). Best of 20 calls.
double hot_core_gbs(const Copies& c, const std::vector<float>& x, std::vector<float>& y, int n_tok) {
  ThreadPool one(1);
  WeightMatrix w = c.ws[0];
  w.n_out = std::min<int64_t>(w.n_out, 512);
  auto cpu_now = thread_cpu_now;
  matmul(w, x.data(), y.data(), n_tok, one);
  double best = 1e30;
  for (int r = 0; r < 20; ++r) {
    const double t0 = cpu_now();
    matmul(w, x.data(), y.data(), n_tok, one);
    best = std::min(best, cpu_now() - t0);
  }
  return double(w.row_stride) * double(w.n_out) / best / 1e9;
}

// One core streaming from DRAM, timed by the thread's CPU time (so usable on a loaded machine as long
// as the others do not use the memory bandwidth): GB/s of weights over every copy, n_tok tokens, best
// of `sweeps`. The one-thread pool runs the work on the calling thread.
double cold_core_gbs(const Copies& c, const std::vector<float>& x, std::vector<float>& y, int n_tok, int sweeps) {
  ThreadPool one(1);
  double best = 1e30;
  for (int s = 0; s < sweeps; ++s) {
    const double t0 = thread_cpu_now();
    for (const WeightMatrix& w : c.ws) matmul(w, x.data(), y.data(), n_tok, one);
    best = std::min(best, thread_cpu_now() - t0);
  }
  return double(c.matrix_bytes) * double(c.ws.size()) / best / 1e9;
}

// The same for a plain read of 1 GiB (measure_read_bandwidth's loop) on one core.
double cold_core_read_gbs() {
  const size_t n = (size_t(1) << 30) / 8;
  std::vector<uint64_t> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = i;
  double best = 1e30;
  volatile uint64_t sink = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const double t0 = thread_cpu_now();
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 4 <= n; i += 4) a0 += buf[i], a1 += buf[i + 1], a2 += buf[i + 2], a3 += buf[i + 3];
    sink = sink + (a0 ^ a1 ^ a2 ^ a3);
    best = std::min(best, thread_cpu_now() - t0);
  }
  return double(n * 8) / best / 1e9;
}

// --paired N: N rounds of one read pass of 1 GiB (measure_read_bandwidth's loop, the same threads)
// followed by one 1-token pass over each type's copies, printed as JSON rows [read GB/s, GB/s per
// type]. Each round's ratios use the read pass just before it: on a host whose bandwidth drifts from
// minute to minute (docs/TERNARY.md), the best of 5 read passes against the best of 2 kernel passes
// (the repetitions above) is biased towards a high floor. bench/ternary_paired_ab.sh alternates two
// builds of this mode.
int paired_passes(const std::vector<Copies>& all, const std::vector<float>& x, std::vector<float>& y, ThreadPool& pool,
                  int rounds) {
  const size_t n = (size_t(1) << 30) / 8;
  const auto mem = cpu::alloc_packed_bytes(n * 8);  // huge pages, as measure_read_bandwidth's buffer
  uint64_t* buf = reinterpret_cast<uint64_t*>(mem.get());
  pool.parallel_for(int64_t(n), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf[size_t(i)] = uint64_t(i);
  });
  read_pass_bandwidth(pool, buf, n);  // warm-up
  std::printf("{\"matmul_isa\": \"%s\", \"threads\": %d, \"columns\": [\"read\"", matmul_isa(), pool.size());
  for (const Copies& c : all) std::printf(", \"%s\"", dtype_name(c.type));
  std::printf("],\n \"rounds\": [");
  for (int r = 0; r < rounds; ++r) {
    std::printf("%s\n  [%.2f", r ? "," : "", read_pass_bandwidth(pool, buf, n) / 1e9);
    for (const Copies& c : all)
      std::printf(", %.2f", double(c.matrix_bytes) * double(c.ws.size()) / sweep_seconds(c, x, y, 1, pool, 1) / 1e9);
    std::printf("]");
    std::fflush(stdout);
  }
  std::printf("]}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 3;
  std::string tokens_list = "2,4,8";
  int64_t n_in = 4096, n_out = 14336;
  size_t mib = 512;
  bool cold = true;  // --cold 0 skips the one-core DRAM figures
  bool ab = true;    // --ab 0 skips the old kernels
  std::string types = "tq1_0,tq2_0,ptq1_0";
  std::string old_kind = "novbmi";  // --old: what the old_ variant is (see set_old below)
  int paired = 0;                   // --paired N: N paired passes instead (see paired_passes)
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--threads") threads = std::atoi(v.c_str());
    else if (a == "--reps") reps = std::atoi(v.c_str());
    else if (a == "--tokens") tokens_list = v;
    else if (a == "--n-in") n_in = std::atoll(v.c_str());
    else if (a == "--n-out") n_out = std::atoll(v.c_str());
    else if (a == "--mib") mib = size_t(std::atoll(v.c_str()));
    else if (a == "--types") types = v;
    else if (a == "--cold") cold = std::atoi(v.c_str()) != 0;
    else if (a == "--ab") ab = std::atoi(v.c_str()) != 0;
    else if (a == "--old") old_kind = v;
    else if (a == "--paired") paired = std::atoi(v.c_str());
    else if (a == "--thp") g_thp = std::atoi(v.c_str()) != 0;
    else return std::fprintf(stderr, "unknown option %s\n", a.c_str()), 2;
  }
  std::vector<int> tokens;  // batch sizes besides 1
  for (size_t p = 0; p < tokens_list.size();) {
    const size_t e = std::min(tokens_list.find(',', p), tokens_list.size());
    const int k = std::atoi(tokens_list.substr(p, e - p).c_str());
    if (k < 1) return std::fprintf(stderr, "bad --tokens %s\n", tokens_list.c_str()), 2;
    tokens.push_back(k);
    p = e + 1;
  }
  if (old_kind != "novbmi" && old_kind != "pre01f") return std::fprintf(stderr, "bad --old %s\n", old_kind.c_str()), 2;
  // The old_ variant: "novbmi" (default) = the kernels of 2026-12-01f (no VBMI kernels,
  // set_ternary_vbmi_kernels(false)); "pre01f" = as before 2026-12-01f (set_ternary_old_kernels).
  auto set_old = [&](bool old) {
    if (old_kind == "novbmi") cpu::set_ternary_vbmi_kernels(old ? 0 : -1);  // new: the default choice
    else cpu::set_ternary_old_kernels(old);
  };
  ThreadPool pool(threads);
  std::vector<Copies> all;
  for (size_t p = 0; p <= types.size();) {
    const size_t e = std::min(types.find(',', p), types.size());
    all.push_back(make_copies(dtype_from_name(types.substr(p, e - p)), n_in, n_out, mib << 20));
    p = e + 1;
  }
  const int max_tok = std::max(1, *std::max_element(tokens.begin(), tokens.end()));
  std::vector<float> x(size_t(n_in) * size_t(max_tok)), y(size_t(n_out) * size_t(max_tok));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 2654435761u % 2001) - 1000) / 1000.0f;
  for (const Copies& c : all) sweep_seconds(c, x, y, 1, pool, 1);  // warm-up: page faults, scratch
  if (paired > 0) return paired_passes(all, x, y, pool, paired);

  std::printf("{\"old\": \"%s\", \"matmul_isa\": \"%s\", \"threads\": %d, \"n_in\": %lld, \"n_out\": %lld, \"tokens\": \"1,%s\",\n",
              old_kind.c_str(), matmul_isa(), threads, (long long)n_in, (long long)n_out, tokens_list.c_str());
  // Variants: "" = the current kernels, "old_" = see --old (set_old), run
  // one after the other within every repetition (--ab 0: the current ones only).
  std::vector<std::pair<const char*, bool>> variants = {{"", false}};
  if (ab) variants.push_back({"old_", true});
  std::printf(" \"reps\": [\n");
  for (int r = 0; r < reps; ++r) {
    const double bw = measure_read_bandwidth(pool) / 1e9;
    std::printf("  {\"bandwidth_gbs\": %.2f, \"types\": {", bw);
    for (size_t k = 0; k < all.size(); ++k) {
      const Copies& c = all[k];
      const double total = double(c.matrix_bytes) * double(c.ws.size());
      std::printf("%s\n    \"%s\": {\"matrix_mib\": %.2f, \"copies\": %zu", k ? "," : "", dtype_name(c.type),
                  double(c.matrix_bytes) / 1048576.0, c.ws.size());
      for (const auto& [pre, old] : variants) {
        set_old(old);
        const double s1 = sweep_seconds(c, x, y, 1, pool, 2);
        std::printf(", \"%sgbs_1tok\": %.2f, \"%sfrac_bw_1tok\": %.3f", pre, total / s1 / 1e9, pre, total / s1 / 1e9 / bw);
        for (int nt : tokens) {  // GB/s of weights: a batch reads each weight once
          const double sn = sweep_seconds(c, x, y, nt, pool, 1);
          std::printf(", \"%sgbs_%dtok\": %.2f, \"%sfrac_bw_%dtok\": %.3f", pre, nt, total / sn / 1e9, pre, nt,
                      total / sn / 1e9 / bw);
        }
      }
      set_old(false);
      std::printf("}");
    }
    std::printf("}}%s\n", r + 1 < reps ? "," : "");
    std::fflush(stdout);
  }
  // Compute ceilings per batch size ("hot_core_gbs": {"tq1_0": {"1": .., "2": ..}}, "old_hot_core_gbs").
  std::printf(" ]");
  for (const auto& [pre, old] : variants) {
    set_old(old);
    std::printf(",\n \"%shot_core_gbs\": {", pre);
    for (size_t k = 0; k < all.size(); ++k) {
      std::printf("%s\"%s\": {\"1\": %.2f", k ? ", " : "", dtype_name(all[k].type), hot_core_gbs(all[k], x, y, 1));
      for (int nt : tokens) std::printf(", \"%d\": %.2f", nt, hot_core_gbs(all[k], x, y, nt));
      std::printf("}");
    }
    std::printf("}");
    if (cold) {  // one core from DRAM, thread CPU time ("cold_core_gbs": {"read": .., "tq1_0": {"1": ..}})
      std::printf(",\n \"%scold_core_gbs\": {\"read\": %.2f", pre, cold_core_read_gbs());
      for (const Copies& c : all) {
        std::printf(", \"%s\": {\"1\": %.2f", dtype_name(c.type), cold_core_gbs(c, x, y, 1, 2));
        for (int nt : tokens) std::printf(", \"%d\": %.2f", nt, cold_core_gbs(c, x, y, nt, 1));
        std::printf("}");
      }
      std::printf("}");
    }
  }
  set_old(false);
  std::printf("}\n");
  return 0;
}
