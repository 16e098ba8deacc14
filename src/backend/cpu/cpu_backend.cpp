#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>

#include "backend/cpu/ops.h"
#include "core/argmax_ref.h"
#include "core/error.h"
#include "core/isa.h"
#include "core/sysinfo.h"
#include "kv/recurrent_state.h"
#include "quant/quant.h"

namespace polykv {
namespace {

constexpr std::align_val_t kAlign{64};  // one cache line, a full AVX-512 vector

}  // namespace

// active_isa() throws for an unusable POLYKV_ISA: the error comes before any work.
CpuBackend::CpuBackend(int threads) : own_pool_(std::make_unique<ThreadPool>(threads)), pool_(own_pool_.get()) {
  active_isa();
}

CpuBackend::CpuBackend(ThreadPool& pool) : pool_(&pool) { active_isa(); }

CpuBackend::~CpuBackend() = default;

std::string CpuBackend::describe() const {
  return std::string("cpu (") + matmul_isa() + ", " + std::to_string(pool_->size()) + " threads)";
}

double CpuBackend::measure_bandwidth() { return measure_read_bandwidth(*pool_); }

void* CpuBackend::allocate(size_t bytes) {
  void* p = ::operator new(std::max<size_t>(bytes, 1), kAlign, std::nothrow);
  check(p != nullptr, "cannot allocate ", (bytes + (1u << 20) - 1) >> 20, " MiB of host memory");
  return p;
}

void CpuBackend::release(void* p) { ::operator delete(p, kAlign, std::nothrow); }

void CpuBackend::upload(void* dst, const void* src_host, size_t bytes) {
  if (bytes) std::memcpy(dst, src_host, bytes);
}

void CpuBackend::download(void* dst_host, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst_host, src, bytes);
}

KvMemory& CpuBackend::kv_memory() { return host_kv_memory(); }

void CpuBackend::embed(const WeightMatrix& table, const int32_t* tokens, int n, float scale, float* x) {
  const int64_t cols = table.n_in;
  for (int t = 0; t < n; ++t) {
    float* xt = x + int64_t(t) * cols;
    dequantize_row_ref(table.type, static_cast<const uint8_t*>(table.data) + size_t(tokens[t]) * table.row_stride,
                       xt, cols);
    if (scale != 1.0f)
      for (int64_t j = 0; j < cols; ++j) xt[j] *= scale;
  }
}

void CpuBackend::matmul(const WeightMatrix& w, const float* x, float* y, int n) { polykv::matmul(w, x, y, n, *pool_); }

void CpuBackend::add_bias(float* x, const float* b, int rows, int cols) {
  for (int r = 0; r < rows; ++r) add_inplace(x + int64_t(r) * cols, b, cols);
}

void CpuBackend::add(float* x, const float* y, int64_t n) { add_inplace(x, y, n); }

void CpuBackend::softcap(float* x, int64_t n, float cap) { polykv::softcap(x, n, cap); }

void CpuBackend::gather_rows(const float* src, const int32_t* rows, int n, int cols, float* dst) {
  for (int i = 0; i < n; ++i) std::copy_n(src + int64_t(rows[i]) * cols, cols, dst + int64_t(i) * cols);
}

void CpuBackend::argmax_rows(const float* x, int rows, int cols, int32_t* out) {
  for (int r = 0; r < rows; ++r) out[r] = argmax_first_ref(x + int64_t(r) * cols, cols);
}

void CpuBackend::moe_route(const float* logits, int n, const MoeRouting& r, int32_t* ids, float* weights) {
  moe_route_cpu(logits, n, r, ids, weights);
}

void CpuBackend::moe_experts(const MoeExperts& w, const float* x, const int32_t* ids, const float* weights, int n,
                             int k, float* out) {
  moe_experts_cpu(w, x, ids, weights, n, k, out, *pool_, moe_);
}

void CpuBackend::add_sigmoid_gated(float* x, const float* y, const float* g, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float s = 1.0f / (1.0f + std::exp(-g[r]));
    float* xr = x + int64_t(r) * cols;
    const float* yr = y + int64_t(r) * cols;
    for (int c = 0; c < cols; ++c) xr[c] += s * yr[c];
  }
}

void CpuBackend::begin_step(std::span<const StepSeq> seqs) {
  for (const StepSeq& s : seqs) check(s.kv != nullptr && s.n > 0, "backend step: a sequence without KV or rows");
  step_.assign(seqs.begin(), seqs.end());
  for (const StepSeq& s : seqs)  // hybrid models: the state the step reads and writes (kv/recurrent_state.h)
    if (RecurrentState* r = s.kv->recurrent_state()) r->begin_step(s.pos0, s.n);
}

// Every sequence stores its rows (K equalized first where its KV has an equalizer) before the one
// attention call of the layer reads them.
void CpuBackend::store_kv(int layer, float* k, const float* v) {
  for (const StepSeq& s : step_) {
    const KvLayerView shape = s.kv->view(layer);  // only its head sizes are read here
    float* ks = k + int64_t(s.row0) * shape.n_head_kv * shape.head_dim;
    const float* vs = v + int64_t(s.row0) * shape.n_head_kv * shape.head_dim_v;
    s.kv->k_equalizer().equalize_keys(layer, s.pos0, ks, s.n);  // no-op unless enabled
    s.kv->store(layer, s.pos0, s.n, ks, vs, pool_);
  }
}

// One attention_batch over every sequence, which reads blocks that sequences share (a common
// prefix) once for all their queries.
void CpuBackend::attention(int layer, const AttentionParams& p, float* q, float* out) {
  attn_seqs_.resize(step_.size());
  for (size_t i = 0; i < step_.size(); ++i) {
    const StepSeq& s = step_[i];
    const KvLayerView view = s.kv->view(layer);
    float* qs = q + int64_t(s.row0) * p.n_head * view.head_dim;
    s.kv->k_equalizer().scale_queries(layer, qs, s.n, p.n_head);  // no-op unless enabled
    attn_seqs_[i] = {view, s.pos0, s.n, qs, out + int64_t(s.row0) * p.n_head * view.head_dim_v};
  }
  attention_batch(p, attn_seqs_, *pool_);
}

}  // namespace polykv
