// A Backend that forwards every call to a CpuBackend and keeps the router logits of every MoE layer
// (moe_route's input), so that tests can measure how close a row's expert choice is to a tie: the gap
// between the k-th and the (k+1)-th largest router logit. A backend whose rounding differs from the
// CPU's by more than that gap may pick another expert for the row, which moves its log-probs by
// O(1) on the random-weight fixtures: such rows can only be held to top-1, not to a tight bound.
//
// The rule the CUDA MoE test applies (tests/cuda/moe_model_cuda_test.cpp), justified on the CPU by
// tests/moe_router_ties_test.cpp, which emulates the GPU's rounding (round_prefill_x16):
//  - a row is near-tied when, in the CPU's own run, some MoE layer's top-k gap is below kRouterTieGap
//    (the emulated GPU rounding moves router logits by less than a quarter of it, so gaps by less than
//    half of it, on rows no flip reaches: 2.1e-3 measured on qwen3moe);
//  - rows before the first near-tied row keep the tight bound (causality: a flip cannot reach them);
//  - near-tied rows get no log-prob bound (top-1 is still counted);
//  - rows after the first near-tied row get kAfterTieBound: a flipped expert at an earlier row reaches
//    them only through attention to that row's K/V (0.044 measured with the emulation, qwen3moe f16 KV).
#pragma once
#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sequence_kv.h"
#include "model/model.h"

#include "backend/cpu/cpu_backend.h"
#include "core/fp16.h"
#include "quant/quant.h"

namespace polykv::test {

class RouterProbeBackend final : public Backend {
 public:
  explicit RouterProbeBackend(int threads) : cpu_(threads) {}

  // One entry per moe_route call (one per MoE layer and forward pass), in call order: [n][n_expert].
  struct Call {
    int n = 0, n_expert = 0, n_used = 0;
    std::vector<float> logits;
    // The same logits with the router's input rounded to f16 (as a GPU's tensor-core prefill matmul
    // does), products summed in double; empty when the router had a bias or its matmul was not the
    // call before.
    std::vector<float> logits_x16;
  };
  std::vector<Call> calls;
  // When set, the input of every matmul of more than 8 rows with f16 weights is rounded to f16 first:
  // what the CUDA backend's tensor-core prefill path does (matmul_cuda_prefill.cu), the rest as the CPU.
  bool round_prefill_x16 = false;

  DeviceKind kind() const override { return DeviceKind::Cpu; }
  std::string describe() const override { return "router probe " + cpu_.describe(); }
  void* allocate(size_t bytes) override { return cpu_.allocate(bytes); }
  void release(void* p) override { cpu_.release(p); }
  void upload(void* dst, const void* src, size_t bytes) override { cpu_.upload(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { cpu_.download(dst, src, bytes); }
  void synchronize() override { cpu_.synchronize(); }
  KvMemory& kv_memory() override { return cpu_.kv_memory(); }
  WeightMatrix upload_matrix(const WeightMatrix& host) override { return cpu_.upload_matrix(host); }
  const float* upload_floats(std::span<const float> host) override { return cpu_.upload_floats(host); }
  void embed(const WeightMatrix& t, const int32_t* tokens, int n, float scale, float* x) override {
    cpu_.embed(t, tokens, n, scale, x);
  }
  void matmul(const WeightMatrix& w, const float* x, float* y, int n) override {
    last_w_ = w;
    last_x_ = x;
    last_y_ = y;
    last_n_ = n;
    if (round_prefill_x16 && n > 8 && w.type == DType::F16) {
      std::vector<float> x16(size_t(n) * size_t(w.n_in));
      for (size_t i = 0; i < x16.size(); ++i) x16[i] = fp16_to_f32(f32_to_fp16(x[i]));
      cpu_.matmul(w, x16.data(), y, n);
      return;
    }
    cpu_.matmul(w, x, y, n);
  }
  void rmsnorm(const float* x, const float* w, float* out, int rows, int cols, float eps) override {
    cpu_.rmsnorm(x, w, out, rows, cols, eps);
  }
  void add_bias(float* x, const float* b, int rows, int cols) override { cpu_.add_bias(x, b, rows, cols); }
  void add(float* x, const float* y, int64_t n) override { cpu_.add(x, y, n); }
  void rope(float* x, int rows, int n_heads, int head_dim, int n_rot, const int32_t* pos, const float* inv_freq,
            float scale, RopeStyle style) override {
    cpu_.rope(x, rows, n_heads, head_dim, n_rot, pos, inv_freq, scale, style);
  }
  void gated_activation(float* gate, const float* up, int64_t n, Activation act) override {
    cpu_.gated_activation(gate, up, n, act);
  }
  void softcap(float* x, int64_t n, float cap) override { cpu_.softcap(x, n, cap); }
  void gather_rows(const float* src, const int32_t* rows, int n, int cols, float* dst) override {
    cpu_.gather_rows(src, rows, n, cols, dst);
  }
  std::vector<WeightMatrix> upload_experts(std::span<const WeightMatrix> host) override {
    return cpu_.upload_experts(host);
  }
  void moe_route(const float* logits, int n, const MoeRouting& r, int32_t* ids, float* weights) override {
    Call c{n, r.n_expert, r.n_used, std::vector<float>(logits, logits + size_t(n) * size_t(r.n_expert)), {}};
    if (last_y_ == logits && last_n_ == n && last_w_.n_out == r.n_expert) {
      const int64_t n_in = last_w_.n_in;
      std::vector<float> w(static_cast<size_t>(n_in));
      c.logits_x16.resize(c.logits.size());
      for (int e = 0; e < r.n_expert; ++e) {
        dequantize_row_ref(last_w_.type, static_cast<const uint8_t*>(last_w_.data) + size_t(e) * last_w_.row_stride,
                           w.data(), n_in);
        for (int t = 0; t < n; ++t) {
          double s = 0;
          for (int64_t i = 0; i < n_in; ++i)
            s += double(w[size_t(i)]) * double(fp16_to_f32(f32_to_fp16(last_x_[size_t(t) * size_t(n_in) + size_t(i)])));
          c.logits_x16[size_t(t) * size_t(r.n_expert) + size_t(e)] = float(s);
        }
      }
    }
    calls.push_back(std::move(c));
    cpu_.moe_route(logits, n, r, ids, weights);
  }
  void moe_experts(const MoeExperts& w, const float* x, const int32_t* ids, const float* weights, int n, int k,
                   float* out) override {
    cpu_.moe_experts(w, x, ids, weights, n, k, out);
  }
  void add_sigmoid_gated(float* x, const float* y, const float* g, int rows, int cols) override {
    cpu_.add_sigmoid_gated(x, y, g, rows, cols);
  }
  void begin_step(std::span<const StepSeq> seqs) override { cpu_.begin_step(seqs); }
  void store_kv(int layer, float* k, const float* v) override { cpu_.store_kv(layer, k, v); }
  void attention(int layer, const AttentionParams& p, float* q, float* out) override { cpu_.attention(layer, p, q, out); }

 private:
  CpuBackend cpu_;
  WeightMatrix last_w_;  // the last matmul's operands (the router's, when moe_route follows it)
  const float* last_x_ = nullptr;
  const float* last_y_ = nullptr;
  int last_n_ = 0;
};

// The k-th minus the (k+1)-th largest of x[0..n) (k = n_used; +inf when k >= n).
inline float topk_gap(const float* x, int n, int k) {
  if (k >= n) return std::numeric_limits<float>::infinity();
  std::vector<float> v(x, x + n);
  std::nth_element(v.begin(), v.begin() + k, v.end(), std::greater<float>());  // v[k]: the (k+1)-th largest
  const float next = v[size_t(k)];
  const float kth = *std::min_element(v.begin(), v.begin() + k);
  return kth - next;
}

// Per row of the calls' sequence (rows of one forward pass; calls of every MoE layer of that pass): the
// smallest top-k gap over the layers. calls: the layers of ONE forward pass over n_rows rows.
inline std::vector<float> min_router_gap(const std::vector<RouterProbeBackend::Call>& calls, int n_rows) {
  std::vector<float> gap(size_t(n_rows), std::numeric_limits<float>::infinity());
  for (const auto& c : calls) {
    if (c.n != n_rows) continue;
    for (int t = 0; t < n_rows; ++t)
      gap[size_t(t)] = std::min(gap[size_t(t)], topk_gap(c.logits.data() + size_t(t) * c.n_expert, c.n_expert, c.n_used));
  }
  return gap;
}

constexpr float kRouterTieGap = 1.2e-2f;
constexpr double kAfterTieBound = 0.1;

// Per row: the bound of |Δ log-softmax| under the rule above (< 0: none), from the CPU's min gaps.
inline std::vector<double> row_bounds(const std::vector<float>& min_gap, double tight) {
  std::vector<double> b(min_gap.size(), tight);
  bool after = false;
  for (size_t t = 0; t < min_gap.size(); ++t) {
    const bool tied = min_gap[t] < kRouterTieGap;
    b[t] = tied ? -1.0 : after ? std::max(tight, kAfterTieBound) : tight;
    after = after || tied;
  }
  return b;
}

// One forward pass over `ids` (all logits) on a RouterProbeBackend with K and V in kv_type.
struct ProbeRun {
  int n_vocab = 0;
  std::vector<float> logits;  // [ids][n_vocab]
  std::vector<RouterProbeBackend::Call> calls;
};
inline ProbeRun probe_run(const std::string& gguf, const std::vector<int32_t>& ids, const std::string& kv_type,
                          bool round_prefill_x16) {
  RouterProbeBackend be(2);
  be.round_prefill_x16 = round_prefill_x16;
  auto model = Model::load(gguf, be);
  SequenceKvOptions o;
  o.k_type = kv_type;
  o.v_type = kv_type;
  o.max_tokens = int(ids.size()) + 16;
  o.block_tokens = 16;
  auto kv = make_sequence_kv(*model, o);
  ProbeRun r;
  r.n_vocab = model->config().n_vocab;
  r.logits.assign(ids.size() * size_t(r.n_vocab), 0.0f);
  model->forward(ids, *kv, r.logits.data(), true);
  r.calls = std::move(be.calls);
  return r;
}

// The token ids of a fixture's ref.json.
inline std::vector<int32_t> fixture_ref_ids(const std::string& ref_json) {
  std::ifstream in(ref_json);
  return nlohmann::json::parse(in)["ref"]["ids"].get<std::vector<int32_t>>();
}

}  // namespace polykv::test
