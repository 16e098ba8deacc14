// CpuBackend's per-row ops (rmsnorm, add + rmsnorm, rope of q and k, their head norms, the gated activation) spread
// over the thread pool. Why (issue #10, docs/VERIFY_KERNELS.md "2026-12-01e"): they were run by the
// calling thread alone while the pool waited, so every extra row of a k-token verify step added their
// whole time to the step (~40 us a row and layer on llama-3.2-1b: 2 % of a one-token step per row).
// Invariance: every element is computed by the same scalar code of ops.cpp as before, in the same
// order within its row; only which thread runs a row (or a slice of the element-wise activation)
// changes, so the bits do not depend on the split, the thread count or the number of rows.
// POLYKV_ROWOPS=serial restores the former cost (one thread, cos / sin per head) for A/B runs
// (bench/verify_cost.sh, docs/VERIFY_KERNELS.md); the results are the same bits either way.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/ops.h"

namespace polykv {
namespace {

constexpr int64_t kMinActChunk = 1024;  // elements of the gated activation per task (~3 us)

bool serial_rowops() {
  static const bool serial = [] {
    const char* e = std::getenv("POLYKV_ROWOPS");
    return e != nullptr && std::strcmp(e, "serial") == 0;
  }();
  return serial;
}

}  // namespace

void CpuBackend::rmsnorm(const float* x, const float* w, float* out, int rows, int cols, float eps) {
  if (rows < 2 || serial_rowops()) return polykv::rmsnorm(x, w, out, rows, cols, eps);
  pool_->parallel_for(rows, [&](int64_t r0, int64_t r1) {
    polykv::rmsnorm(x + r0 * cols, w, out + r0 * cols, int(r1 - r0), cols, eps);
  });
}

void CpuBackend::add_rmsnorm(float* x, const float* r, const float* w, float* out, int rows, int cols, float eps) {
  // Row by row: x_i += r_i, then out_i = rmsnorm(x_i) (out may alias r: row i of r is read before
  // row i of out is written, and no other row reads it).
  auto run = [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      add_inplace(x + i * cols, r + i * cols, cols);
      polykv::rmsnorm(x + i * cols, w, out + i * cols, 1, cols, eps);
    }
  };
  if (rows < 2 || serial_rowops()) return run(0, rows);
  pool_->parallel_for(rows, run);
}

void CpuBackend::rope(float* x, int rows, int n_heads, int head_dim, int n_rot, const int32_t* pos,
                      const float* inv_freq, float scale, RopeStyle style) {
  const int64_t row = int64_t(n_heads) * head_dim;
  for (int r = 0; r < rows; ++r) polykv::rope(x + r * row, n_heads, head_dim, n_rot, pos[r], inv_freq, scale, style);
}

void CpuBackend::rope_qk(float* q, int n_head, float* k, int n_head_kv, int rows, int head_dim, int n_rot,
                         const int32_t* pos, const float* inv_freq, float scale, RopeStyle style) {
  // One angle table per row for its query and key heads (cos / sin are most of rope's time).
  std::vector<float> cs(static_cast<size_t>(n_rot));
  if (serial_rowops()) {  // the former cost: the angles once per head
    for (int r = 0; r < rows; ++r) {
      for (int h = 0; h < n_head; ++h) polykv::rope(q + (int64_t(r) * n_head + h) * head_dim, 1, head_dim, n_rot, pos[r], inv_freq, scale, style);
      for (int h = 0; h < n_head_kv; ++h) polykv::rope(k + (int64_t(r) * n_head_kv + h) * head_dim, 1, head_dim, n_rot, pos[r], inv_freq, scale, style);
    }
    return;
  }
  for (int r = 0; r < rows; ++r) {
    rope_angles(pos[r], n_rot, inv_freq, scale, cs.data());
    rope_apply(q + int64_t(r) * n_head * head_dim, n_head, head_dim, n_rot, cs.data(), style);
    rope_apply(k + int64_t(r) * n_head_kv * head_dim, n_head_kv, head_dim, n_rot, cs.data(), style);
  }
}

void CpuBackend::qk_norm_rope(float* q, const float* q_norm, int n_head, float* k, const float* k_norm, int n_head_kv,
                              int rows, int head_dim, float eps, int n_rot, const int32_t* pos, const float* inv_freq,
                              float scale, RopeStyle style) {
  if (serial_rowops())
    return Backend::qk_norm_rope(q, q_norm, n_head, k, k_norm, n_head_kv, rows, head_dim, eps, n_rot, pos, inv_freq,
                                 scale, style);
  // Row by row (a row: one position's heads): the heads' norms, then the rope with the row's angle table, as
  // rmsnorm (one head a row) and rope_qk compute them; one pass instead of three over the pool.
  auto run = [&](int64_t r0, int64_t r1) {
    std::vector<float> cs(static_cast<size_t>(n_rot));
    for (int64_t r = r0; r < r1; ++r) {
      float* qr = q + r * n_head * head_dim;
      float* kr = k + r * n_head_kv * head_dim;
      polykv::rmsnorm(qr, q_norm, qr, n_head, head_dim, eps);
      polykv::rmsnorm(kr, k_norm, kr, n_head_kv, head_dim, eps);
      rope_angles(pos[r], n_rot, inv_freq, scale, cs.data());
      rope_apply(qr, n_head, head_dim, n_rot, cs.data(), style);
      rope_apply(kr, n_head_kv, head_dim, n_rot, cs.data(), style);
    }
  };
  if (rows < 2) return run(0, rows);
  pool_->parallel_for(rows, run);
}

void CpuBackend::gated_activation(float* gate, const float* up, int64_t n, Activation act) {
  if (n < 2 * kMinActChunk || serial_rowops()) return polykv::gated_activation(gate, up, n, act);
  pool_->parallel_for(
      n, [&](int64_t i0, int64_t i1) { polykv::gated_activation(gate + i0, up + i0, i1 - i0, act); }, kMinActChunk);
}

}  // namespace polykv
