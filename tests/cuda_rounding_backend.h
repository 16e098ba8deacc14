// The CPU backend with the CUDA backend's rounding of matmul inputs, for tests that separate the CUDA
// backend's rounding from its bugs (tests/hybrid_cuda_emulation_test.cpp, tests/cuda/hybrid_layers_cuda_test.cpp).
// The CUDA backend (backend/cuda/matmul_cuda_prefill.cu) runs matmuls of more than kCudaMatvecMaxCols rows
// of f16 or quantized weights on cuBLAS or its tensor-core mat-mul with the activations converted to
// f16 (round to nearest even); f32 weights run an f32 GEMM; mat-vecs of up to 8 rows of f16 weights
// read f32 activations (quantized weights' 8-bit activations are not emulated: the fixtures are f16).
// Every other op is the CPU's. What is left between the CUDA backend and this one is summation order.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/fp16.h"

namespace polykv::test {

constexpr int kCudaMatvecMaxCols = 8;  // backend/cuda/matmul_cuda.h

// The CPU backend with the CUDA backend's roundings of matmul inputs (see the top).
class CudaRoundingBackend : public Backend {
 public:
  CudaRoundingBackend(std::unique_ptr<Backend> inner, bool round_prefill)
      : in_(std::move(inner)), round_(round_prefill) {}
  DeviceKind kind() const override { return in_->kind(); }
  std::string describe() const override { return "emulated cuda on " + in_->describe(); }
  void* allocate(size_t bytes) override { return in_->allocate(bytes); }
  void release(void* p) override { in_->release(p); }
  void upload(void* d, const void* s, size_t b) override { in_->upload(d, s, b); }
  void download(void* d, const void* s, size_t b) override { in_->download(d, s, b); }
  void synchronize() override { in_->synchronize(); }
  KvMemory& kv_memory() override { return in_->kv_memory(); }
  WeightMatrix upload_matrix(const WeightMatrix& host) override { return in_->upload_matrix(host); }
  const float* upload_floats(std::span<const float> host) override { return in_->upload_floats(host); }
  void embed(const WeightMatrix& t, const int32_t* tok, int n, float scale, float* x) override {
    in_->embed(t, tok, n, scale, x);
  }
  void matmul(const WeightMatrix& w, const float* x, float* y, int n) override {
    if (!round_ || n <= kCudaMatvecMaxCols || w.type == DType::F32) return in_->matmul(w, x, y, n);
    const size_t total = size_t(n) * size_t(w.n_in);
    rounded_.resize(total);
    for (size_t i = 0; i < total; ++i) rounded_[i] = fp16_to_f32(f32_to_fp16(x[i]));
    in_->matmul(w, rounded_.data(), y, n);
  }
  void rmsnorm(const float* x, const float* w, float* out, int rows, int cols, float eps) override {
    in_->rmsnorm(x, w, out, rows, cols, eps);
  }
  void add_bias(float* x, const float* b, int rows, int cols) override { in_->add_bias(x, b, rows, cols); }
  void add(float* x, const float* y, int64_t n) override { in_->add(x, y, n); }
  void rope(float* x, int rows, int nh, int hd, int n_rot, const int32_t* pos, const float* f, float scale,
            RopeStyle st) override {
    in_->rope(x, rows, nh, hd, n_rot, pos, f, scale, st);
  }
  void gated_activation(float* g, const float* u, int64_t n, Activation a) override { in_->gated_activation(g, u, n, a); }
  void softcap(float* x, int64_t n, float cap) override { in_->softcap(x, n, cap); }
  void gather_rows(const float* s, const int32_t* r, int n, int cols, float* d) override {
    in_->gather_rows(s, r, n, cols, d);
  }
  void begin_step(std::span<const StepSeq> seqs) override { in_->begin_step(seqs); }
  void store_kv(int layer, float* k, const float* v) override { in_->store_kv(layer, k, v); }
  void attention(int layer, const AttentionParams& p, float* q, float* out) override { in_->attention(layer, p, q, out); }
  std::vector<WeightMatrix> upload_experts(std::span<const WeightMatrix> host) override {
    return in_->upload_experts(host);
  }
  void moe_route(const float* logits, int n, const MoeRouting& r, int32_t* ids, float* weights) override {
    in_->moe_route(logits, n, r, ids, weights);
  }
  // Not rounded: what the CUDA expert kernels round is not emulated (qwen35moe figures include it).
  void moe_experts(const MoeExperts& w, const float* x, const int32_t* ids, const float* weights, int n, int k,
                   float* out) override {
    in_->moe_experts(w, x, ids, weights, n, k, out);
  }
  void add_sigmoid_gated(float* x, const float* y, const float* g, int rows, int cols) override {
    in_->add_sigmoid_gated(x, y, g, rows, cols);
  }
  void deinterleave(const float* s, int rows, int g, int a, int b, float* da, float* db) override {
    in_->deinterleave(s, rows, g, a, b, da, db);
  }
  void sigmoid_mul(float* x, const float* g, int64_t n) override { in_->sigmoid_mul(x, g, n); }
  void ssm_conv(int l, const float* w, int k, const float* x, float* out, int c) override {
    in_->ssm_conv(l, w, k, x, out, c);
  }
  void gated_delta_rule(int l, const GdnParams& p, const float* qkv, const float* al, const float* be,
                        const float* dt, const float* a, float* out) override {
    in_->gated_delta_rule(l, p, qkv, al, be, dt, a, out);
  }

 private:
  std::unique_ptr<Backend> in_;
  bool round_;
  std::vector<float> rounded_;
};

}  // namespace polykv::test
