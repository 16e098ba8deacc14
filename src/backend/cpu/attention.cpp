#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/kv_row_ops.h"
#include "core/error.h"

namespace polykv {
namespace {

// First key position visible to a query at position qpos.
int first_visible(const AttentionParams& p, int qpos) { return p.window > 0 ? std::max(0, qpos - p.window + 1) : 0; }

}  // namespace

void attention(const AttentionParams& p, const KvLayerView& kv, int pos0, int n_q, const float* q, float* out,
               ThreadPool& pool) {
  const int group = p.n_head / kv.n_head_kv;
  const int hd = kv.head_dim, hdv = kv.head_dim_v;
  const KvRowOps& ops = kv_row_ops();
  const size_t k_elem = kv.k_token_bytes / size_t(kv.n_head_kv * hd);  // bytes per K value (f16/f32/bf16)
  const size_t v_elem = kv.v_token_bytes / size_t(kv.n_head_kv * hdv);
  // One task per (query token, KV head): the group's query heads share every K/V row read.
  const int64_t n_tasks = int64_t(n_q) * kv.n_head_kv;
  pool.parallel_for(n_tasks, [&](int64_t task_begin, int64_t task_end) {
    std::vector<float> scores;  // [group][n_keys]
    for (int64_t task = task_begin; task < task_end; ++task) {
      const int i = int(task / kv.n_head_kv), g = int(task % kv.n_head_kv);
      const int qpos = pos0 + i;
      const int lo = first_visible(p, qpos), n_keys = qpos - lo + 1;
      scores.resize(size_t(group) * size_t(n_keys));
      for (int j = 0; j < n_keys; ++j) {
        const uint8_t* krow = kv.k_row(lo + j) + size_t(g) * hd * k_elem;
        for (int h = 0; h < group; ++h) {
          const float* qh = q + (int64_t(i) * p.n_head + int64_t(g) * group + h) * hd;
          scores[size_t(h) * n_keys + j] = ops.dot(kv.k_type, krow, qh, hd) * p.scale;
        }
      }
      for (int h = 0; h < group; ++h) {
        float* s = scores.data() + size_t(h) * n_keys;
        if (p.softcap > 0)
          for (int j = 0; j < n_keys; ++j) s[j] = p.softcap * std::tanh(s[j] / p.softcap);
        float mx = -INFINITY;
        for (int j = 0; j < n_keys; ++j) mx = std::max(mx, s[j]);
        float sum = 0;
        for (int j = 0; j < n_keys; ++j) sum += (s[j] = std::exp(s[j] - mx));
        const float inv = 1.0f / sum;
        for (int j = 0; j < n_keys; ++j) s[j] *= inv;
        float* o = out + (int64_t(i) * p.n_head + int64_t(g) * group + h) * hdv;
        std::fill(o, o + hdv, 0.0f);
      }
      for (int j = 0; j < n_keys; ++j) {
        const uint8_t* vrow = kv.v_row(lo + j) + size_t(g) * hdv * v_elem;
        for (int h = 0; h < group; ++h) {
          float* o = out + (int64_t(i) * p.n_head + int64_t(g) * group + h) * hdv;
          ops.axpy(kv.v_type, scores[size_t(h) * n_keys + j], vrow, o, hdv);
        }
      }
    }
  });
}

void attention_ref(const AttentionParams& p, const KvLayerView& kv, int pos0, int n_q, const float* q, float* out) {
  const int group = p.n_head / kv.n_head_kv;
  const int hd = kv.head_dim, hdv = kv.head_dim_v;
  const KvRowOps& ops = kv_row_ops_scalar();
  const size_t k_elem = kv.k_token_bytes / size_t(kv.n_head_kv * hd);
  const size_t v_elem = kv.v_token_bytes / size_t(kv.n_head_kv * hdv);
  std::vector<float> krow(static_cast<size_t>(hd)), vrow(static_cast<size_t>(hdv));
  for (int i = 0; i < n_q; ++i) {
    const int qpos = pos0 + i, lo = first_visible(p, qpos);
    for (int h = 0; h < p.n_head; ++h) {
      const int g = h / group;
      const float* qh = q + (int64_t(i) * p.n_head + h) * hd;
      std::vector<double> s;
      for (int k = lo; k <= qpos; ++k) {
        std::fill(krow.begin(), krow.end(), 0.0f);
        ops.axpy(kv.k_type, 1.0f, kv.k_row(k) + size_t(g) * hd * k_elem, krow.data(), hd);  // decode the row
        double d = 0;
        for (int c = 0; c < hd; ++c) d += double(qh[c]) * krow[size_t(c)];
        d *= p.scale;
        if (p.softcap > 0) d = p.softcap * std::tanh(d / p.softcap);
        s.push_back(d);
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      std::vector<double> acc(size_t(hdv), 0.0);
      for (int k = lo; k <= qpos; ++k) {
        const uint8_t* vr = kv.v_row(k) + size_t(g) * hdv * v_elem;
        std::fill(vrow.begin(), vrow.end(), 0.0f);
        ops.axpy(kv.v_type, 1.0f, vr, vrow.data(), hdv);
        for (int c = 0; c < hdv; ++c) acc[size_t(c)] += s[size_t(k - lo)] / sum * vrow[size_t(c)];
      }
      float* o = out + (int64_t(i) * p.n_head + h) * hdv;
      for (int c = 0; c < hdv; ++c) o[c] = float(acc[size_t(c)]);
    }
  }
}

}  // namespace polykv
