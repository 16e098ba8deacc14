// The CPU backend's mixture-of-experts ops (backend/backend.h, backend/moe.h).
//
// moe_experts_cpu groups the step's (token, slot) pairs by expert, so each expert's matrices are read
// once per step however many tokens chose it (prefill and batched decode): per expert, gather its
// rows of x, run gate/up/down through the ordinary matmul over those rows, keep each row's result in
// its slot; then every token sums its slots in slot order. Invariance: matmul computes each row on
// its own in a fixed order, and the slot sum has a fixed order, so a token's output is bit-identical
// whatever else is in the step (the engine's batching rule).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/moe.h"
#include "core/thread_pool.h"

namespace polykv {

// Scratch reused from step to step (grow-only).
struct MoeScratch {
  std::vector<int32_t> count;  // [n_expert] slots per expert, then running offsets
  std::vector<int32_t> slots;  // [n * k] slot indices t * k + j, grouped by expert, token order inside
  std::vector<float> xg;       // [max rows of an expert][n_embd] gathered inputs, then down outputs
  std::vector<float> gate, up; // [max rows][n_ff]
  std::vector<float> y;        // [n * k][n_embd] per-slot expert outputs
  std::vector<int> active;     // experts chosen by at least one slot, ascending
  // Per active expert (the expert-parallel path): [n_active][max rows][n_embd], [n_active][max rows][n_ff] x 2.
  std::vector<float> pxg, pgate, pup;
};

// At most this many rows per expert (decode and verify steps), the threads take whole experts (each expert's
// products on one thread, matmul_serial) instead of splitting each product over the threads: one dispatch a
// step instead of three per expert. The same bits either way (matmul_serial is matmul on one thread).
// POLYKV_MOE_EXPERT_PARALLEL=0 turns it off (read once; for A/B runs).
inline constexpr int kMoeExpertParallelRows = 8;

// Top-k routing of each row (backend.h moe_route).
void moe_route_cpu(const float* logits, int n, const MoeRouting& r, int32_t* ids, float* weights);

// Grouped experts (backend.h moe_experts). Throws Error on an expert index out of range.
void moe_experts_cpu(const MoeExperts& w, const float* x, const int32_t* ids, const float* weights, int n, int k,
                     float* out, ThreadPool& pool, MoeScratch& s);

// The expert activation over n values: gate[i] = act(gate[i], up[i]) (backend/moe.h MoeActivation).
void moe_activation(float* gate, const float* up, int64_t n, MoeActivation act, float alpha, float limit);

}  // namespace polykv
