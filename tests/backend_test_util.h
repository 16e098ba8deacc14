// A Backend that forwards every call to a CpuBackend and counts them: tests check that the model
// runs through the seam (and only through it), and can give it another KV memory (a stand-in for a
// device's) to exercise the code paths a GPU backend takes.
#pragma once
#include <map>
#include <string>

#include "backend/cpu/cpu_backend.h"

namespace polykv::test {

class CountingBackend final : public Backend {
 public:
  // kind: what it tells the model it is (DeviceKind::Cuda makes the model take a device's paths:
  // unpacked weights, logits through the workspace and download()); kv_memory: its KV memory
  // (nullptr: host).
  explicit CountingBackend(int threads, DeviceKind kind = DeviceKind::Cpu, KvMemory* kv_memory = nullptr)
      : cpu_(threads), kind_(kind), kv_memory_(kv_memory) {}

  std::map<std::string, int> calls;  // op name -> times called

  DeviceKind kind() const override { return kind_; }
  std::string describe() const override { return "counting " + cpu_.describe(); }
  void* allocate(size_t bytes) override { return ++calls["allocate"], cpu_.allocate(bytes); }
  void release(void* p) override { ++calls["release"], cpu_.release(p); }
  void upload(void* dst, const void* src, size_t bytes) override { ++calls["upload"], cpu_.upload(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override {
    ++calls["download"], cpu_.download(dst, src, bytes);
  }
  void synchronize() override { ++calls["synchronize"], cpu_.synchronize(); }
  KvMemory& kv_memory() override { return kv_memory_ ? *kv_memory_ : cpu_.kv_memory(); }
  WeightMatrix upload_matrix(const WeightMatrix& host) override {
    return ++calls["upload_matrix"], cpu_.upload_matrix(host);
  }
  const float* upload_floats(std::span<const float> host) override {
    return ++calls["upload_floats"], cpu_.upload_floats(host);
  }
  void embed(const WeightMatrix& t, const int32_t* tokens, int n, float scale, float* x) override {
    ++calls["embed"], cpu_.embed(t, tokens, n, scale, x);
  }
  void matmul(const WeightMatrix& w, const float* x, float* y, int n) override {
    ++calls["matmul"], cpu_.matmul(w, x, y, n);
  }
  void rmsnorm(const float* x, const float* w, float* out, int rows, int cols, float eps) override {
    ++calls["rmsnorm"], cpu_.rmsnorm(x, w, out, rows, cols, eps);
  }
  void add_bias(float* x, const float* b, int rows, int cols) override {
    ++calls["add_bias"], cpu_.add_bias(x, b, rows, cols);
  }
  void add(float* x, const float* y, int64_t n) override { ++calls["add"], cpu_.add(x, y, n); }
  void rope(float* x, int rows, int n_heads, int head_dim, int n_rot, const int32_t* pos, const float* inv_freq,
            float scale, RopeStyle style) override {
    ++calls["rope"], cpu_.rope(x, rows, n_heads, head_dim, n_rot, pos, inv_freq, scale, style);
  }
  void gated_activation(float* gate, const float* up, int64_t n, Activation act) override {
    ++calls["gated_activation"], cpu_.gated_activation(gate, up, n, act);
  }
  void softcap(float* x, int64_t n, float cap) override { ++calls["softcap"], cpu_.softcap(x, n, cap); }
  void gather_rows(const float* src, const int32_t* rows, int n, int cols, float* dst) override {
    ++calls["gather_rows"], cpu_.gather_rows(src, rows, n, cols, dst);
  }
  void begin_step(std::span<const StepSeq> seqs) override { ++calls["begin_step"], cpu_.begin_step(seqs); }
  void store_kv(int layer, float* k, const float* v) override { ++calls["store_kv"], cpu_.store_kv(layer, k, v); }
  void attention(int layer, const AttentionParams& p, float* q, float* out) override {
    ++calls["attention"], cpu_.attention(layer, p, q, out);
  }

 private:
  CpuBackend cpu_;
  DeviceKind kind_;
  KvMemory* kv_memory_;
};

// Host bytes that claim not to be host-accessible, as a device's KV memory would.
class FakeDeviceKvMemory final : public KvMemory {
 public:
  void* allocate(size_t bytes) override { return host_kv_memory().allocate(bytes); }
  void release(void* p) override { host_kv_memory().release(p); }
  void copy(void* dst, const void* src, size_t bytes) override { host_kv_memory().copy(dst, src, bytes); }
  bool host_accessible() const override { return false; }
  const char* name() const override { return "fake-device"; }
};

}  // namespace polykv::test
