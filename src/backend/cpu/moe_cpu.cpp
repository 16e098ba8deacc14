#include "backend/cpu/moe_cpu.h"

#include <algorithm>
#include <cmath>
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

  for (int e = 0; e < ne; ++e) {
    const int b = s.count[size_t(e)], m = s.count[size_t(e) + 1] - b;
    if (m == 0) continue;  // no token chose e: its weights are not read
    const int32_t* sl = s.slots.data() + b;
    for (int i = 0; i < m; ++i) std::copy_n(x + int64_t(sl[i] / k) * E, E, s.xg.data() + size_t(i) * size_t(E));
    matmul(w.gate[size_t(e)], s.xg.data(), s.gate.data(), m, pool);  // [m][F]
    matmul(w.up[size_t(e)], s.xg.data(), s.up.data(), m, pool);      // [m][F]
    for (int i = 0; i < m; ++i) {
      float* g = s.gate.data() + size_t(i) * size_t(F);
      float* u = s.up.data() + size_t(i) * size_t(F);
      if (w.gate_bias) add_inplace(g, w.gate_bias + int64_t(e) * F, F);
      if (w.up_bias) add_inplace(u, w.up_bias + int64_t(e) * F, F);
      moe_activation(g, u, F, w.act, w.alpha, w.limit);
    }
    matmul(w.down[size_t(e)], s.gate.data(), s.xg.data(), m, pool);  // [m][E] (xg is free again)
    for (int i = 0; i < m; ++i) {
      float* d = s.xg.data() + size_t(i) * size_t(E);
      if (w.down_bias) add_inplace(d, w.down_bias + int64_t(e) * E, E);
      std::copy_n(d, E, s.y.data() + size_t(sl[i]) * size_t(E));
    }
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
