// matmul_qkv_rope (matmul_cuda_norm.h): the activations of the input (prepared or computed as matvec
// does), then one launch of the split mat-vec with the RoPE epilogue (matmul_cuda_split.cu).
#include "backend/cuda/matmul_cuda_norm.h"

#include "backend/cuda/matmul_cuda_internal.h"
#include "backend/cuda/matmul_cuda_prepared.h"
#include "core/error.h"

namespace polykv::cuda {

bool matmul_qkv_rope_ok(std::span<const MatvecPart> qkv, int head_dim, int n_rot) {
  if (!matvec_split_rope_ok(qkv, head_dim, n_rot)) return false;
  for (const MatvecPart& p : qkv)
    if (!prepared_matmul_ok(*p.w, 1)) return false;
  return true;
}

void matmul_qkv_rope(std::span<const MatvecPart> qkv, const float* x, const ActsOut* prepared, int head_dim, int n_rot,
                     const int32_t* pos, const float* inv_freq, float scale, RopeStyle style,
                     const std::array<const float*, 3>& bias, CudaContext& ctx, const DeferredNorm& dn) {
  for (const MatvecPart& p : qkv) validate_device_weights(*p.w);
  check(matmul_qkv_rope_ok(qkv, head_dim, n_rot), "CUDA matmul_qkv_rope: parts it does not take");
  check(n_rot == 0 || (pos != nullptr && inv_freq != nullptr), "CUDA matmul_qkv_rope: no positions or frequencies");
  check((bias[0] == nullptr) == (bias[1] == nullptr) && (bias[0] == nullptr) == (bias[2] == nullptr),
        "CUDA matmul_qkv_rope: the biases of q, k and v go together");
  ActView av;
  check(dn.ss == nullptr || prepared != nullptr, "CUDA matmul_qkv_rope: a deferred norm without its activations");
  if (prepared != nullptr) {
    av.qs = prepared->qs;
    av.s = static_cast<const hd::ActScale*>(prepared->scales);
    av.dn = dn;
  } else {
    av = prepare_acts(*qkv[0].w, x, 1, ctx);
  }
  SplitRope r;
  r.pos = pos;
  r.inv_freq = inv_freq;
  r.scale = scale;
  r.head_dim = head_dim;
  r.n_rot = n_rot;
  r.style = style;
  for (int i = 0; i < 3; ++i) r.bias[i] = bias[size_t(i)];
  check(launch_matvec_split_rope(qkv, av, r, ctx), "CUDA matmul_qkv_rope: not launched");
}

}  // namespace polykv::cuda
