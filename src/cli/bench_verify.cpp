// Verify-step cost curve (bench_verify.h).
#include "cli/bench_verify.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <set>

#include "core/error.h"

namespace polykv::cli {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// CPU seconds used by the whole process (all threads; includes the pool's spin-waits).
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// The 1-minute load average (the machine may be shared: a benchmark records it), or -1.
double load_average() {
  double v = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &v) != 1) v = -1;
    std::fclose(f);
  }
  return v;
}

}  // namespace

std::vector<int> parse_verify_ks(const std::string& text) {
  std::vector<int> ks;
  std::set<int> seen;
  size_t i = 0;
  while (i <= text.size()) {
    const size_t j = std::min(text.find(',', i), text.size());
    const std::string item = text.substr(i, j - i);
    int k = 0;
    size_t used = 0;
    try {
      k = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check(used == item.size() && used > 0 && k >= 1 && k <= 64, "--verify-k: '", item,
          "' is not a step width in 1..64 (give a list such as 1,2,3,4,8)");
    check(seen.insert(k).second, "--verify-k: ", k, " is listed twice");
    ks.push_back(k);
    i = j + 1;
  }
  return ks;
}

nlohmann::json bench_verify(Model& model, KvSequence& kv, const std::function<void(int)>& rollback,
                            const VerifyBenchOptions& o, std::mt19937& rng) {
  check(!o.ks.empty() && o.steps > 0 && o.reps > 0, "bench_verify: nothing to measure");
  const int n_vocab = model.config().n_vocab;
  const int k_max = *std::max_element(o.ks.begin(), o.ks.end());
  std::vector<float> logits(size_t(k_max) * size_t(n_vocab));  // [k][n_vocab]
  std::vector<int32_t> toks(static_cast<size_t>(k_max));
  auto step = [&](int k) {
    for (int i = 0; i < k; ++i) toks[size_t(i)] = int32_t(rng() % uint32_t(n_vocab));
    model.forward(std::span<const int32_t>(toks.data(), size_t(k)), kv, logits.data(), true);
    rollback(o.depth);
  };
  const double load_before = load_average();
  for (int k : o.ks) step(k);  // warm-up: scratch buffers, page faults, caches

  // [k][rep] mean step time: wall clock, and process CPU time (a second view on a loaded machine,
  // where the wall clock also counts the time other processes held the cores).
  std::vector<std::vector<double>> ms(o.ks.size()), cpu_ms(o.ks.size());
  for (int r = 0; r < o.reps; ++r)
    for (size_t ki = 0; ki < o.ks.size(); ++ki) {
      const double c0 = process_cpu_seconds();
      const auto t0 = std::chrono::steady_clock::now();
      for (int s = 0; s < o.steps; ++s) step(o.ks[ki]);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ms[ki].push_back(1e3 * secs / o.steps);
      cpu_ms[ki].push_back(1e3 * (process_cpu_seconds() - c0) / o.steps);
    }

  nlohmann::json rows = nlohmann::json::array();
  for (size_t ki = 0; ki < o.ks.size(); ++ki) {
    std::vector<double> ratio, cpu_ratio;
    for (int r = 0; r < o.reps; ++r) {
      ratio.push_back(ms[ki][size_t(r)] / ms[0][size_t(r)]);
      cpu_ratio.push_back(cpu_ms[ki][size_t(r)] / cpu_ms[0][size_t(r)]);
    }
    rows.push_back({{"k", o.ks[ki]},
                    {"step_ms", median(ms[ki])},
                    {"step_ms_min", *std::min_element(ms[ki].begin(), ms[ki].end())},
                    {"step_ms_max", *std::max_element(ms[ki].begin(), ms[ki].end())},
                    {"step_ms_reps", ms[ki]},
                    {"ratio", median(ratio)},
                    {"ratio_min", *std::min_element(ratio.begin(), ratio.end())},
                    {"ratio_max", *std::max_element(ratio.begin(), ratio.end())},
                    {"ratio_reps", ratio},
                    {"cpu_ms", median(cpu_ms[ki])},
                    {"cpu_ratio", median(cpu_ratio)},
                    {"cpu_ratio_min", *std::min_element(cpu_ratio.begin(), cpu_ratio.end())},
                    {"cpu_ratio_max", *std::max_element(cpu_ratio.begin(), cpu_ratio.end())},
                    {"cpu_ratio_reps", cpu_ratio}});
  }
  return {{"verify", rows}, {"verify_steps", o.steps}, {"verify_reps", o.reps},
          {"load_avg_1m_before", load_before}, {"load_avg_1m_after", load_average()}};
}

void print_verify_table(const nlohmann::json& r, const std::string& label) {
  std::printf("| %s | k | step ms (median) | min..max | x k=%d (median) | min..max | CPU ms | CPU x k=%d |\n",
              label.c_str(), r["verify"][0]["k"].get<int>(), r["verify"][0]["k"].get<int>());
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const auto& row : r["verify"])
    std::printf("| | %d | %.2f | %.2f..%.2f | %.3f | %.3f..%.3f | %.2f | %.3f (%.3f..%.3f) |\n", row["k"].get<int>(),
                row["step_ms"].get<double>(), row["step_ms_min"].get<double>(), row["step_ms_max"].get<double>(),
                row["ratio"].get<double>(), row["ratio_min"].get<double>(), row["ratio_max"].get<double>(),
                row["cpu_ms"].get<double>(), row["cpu_ratio"].get<double>(), row["cpu_ratio_min"].get<double>(),
                row["cpu_ratio_max"].get<double>());
  std::printf("(%d interleaved repetitions of %d steps per k; ratios taken within each repetition)\n",
              r["verify_reps"].get<int>(), r["verify_steps"].get<int>());
}

}  // namespace polykv::cli
