// The fiber runtime of the CPU emulations of CUDA code: a block's threads (attention_cuda_emulation.h: 128, or 256
// for the 256-row prefix kernel) or one warp (kv_encode_warp_emulation_test.cpp) as fibers on the calling thread,
// run round-robin; a fiber runs until it waits at a barrier, its block's (__syncthreads) or its warp's (__syncwarp,
// and every exchange between lanes: a shuffle posts the lane's value, waits, reads its source lane's, waits).
// Barriers count the fibers still running, so a fiber that returns completes a barrier the others wait at.
// Fibers are Boost.Context's (a user-space switch of registers and stack): ucontext's swapcontext made a
// signal-mask system call per switch, ~90% of the attention emulation's time (perf, 2026-12-02), and the
// emulations switch at every shuffle of every lane.
// Shuffles are exchanged in warp-uniform code only (as the kernels do). Not covered: device-only behaviour (alignment
// faults, memory-model races between barriers, register spills). The state is one set of inline variables for the
// whole test binary: one emulated block runs at a time.
#pragma once
#include <boost/context/fiber.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

namespace fiberemu {
constexpr int kMaxFibers = 256, kWarps = kMaxFibers / 32;
constexpr size_t kStackBytes = 256 * 1024;

namespace bctx = boost::context;
struct Fiber {
  bctx::fiber ctx;   // the fiber's continuation, resumed by the scheduler (empty once the body returned)
  bctx::fiber sink;  // inside the fiber: the scheduler's continuation, resumed to yield
  std::vector<char> stack;  // kept from run to run (allocated once)
  bool done = false;
};
// Hands a fiber its own kept stack (Boost.Context's StackAllocator concept).
struct KeptStack {
  std::vector<char>* mem;
  bctx::stack_context allocate() {
    bctx::stack_context sc;
    sc.size = mem->size();
    sc.sp = mem->data() + mem->size();  // stacks grow down
    return sc;
  }
  void deallocate(bctx::stack_context&) noexcept {}
};

inline Fiber fibers[kMaxFibers];
inline int current = 0;  // the fiber running now: thread current of the block, lane current % 32 of warp current / 32
inline int alive = 0, block_arrived = 0, warp_alive[kWarps], warp_arrived[kWarps];
inline uint64_t block_gen = 0, warp_gen[kWarps];
inline uint64_t post[kWarps][32];  // each lane's posted value (exchange)
inline const std::function<void(int)>* body = nullptr;

inline void yield() {
  Fiber& f = fibers[current];
  f.sink = std::move(f.sink).resume();
}

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

// The value lane src of the caller's warp posts (the caller's own for src outside 0 .. 31, as __shfl_down_sync past
// the end of the warp).
template <class T>
T exchange(T v, int src) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "one register's worth");
  const int lane = current % 32, w = current / 32;
  std::memcpy(&post[w][lane], &v, sizeof(T));
  warp_sync();
  T r;
  std::memcpy(&r, &post[w][src >= 0 && src < 32 ? src : lane], sizeof(T));
  warp_sync();
  return r;
}

// __any_sync over the whole warp: whether any lane's predicate holds.
inline bool warp_any(bool p) {
  const int lane = current % 32, w = current / 32;
  post[w][lane] = p ? 1 : 0;
  warp_sync();
  bool r = false;
  for (int i = 0; i < 32; ++i) r = r || post[w][i] != 0;
  warp_sync();
  return r;
}

// Runs f(i) as fibers i = 0 .. n - 1 (a multiple of 32, at most kMaxFibers): one block of n threads. on_resume(i)
// runs before each switch into fiber i (the attention emulation sets threadIdx there).
inline void run(int n, const std::function<void(int)>& f, void (*on_resume)(int) = nullptr) {
  body = &f;
  alive = n, block_arrived = 0;
  for (int w = 0; w < kWarps; ++w) warp_alive[w] = w < n / 32 ? 32 : 0, warp_arrived[w] = 0;
  for (int i = 0; i < n; ++i) {
    Fiber& fb = fibers[i];
    fb.stack.resize(kStackBytes);
    fb.done = false;
    fb.ctx = bctx::fiber(std::allocator_arg, KeptStack{&fb.stack}, [i](bctx::fiber&& sink) {
      fibers[i].sink = std::move(sink);
      (*body)(i);
      fibers[i].done = true;
      --alive;
      const int w = i / 32;
      --warp_alive[w];
      // A barrier the others wait at may now be complete (kernels exit block-uniformly, so this is the end of the
      // block, but keep the barriers consistent anyway).
      if (block_arrived > 0 && block_arrived == alive) block_arrived = 0, ++block_gen;
      if (warp_arrived[w] > 0 && warp_arrived[w] == warp_alive[w]) warp_arrived[w] = 0, ++warp_gen[w];
      return std::move(fibers[i].sink);
    });
  }
  while (alive > 0)
    for (int i = 0; i < n; ++i) {
      if (fibers[i].done) continue;
      current = i;
      if (on_resume != nullptr) on_resume(i);
      fibers[i].ctx = std::move(fibers[i].ctx).resume();
    }
}
}  // namespace fiberemu
