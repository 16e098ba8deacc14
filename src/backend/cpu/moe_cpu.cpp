#include "backend/cpu/moe_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "core/error.h"

namespace polykv {

void moe_route_cpu(const float* logits, int n, const MoeRouting& r, int32_t* ids, float* weights) {
  const int ne = r.n_expert, k = r.n_used;
  check(k >= 1 && k <= ne, "moe_route: ", k, " experts per token out of ", ne);
  std::vector<int32_t> order(static_cast<size_t>(ne));
  for (int t = 0; t < n; ++t) {
    const float* l = logits + int64_t(t) * ne;
    std::iota(order.begin(), order.end(), 0);
    // The k largest logits, descending; ties go to the lower index.
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    int32_t* id = ids + int64_t(t) * k;
    float* w = weights + int64_t(t) * k;
    const double mx = l[order[0]];  // the largest logit: every exp below is <= 1
    double sum = 0;
    if (r.gating == MoeGating::SoftmaxTopK)
      for (int e = 0; e < ne; ++e) sum += std::exp(double(l[e]) - mx);
    else
      for (int j = 0; j < k; ++j) sum += std::exp(double(l[order[size_t(j)]]) - mx);
    for (int j = 0; j < k; ++j) {
      id[j] = order[size_t(j)];
      w[j] = float(std::exp(double(l[id[j]]) - mx) / sum);
    }
  }
}

void moe_activation(float* gate, const float* up, int64_t n, MoeActivation act, float alpha, float limit) {
  if (act == MoeActivation::SwiGLU) {
    gated_activation(gate, up, n, Activation::SiLU);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    gate[i] = (u + 1.0f) * (g / (1.0f + std::exp(-alpha * g)));
  }
}

void moe_experts_cpu(const MoeExperts& w, const float* x, const int32_t* ids, const float* weights, int n, int k,
                     float* out, ThreadPool& pool, MoeScratch& s) {
  const int ne = w.n_expert(), E = w.n_embd, F = w.n_ff;
  const int64_t n_slots = int64_t(n) * k;
  // Group the slots by expert (counting sort; token order inside an expert).
  s.count.assign(size_t(ne) + 1, 0);
  for (int64_t i = 0; i < n_slots; ++i) {
    check(ids[i] >= 0 && ids[i] < ne, "moe_experts: expert ", ids[i], " out of range [0, ", ne, ")");
    ++s.count[size_t(ids[i]) + 1];
  }
  int max_rows = 0;
  for (int e = 0; e < ne; ++e) max_rows = std::max(max_rows, s.count[size_t(e) + 1]);
  std::partial_sum(s.count.begin(), s.count.end(), s.count.begin());  // count[e] = first slot of e
  s.slots.resize(size_t(n_slots));
  {
    std::vector<int32_t> next(s.count.begin(), s.count.end() - 1);
    for (int64_t i = 0; i < n_slots; ++i) s.slots[size_t(next[size_t(ids[i])]++)] = int32_t(i);
  }
  const size_t mr = size_t(max_rows);
  if (s.xg.size() < mr * size_t(E)) s.xg.resize(mr * size_t(E));
  if (s.gate.size() < mr * size_t(F)) s.gate.resize(mr * size_t(F));
  if (s.up.size() < mr * size_t(F)) s.up.resize(mr * size_t(F));
  if (s.y.size() < size_t(n_slots) * size_t(E)) s.y.resize(size_t(n_slots) * size_t(E));

  // One expert's products over its m gathered rows: gate / up, the activation, down, each row's result into its
  // slot of y. xg [m][E] (gathered rows, then the down outputs), gate / up [m][F]. mm is matmul or matmul_serial
  // (the same bits).
  const auto expert = [&](int e, float* xg, float* gate, float* up, auto&& mm) {
    const int b = s.count[size_t(e)], m = s.count[size_t(e) + 1] - b;
    const int32_t* sl = s.slots.data() + b;
    for (int i = 0; i < m; ++i) std::copy_n(x + int64_t(sl[i] / k) * E, E, xg + size_t(i) * size_t(E));
    mm(w.gate[size_t(e)], xg, gate, m);  // [m][F]
    mm(w.up[size_t(e)], xg, up, m);      // [m][F]
    for (int i = 0; i < m; ++i) {
      float* g = gate + size_t(i) * size_t(F);
      float* u = up + size_t(i) * size_t(F);
      if (w.gate_bias) add_inplace(g, w.gate_bias + int64_t(e) * F, F);
      if (w.up_bias) add_inplace(u, w.up_bias + int64_t(e) * F, F);
      moe_activation(g, u, F, w.act, w.alpha, w.limit);
    }
    mm(w.down[size_t(e)], gate, xg, m);  // [m][E] (xg is free again)
    for (int i = 0; i < m; ++i) {
      float* d = xg + size_t(i) * size_t(E);
      if (w.down_bias) add_inplace(d, w.down_bias + int64_t(e) * E, E);
      std::copy_n(d, E, s.y.data() + size_t(sl[i]) * size_t(E));
    }
  };
  s.active.clear();
  for (int e = 0; e < ne; ++e)
    if (s.count[size_t(e) + 1] > s.count[size_t(e)]) s.active.push_back(e);  // no token chose the others: not read
  const int n_active = int(s.active.size());
  static const bool expert_parallel = [] {  // POLYKV_MOE_EXPERT_PARALLEL=0: every step splits each product (A/B)
    const char* e = std::getenv("POLYKV_MOE_EXPERT_PARALLEL");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  if (expert_parallel && max_rows <= kMoeExpertParallelRows && n_active >= 2 && pool.size() > 1) {
    // Decode and verify steps: a few rows per expert, so each expert's three products are small (a q4_0 expert
    // of Qwen3-30B-A3B: 0.9 MB a matrix) and splitting each over the threads paid a dispatch per product. Here
    // the threads take whole experts instead: one dispatch a step, every expert's rows on one thread, its own
    // scratch.
    const size_t xs = mr * size_t(E), fs = mr * size_t(F);
    if (s.pxg.size() < size_t(n_active) * xs) s.pxg.resize(size_t(n_active) * xs);
    if (s.pgate.size() < size_t(n_active) * fs) s.pgate.resize(size_t(n_active) * fs);
    if (s.pup.size() < size_t(n_active) * fs) s.pup.resize(size_t(n_active) * fs);
    pool.parallel_for(n_active, [&](int64_t a0, int64_t a1) {
      for (int64_t a = a0; a < a1; ++a)
        expert(s.active[size_t(a)], s.pxg.data() + size_t(a) * xs, s.pgate.data() + size_t(a) * fs,
               s.pup.data() + size_t(a) * fs,
               [](const WeightMatrix& m, const float* in, float* out, int rows) { matmul_serial(m, in, out, rows); });
    });
  } else {
    for (int e : s.active)
      expert(e, s.xg.data(), s.gate.data(), s.up.data(),
             [&](const WeightMatrix& m, const float* in, float* out, int rows) { matmul(m, in, out, rows, pool); });
  }
  // Every token sums its slots in slot order (x is no longer read: out may alias it).
  for (int t = 0; t < n; ++t) {
    float* o = out + int64_t(t) * E;
    const float* w0 = weights + int64_t(t) * k;
    for (int j = 0; j < k; ++j) {
      const float* y = s.y.data() + (size_t(t) * size_t(k) + size_t(j)) * size_t(E);
      const float wj = w0[j];
      if (j == 0)
        for (int c = 0; c < E; ++c) o[c] = wj * y[c];
      else
        for (int c = 0; c < E; ++c) o[c] += wj * y[c];
    }
  }
}

}  // namespace polykv
