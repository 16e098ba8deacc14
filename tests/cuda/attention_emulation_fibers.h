// The CPU emulation of a CUDA thread block for tests/cuda/attention_*emulation_test.cpp (see
// attention_emulation.h): a block is 128 (or 256) fibers (ucontext) on the test's thread, run
// round-robin, each until it waits at a barrier; __syncthreads is a barrier of the block,
// __shfl_xor_sync a per-warp exchange between two warp barriers (the kernels shuffle only in
// warp-uniform code); mma.sync and ldmatrix are computed from every lane's posted fragments. Shared by
// every emulation test file (inline variables: one state for the process; tests run one at a time).
#pragma once
#include <ucontext.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "attention_cuda_cases.h"
#include "core/fp16.h"

namespace emu {
// One block at a time: its 128 (or 256: the 256-row prefix kernel) threads are fibers (ucontext) on
// the calling thread, run round-robin; a fiber runs until it waits at a barrier. Barriers count the
// fibers still running.
constexpr int kFibers = 256, kWarps = kFibers / 32;
inline int n_fibers = 128;  // threads of the blocks being run
constexpr size_t kStackBytes = 256 * 1024;

struct Idx {
  unsigned x = 0, y = 0, z = 0;
};
inline Idx thread_idx, block_idx, grid_dim;  // thread_idx: the fiber running now

struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  bool done = false;
};
inline ucontext_t scheduler;
inline Fiber fibers[kFibers];
inline int current = 0;
inline const std::function<void()>* body = nullptr;
inline int alive = 0, block_arrived = 0, warp_alive[kWarps], warp_arrived[kWarps];
inline uint64_t block_gen = 0, warp_gen[kWarps];
inline float shfl_buf[kWarps][32];
inline std::vector<float4> dyn_smem;

inline void yield() { swapcontext(&fibers[current].ctx, &scheduler); }

inline void syncthreads() {
  const uint64_t g = block_gen;
  if (++block_arrived == alive) {
    block_arrived = 0;
    ++block_gen;
    return;
  }
  while (block_gen == g) yield();
}

inline void warp_sync() {
  const int w = current / 32;
  const uint64_t g = warp_gen[w];
  if (++warp_arrived[w] == warp_alive[w]) {
    warp_arrived[w] = 0;
    ++warp_gen[w];
    return;
  }
  while (warp_gen[w] == g) yield();
}

inline float shfl_xor(float v, int o) {
  const int lane = current % 32, w = current / 32;
  shfl_buf[w][lane] = v;
  warp_sync();
  const float r = shfl_buf[w][lane ^ o];
  warp_sync();
  return r;
}

// mma.sync.m16n8k16 (f16 inputs, f32 accumulation) across the 32 fibers of a warp: each lane
// posts its fragments, then computes its D elements from everyone's (the PTX ISA's fragment layout,
// as spelled in attention_cuda_mma.cuh). Called in warp-uniform code only.
inline uint32_t mma_a[kWarps][32][4], mma_b[kWarps][32][2];
inline float half_of(uint32_t reg, int upper) { return ::polykv::fp16_to_f32(uint16_t(reg >> (16 * upper))); }
inline void mma16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  const int lane = current % 32, w = current / 32;
  for (int i = 0; i < 4; ++i) mma_a[w][lane][i] = a[i];
  for (int i = 0; i < 2; ++i) mma_b[w][lane][i] = b[i];
  warp_sync();
  // A(row, k): lane (row % 8) * 4 + (k % 8) / 2, register (row >= 8) + 2 (k >= 8), half k % 2.
  // B(k, n): lane n * 4 + (k % 8) / 2, register k >= 8, half k % 2.
  const int g = lane / 4, t = lane % 4;
  float out[4];
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
    float acc = d[e];
    for (int k = 0; k < 16; ++k) {
      const float x = half_of(mma_a[w][(row % 8) * 4 + (k % 8) / 2][(row >= 8) + 2 * (k >= 8)], k % 2);
      const float y = half_of(mma_b[w][col * 4 + (k % 8) / 2][k >= 8], k % 2);
      acc += x * y;
    }
    out[e] = acc;
  }
  warp_sync();
  for (int e = 0; e < 4; ++e) d[e] = out[e];
}

// ldmatrix.x4 (.trans) across the 32 fibers of a warp: each lane posts its row address, then takes
// its registers from everyone's (matrix i's rows at lanes 8 i .. 8 i + 7; register i of lane l:
// row l / 4, elements 2 (l % 4), +1; trans: column l / 4, rows 2 (l % 4), +1). Warp-uniform code only.
inline const uint16_t* ldsm_ptr[kWarps][32];
inline void ldsm_x4(uint32_t (&r)[4], const uint16_t* p, bool trans) {
  const int lane = current % 32, w = current / 32;
  ldsm_ptr[w][lane] = p;
  warp_sync();
  for (int i = 0; i < 4; ++i) {
    uint32_t e[2];
    for (int k = 0; k < 2; ++k)
      e[k] = trans ? ldsm_ptr[w][8 * i + 2 * (lane % 4) + k][lane / 4] : ldsm_ptr[w][8 * i + lane / 4][2 * (lane % 4) + k];
    r[i] = e[0] | (e[1] << 16);
  }
  warp_sync();
}

inline void fiber_main() {
  const int i = current;
  (*body)();
  fibers[i].done = true;
  --alive;
  --warp_alive[i / 32];
  // A barrier the others wait at may now be complete (kernels exit block-uniformly, so this is the
  // end of the block, but keep barriers consistent anyway).
  if (block_arrived > 0 && block_arrived == alive) block_arrived = 0, ++block_gen;
  if (warp_arrived[i / 32] > 0 && warp_arrived[i / 32] == warp_alive[i / 32]) warp_arrived[i / 32] = 0, ++warp_gen[i / 32];
}

// Runs f as every thread of one block.
inline void run_block(const std::function<void()>& f) {
  body = &f;
  alive = n_fibers, block_arrived = 0;
  for (int w = 0; w < kWarps; ++w) warp_alive[w] = w < n_fibers / 32 ? 32 : 0, warp_arrived[w] = 0;
  for (int i = 0; i < n_fibers; ++i) {
    Fiber& fb = fibers[i];
    fb.stack.resize(kStackBytes);
    fb.done = false;
    getcontext(&fb.ctx);
    fb.ctx.uc_stack.ss_sp = fb.stack.data();
    fb.ctx.uc_stack.ss_size = fb.stack.size();
    fb.ctx.uc_link = &scheduler;
    makecontext(&fb.ctx, fiber_main, 0);
  }
  while (alive > 0)
    for (int i = 0; i < n_fibers; ++i) {
      if (fibers[i].done) continue;
      current = i;
      thread_idx = {unsigned(i), 0, 0};
      swapcontext(&scheduler, &fibers[i].ctx);
    }
}
}  // namespace emu
