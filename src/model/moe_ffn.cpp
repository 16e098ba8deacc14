#include "model/moe_ffn.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace polykv {

MoeWorkspace::~MoeWorkspace() {
  if (arena_) backend_.release(arena_);
}

void MoeWorkspace::reserve(const ModelConfig& c, int rows) {
  if (arena_ && rows <= rows_) return;
  rows = std::max(rows, rows_);
  const size_t r = size_t(rows), k = size_t(c.moe.n_used), fs = size_t(c.moe.n_ff_shexp);
  const size_t sizes[] = {r * size_t(c.moe.n_expert) * 4, r * k * 4, r * k * 4, r * 4, r * fs * 4, r * fs * 4,
                          r * size_t(c.n_embd) * 4};
  auto aligned = [](size_t n) { return (n + 63) & ~size_t(63); };
  size_t total = 0;
  for (size_t s : sizes) total += aligned(s);
  void* arena = backend_.allocate(total);
  if (arena_) backend_.release(arena_);
  arena_ = arena;
  rows_ = rows;
  auto* p = static_cast<uint8_t*>(arena_);
  size_t i = 0;
  auto next = [&] {
    uint8_t* at = p;
    p += aligned(sizes[i++]);
    return at;
  };
  logits = reinterpret_cast<float*>(next());
  ids = reinterpret_cast<int32_t*>(next());
  weights = reinterpret_cast<float*>(next());
  sh_g = reinterpret_cast<float*>(next());
  sh_gate = reinterpret_cast<float*>(next());
  sh_up = reinterpret_cast<float*>(next());
  sh_out = reinterpret_cast<float*>(next());
}

void moe_ffn(Backend& be, const ModelConfig& c, const DeviceMoeWeights& w, const float* h, int n, MoeWorkspace& ws,
             float* out) {
  const MoeConfig& m = c.moe;
  const bool shared = m.n_ff_shexp > 0;
  if (shared) {  // its inputs are read before moe_experts may overwrite h (out aliasing h)
    be.matmul(w.sh_gate_inp, h, ws.sh_g, n);  // [n][1]
    be.matmul(w.sh_gate, h, ws.sh_gate, n);
    be.matmul(w.sh_up, h, ws.sh_up, n);
  }
  be.matmul(w.router, h, ws.logits, n);  // [n][n_expert]
  if (w.router_bias) be.add_bias(ws.logits, w.router_bias, n, m.n_expert);
  be.moe_route_experts(w.experts, h, ws.logits, m.routing(), n, ws.ids, ws.weights, out);  // route, then experts
  if (shared) {
    be.gated_activation(ws.sh_gate, ws.sh_up, int64_t(n) * m.n_ff_shexp, Activation::SiLU);
    be.matmul(w.sh_down, ws.sh_gate, ws.sh_out, n);
    be.add_sigmoid_gated(out, ws.sh_out, ws.sh_g, n, c.n_embd);
  }
}

void check_backend_runs(const ModelConfig& c, const Backend& backend) {
  if (backend.kind() == DeviceKind::Cpu) return;
  // MoE FFNs run on CUDA (backend/cuda/moe_cuda.h); gpt-oss attention (sinks, YaRN, output bias,
  // alternating sliding window) runs on every backend: sinks are AttentionParams::sinks (the CUDA kernels
  // add them where a row is finalized), YaRN is the host-computed inv_freq and attn_scale, the output bias
  // is add_bias. Nothing is refused today; this stays the one place to refuse a feature per backend.
  // Gated DeltaNet hybrids run on CUDA (docs/HYBRID.md, "CUDA"); POLYKV_CUDA_HYBRID=0 refuses them (an
  // opt-out kept for comparisons and in case a GPU shows a problem the tests do not).
  const char* hybrid = std::getenv("POLYKV_CUDA_HYBRID");
  check(c.n_state_layers() == 0 || !(hybrid && std::strcmp(hybrid, "0") == 0), "the ", backend.describe(),
        " backend was told not to run ", c.arch, " (a Gated DeltaNet hybrid) by POLYKV_CUDA_HYBRID=0: use --device "
        "cpu, or unset it");
}

}  // namespace polykv
