// matmul_add_rmsnorm and matmul_qkv_rope (matmul_cuda_norm.h): the activations of the input
// (prepared or computed as matvec does), then one launch of the split mat-vec with the add and norm
// tail, or with the RoPE epilogue (matmul_cuda_split.cu).
#include "backend/cuda/matmul_cuda_norm.h"

#include "backend/cuda/matmul_cuda_internal.h"
#include "backend/cuda/matmul_cuda_prepared.h"
#include "core/error.h"

namespace polykv::cuda {

bool matmul_add_rmsnorm_ok(const WeightMatrix& w, int n) {
  // prepared_matmul_ok: the mat-vec path matmul() takes for n == 1 (not mmq, quantized weights).
  return matvec_split_add_rmsnorm_ok(w, n) && prepared_matmul_ok(w, n);
}

void matmul_add_rmsnorm(const WeightMatrix& w, const float* in, const ActsOut* prepared, float* x,
                        const float* norm_w, float* out, float eps, ActsOut acts, unsigned* counter,
                        CudaContext& ctx) {
  validate_device_weights(w);
  check(matmul_add_rmsnorm_ok(w, 1), "CUDA matmul_add_rmsnorm: ", dtype_name(w.type), " ", w.n_out, "x", w.n_in,
        " is not a split-layout matrix it takes");
  check(out != x, "CUDA matmul_add_rmsnorm: out must not alias x");
  ActView av;
  if (prepared != nullptr) {
    av.qs = prepared->qs;
    av.s = static_cast<const hd::ActScale*>(prepared->scales);
  } else {
    av = prepare_acts(w, in, 1, ctx);
  }
  SplitNormTail t;
  t.x = x;
  t.w = norm_w;
  t.out = out;
  t.qs = norm_w != nullptr ? acts.qs : nullptr;
  t.sc = static_cast<hd::ActScale*>(acts.scales);
  t.counter = counter;
  t.eps = eps;
  t.cols = w.n_out;
  launch_matvec_split_add_rmsnorm(w, av, t, ctx);
}

bool matmul_qkv_rope_ok(std::span<const MatvecPart> qkv, int head_dim, int n_rot) {
  if (!matvec_split_rope_ok(qkv, head_dim, n_rot)) return false;
  for (const MatvecPart& p : qkv)
    if (!prepared_matmul_ok(*p.w, 1)) return false;
  return true;
}

void matmul_qkv_rope(std::span<const MatvecPart> qkv, const float* x, const ActsOut* prepared, int head_dim, int n_rot,
                     const int32_t* pos, const float* inv_freq, float scale, CudaContext& ctx) {
  for (const MatvecPart& p : qkv) validate_device_weights(*p.w);
  check(matmul_qkv_rope_ok(qkv, head_dim, n_rot), "CUDA matmul_qkv_rope: parts it does not take");
  check(n_rot == 0 || (pos != nullptr && inv_freq != nullptr), "CUDA matmul_qkv_rope: no positions or frequencies");
  ActView av;
  if (prepared != nullptr) {
    av.qs = prepared->qs;
    av.s = static_cast<const hd::ActScale*>(prepared->scales);
  } else {
    av = prepare_acts(*qkv[0].w, x, 1, ctx);
  }
  SplitRope r;
  r.pos = pos;
  r.inv_freq = inv_freq;
  r.scale = scale;
  r.head_dim = head_dim;
  r.n_rot = n_rot;
  check(launch_matvec_split_rope(qkv, av, r, ctx), "CUDA matmul_qkv_rope: not launched");
}

bool matmul_gated_ok(const WeightMatrix& gate, const WeightMatrix& up, int n) {
  return n == 1 && matvec_split_gated_ok(gate, up) && prepared_matmul_ok(gate, 1) && prepared_matmul_ok(up, 1);
}

void matmul_gated(const WeightMatrix& w_gate, const WeightMatrix& w_up, const float* x, const ActsOut* prepared,
                  float* gate, float* up, Activation act, ActsOut acts, CudaContext& ctx) {
  validate_device_weights(w_gate);
  validate_device_weights(w_up);
  check(matmul_gated_ok(w_gate, w_up, 1), "CUDA matmul_gated: matrices it does not take");
  ActView av;
  if (prepared != nullptr) {
    av.qs = prepared->qs;
    av.s = static_cast<const hd::ActScale*>(prepared->scales);
  } else {
    av = prepare_acts(w_gate, x, 1, ctx);
  }
  SplitGated g;
  g.gate = gate;
  g.up = up;
  g.qs = acts.qs;
  g.sc = static_cast<hd::ActScale*>(acts.scales);
  g.act = act;
  launch_matvec_split_gated(w_gate, w_up, av, g, ctx);
}

}  // namespace polykv::cuda
