// The CUDA attention kernels (attention_cuda_kernels.cuh, attention_cuda_decode.cuh) compiled as plain
// C++ and run on the CPU, against attention_ref on the cases of attention_cuda_cases.h. No GPU
// needed: this checks the kernels' logic (work decomposition, indexing, masking, online softmax,
// split-K merge, rotation, head parts, device-side lengths) wherever the CUDA build is compiled; the
// GPU test checks the same cases on the device.
//
// Emulation: a block is 128 fibers on the test's thread; __syncthreads is a barrier of the block,
// __shfl_xor_sync a per-warp exchange between two warp barriers (the kernels shuffle only in
// warp-uniform code); __shared__ variables are function statics (blocks run one after another);
// dynamic shared memory is one buffer filled with NaN before each kernel. Grid and launch shape come
// from the launcher's own plan (attention_cuda_plan.h); only the <<<>>> launches are re-spelled here.
// Not covered: device-only behaviour (alignment faults, memory-model races between barriers, register
// spills, the CUDA half conversion intrinsic).
// Keep this emulation in ONE translation unit: attention_cuda_kernels.cuh declares `static __device__
// KvDecodeTables g_tables` (internal linkage, one copy per .cpp), while the kernel templates are merged
// across .cpp files by the linker, so a kernel instantiated in two files reads one file's g_tables: a
// 2026-12-01f split into five files gave zero outputs in the other files' tests when run alone.
#include <gtest/gtest.h>

#include <boost/context/fiber.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <limits>
#include <vector>

#include "attention_cuda_cases.h"
#include "backend/cuda/attention_cuda_plan.h"
#include "core/fp16.h"

namespace emu {
// One block at a time: its 128 (or 256: the 256-row prefix kernel) threads are fibers on the calling
// thread, run round-robin; a fiber runs until it waits at a barrier. Barriers count the fibers still
// running. Fibers are Boost.Context's (a user-space switch of registers and stack): ucontext's
// swapcontext made a signal-mask system call per switch, ~90% of these tests' time (perf,
// 2026-12-02), and the emulation switches at every shuffle of every lane.
constexpr int kFibers = 256, kWarps = kFibers / 32;
inline int n_fibers = 128;  // threads of the blocks being run
constexpr size_t kStackBytes = 256 * 1024;

struct Idx {
  unsigned x = 0, y = 0, z = 0;
};
inline Idx thread_idx, block_idx, grid_dim;  // thread_idx: the fiber running now

namespace bctx = boost::context;
struct Fiber {
  bctx::fiber ctx;   // the fiber's continuation, resumed by the scheduler (empty once the body returned)
  bctx::fiber sink;  // inside the fiber: the scheduler's continuation, resumed to yield
  std::vector<char> stack;  // kept from block to block (allocated once)
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
inline Fiber fibers[kFibers];
inline int current = 0;
inline const std::function<void()>* body = nullptr;
inline int alive = 0, block_arrived = 0, warp_alive[kWarps], warp_arrived[kWarps];
inline uint64_t block_gen = 0, warp_gen[kWarps];
inline float shfl_buf[kWarps][32];
inline std::vector<float4> dyn_smem;

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

inline float shfl_xor(float v, int o) {
  const int lane = current % 32, w = current / 32;
  shfl_buf[w][lane] = v;
  warp_sync();
  const float r = shfl_buf[w][lane ^ o];
  warp_sync();
  return r;
}

// __any_sync over the whole warp: whether any lane's predicate holds (warp-uniform code only).
inline bool any_buf[kWarps][32];
inline bool warp_any(bool p) {
  const int lane = current % 32, w = current / 32;
  any_buf[w][lane] = p;
  warp_sync();
  bool r = false;
  for (int i = 0; i < 32; ++i) r = r || any_buf[w][i];
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

inline void fiber_main(int i) {
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
    fb.ctx = bctx::fiber(std::allocator_arg, KeptStack{&fb.stack}, [i](bctx::fiber&& sink) {
      fibers[i].sink = std::move(sink);
      fiber_main(i);
      return std::move(fibers[i].sink);
    });
  }
  while (alive > 0)
    for (int i = 0; i < n_fibers; ++i) {
      if (fibers[i].done) continue;
      current = i;
      thread_idx = {unsigned(i), 0, 0};
      fibers[i].ctx = std::move(fibers[i].ctx).resume();
    }
}
}  // namespace emu

// CUDA's integer min / max, which the host compiler lacks.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max(int64_t a, int64_t b) { return a > b ? a : b; }

// The CUDA keywords and built-ins the kernels use, for the host compiler.
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __noinline__
#undef __shared__
#undef __launch_bounds__
#undef __align__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define threadIdx (::emu::thread_idx)
#define blockIdx (::emu::block_idx)
#define gridDim (::emu::grid_dim)
#define __syncthreads() ::emu::syncthreads()
#define __shfl_xor_sync(mask, v, o) ::emu::shfl_xor(v, o)
#define __syncwarp() ::emu::warp_sync()
#define __any_sync(mask, p) ::emu::warp_any(p)
#define POLYKV_ATTN_EMULATION
#define POLYKV_ATTN_NS emulation
#define POLYKV_DYNAMIC_SHARED(name) float4* name = ::emu::dyn_smem.data()
#define POLYKV_EMU_MMA(d, a, b) ::emu::mma16816(d, a, b)
#define POLYKV_EMU_YIELD() ::emu::yield()
#define POLYKV_EMU_LDSM(r, p, trans) ::emu::ldsm_x4(r, p, trans)
#include "backend/cuda/attention_cuda_decode.cuh"
#include "backend/cuda/attention_cuda_decode8.cuh"
#include "backend/cuda/attention_cuda_decode8_fixed.cuh"
#include "backend/cuda/attention_cuda_kernels.cuh"
#include "backend/cuda/attention_cuda_mma.cuh"
#include "backend/cuda/attention_cuda_prefix256.cuh"
#include "backend/cuda/attention_cuda_prefix_mma.cuh"

namespace polykv {
namespace {

using attn_test::Case;
using attn_test::SeqSpec;
namespace attn = cuda::attn;

// Runs body() as every thread (threads per block) of every block of the grid, one block at a time.
void run_grid(unsigned gx, unsigned gy, unsigned gz, size_t smem_bytes, const std::function<void()>& body,
              int threads = attn::kThreads) {
  emu::n_fibers = threads;
  emu::grid_dim = {gx, gy, gz};
  emu::dyn_smem.assign(smem_bytes / sizeof(float4) + 1,
                       make_float4(NAN, NAN, NAN, NAN));  // unwritten shared memory reads as NaN
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x) {
        emu::block_idx = {x, y, z};
        emu::run_block(body);
      }
}

template <int HD>
void run_main(const attn::Args& a, const attn::Plan& P) {
  const unsigned gx = unsigned(P.n_splits), gy = unsigned(P.grid_y), gz = unsigned(P.grid_z);
  if (P.kernel == attn::Kernel::Decode) {
    if constexpr (attn::decode8_supports(HD)) {
      if (P.variant != attn::DecodeVariant::Slots) {  // Lanes8 and Lanes8x4: the same code (launch bounds aside)
        // Lanes8: the kernel the launcher picks (specialized per type pair where there is one).
        const attn::Decode8Kernels mode = P.variant == attn::DecodeVariant::Lanes8
                                              ? attn::decode_tc_mode(P.tc, attn::decode8_kernels())
                                              : attn::Decode8Kernels::Generic;
        const bool lean = attn::decode8_lean(a.self_kv);
        attn::decode8_pick<HD>(
            a.k_type, a.v_type, mode, attn::decode8_generic_kernel<HD, 4>(lean),
            [&](auto kernel) { run_grid(gx, gy, gz, P.smem, [&] { kernel(a); }); }, lean);
        return;
      }
    }
    run_grid(gx, gy, gz, P.smem, [&] { attn::decode_kernel<HD>(a); });
  } else if (P.rows == attn::kPrefix256Rows) {
    if constexpr (attn::mma_supports(HD))
      attn::prefix256_pick<HD>(a.k_type, a.v_type, [&](auto kernel) {
        run_grid(gx, gy, gz, attn::prefix256_smem_bytes(HD), [&] { kernel(a); }, attn::kPrefix256Threads);
      });
  } else if (P.rows == attn::kPrefixRows) {
    if constexpr (attn::mma_supports(HD))
      run_grid(gx, gy, gz, attn::prefix_mma_smem_bytes(HD), [&] { attn::attention_prefix_mma_kernel<HD>(a); });
  } else if (P.rows == attn::kSmallRows) {
    if constexpr (HD >= 64)  // plan_tiled_rows gives head size 32 no small shape
      run_grid(gx, gy, gz, attn::smem_bytes(HD, attn::kSmallRows),
               [&] { attn::attention_kernel<HD, attn::kSmallRows>(a); });
  } else {
    if constexpr (attn::tiled_mma_supports(HD)) {
      if (P.mma) {
        run_grid(gx, gy, gz, attn::mma_smem_bytes(HD), [&] { attn::attention_mma_kernel<HD>(a); });
        return;
      }
    }
    constexpr int rows = attn::large_rows(HD);
    run_grid(gx, gy, gz, attn::smem_bytes(HD, rows), [&] { attn::attention_kernel<HD, rows>(a); });
  }
}

// The launches of attention_cuda.cu's launch_hd.
template <int HD>
void run_kernels(const attn::Args& a, const attn::Plan& P, const attn::Args& ap, const attn::Plan& Pp) {
  run_main<HD>(a, P);
  if (a.n_prefix > 0) run_main<HD>(ap, Pp);
  if (a.partial)
    run_grid(unsigned(P.rows), unsigned(P.grid_y), unsigned(P.grid_z), 0, [&] {
      if (attn::merge_grouped()) attn::merge_kernel<HD, true>(a, P.rows, ap, Pp.rows);
      else attn::merge_kernel<HD, false>(a, P.rows, ap, Pp.rows);
    });
}

// A small multiprocessor count so that short contexts still split across blocks.
constexpr int kEmulatedSms = 4;

struct Ran {
  attn_test::Result result;
  attn::Plan plan;
  attn::Plan prefix_plan;  // the prefix pass's (empty without shared prefixes)
};

// Args::early for the cases run by run_case (the lanes8 kernel's early-start path; its griddepcontrol
// waits are no-ops here, the path's bookkeeping and exits run).
int g_emu_early = 0;
// With g_emu_early: the decode kernel encodes the query rows' own K (and plain V) rows itself (Args::self_kv) from
// the fixture's f32 rows, and the pool's bytes of those rows are junk while the kernels run (restored for the
// check), as if the store had not written them yet. K of a type it cannot encode: no self-encoding. V of such a
// type stays in the pool (the kernel copies it after its wait, a no-op here).
bool g_emu_self = false;

Ran run_case(const Case& c) {
  attn::g_tables = cuda::make_kv_decode_tables();
  const auto f = attn_test::build(c);
  const attn::Plan P = attn::plan_attention(f->L, f->p, f->b, kEmulatedSms);
  const attn::Plan Pp = f->b.n_prefix > 0 ? attn::plan_prefix(f->L, f->p, f->b, kEmulatedSms) : attn::Plan{};
  const size_t own = P.partial_o_floats + P.partial_ml_floats, pre = Pp.partial_o_floats + Pp.partial_ml_floats;
  std::vector<float> part(own + pre, NAN);
  std::vector<float> out(f->out_floats());
  attn_test::poison(out.data(), out.size());
  attn::Args a = attn::make_args(f->L, f->p, f->b, P, f->q.data(), out.data(), part.empty() ? nullptr : part.data());
  a.early = P.kernel == attn::Kernel::Decode && P.variant != attn::DecodeVariant::Slots && f->b.n_prefix == 0 ? g_emu_early : 0;
  std::vector<std::pair<uint8_t*, std::vector<uint8_t>>> hidden;  // (row, its bytes) made junk while running
  if (g_emu_self && a.early && attn::self_encodable(c.kt)) {
    a.self_kv = 1 | (attn::self_encodable(c.vt) ? 2 : 0);
    a.new_k = f->new_k.data();
    a.new_v = f->new_v.data();
    KvBlockStore& store = *f->store;
    for (size_t s = 0; s < c.seqs.size(); ++s)
      for (int pos = c.seqs[s].pos0; pos < c.seqs[s].pos0 + c.seqs[s].n_q; ++pos) {
        const int blk = f->tables[s][size_t(pos / c.block_tokens)], slot = pos % c.block_tokens;
        for (int g = 0; g < c.n_head_kv; ++g) {
          const size_t row = size_t(g) * size_t(c.block_tokens) + size_t(slot);
          hidden.push_back({const_cast<uint8_t*>(store.k_part(blk, attn_test::kLayer)) + row * store.k_head_bytes(), {}});
          hidden.back().second.assign(hidden.back().first, hidden.back().first + store.k_head_bytes());
          if (a.self_kv & 2) {
            hidden.push_back({const_cast<uint8_t*>(store.v_part(blk, attn_test::kLayer)) + row * store.v_head_bytes(), {}});
            hidden.back().second.assign(hidden.back().first, hidden.back().first + store.v_head_bytes());
          }
        }
      }
    for (auto& [p, bytes] : hidden) std::fill(p, p + bytes.size(), uint8_t(0xA5));
  }
  const attn::Args ap =
      f->b.n_prefix > 0 ? attn::make_args(f->L, f->p, f->b, Pp, f->q.data(), out.data(), part.data() + own, true) : a;
  switch (c.head_dim) {
    case 32: run_kernels<32>(a, P, ap, Pp); break;
    case 64: run_kernels<64>(a, P, ap, Pp); break;
    case 128: run_kernels<128>(a, P, ap, Pp); break;
    case 256: run_kernels<256>(a, P, ap, Pp); break;
    default: run_kernels<512>(a, P, ap, Pp); break;
  }
  for (auto& [p, bytes] : hidden) std::copy(bytes.begin(), bytes.end(), p);
  return {attn_test::check_outputs(*f, out), P, Pp};
}

std::string plan_name(const attn::Plan& P) {
  const char* kernel = P.kernel == attn::Kernel::Tiled ? (P.rows == attn::kPrefix256Rows ? "prefix (256-row mma)"
                                                          : P.rows == attn::kPrefixRows ? "prefix (wide mma)"
                                                          : P.mma                      ? "tiled (mma)"
                                                                                       : "tiled (f32)")
                       : P.variant == attn::DecodeVariant::Slots ? "decode (slots)"
                       : P.tc                                    ? "decode (tensor-core)"
                                                                 : "decode (lanes8)";
  return std::string(kernel) + " rows " + std::to_string(P.rows) +
         " splits " + std::to_string(P.n_splits) + " chunk " + std::to_string(P.chunk) + " head parts " +
         std::to_string(P.hparts) + " query tiles " + std::to_string(P.qtiles) + (P.window_splits ? " window splits" : "");
}

// Selects a decode kernel for the scope (attn::decode_variant is process-wide), and for prefill
// plans the tensor-core kernel (Lanes8) or the f32 tiled kernel (Slots).
struct VariantScope {
  attn::DecodeVariant saved = attn::decode_variant();
  bool saved_mma = attn::prefill_mma();
  explicit VariantScope(attn::DecodeVariant v) {
    attn::decode_variant() = v;
    attn::prefill_mma() = v != attn::DecodeVariant::Slots;
  }
  ~VariantScope() {
    attn::decode_variant() = saved;
    attn::prefill_mma() = saved_mma;
  }
};
constexpr attn::DecodeVariant kVariants[] = {attn::DecodeVariant::Slots, attn::DecodeVariant::Lanes8};  // Lanes8x4: same code

// expect_ok under the current plan settings.
void expect_ok_with_plan(const Case& c, attn::Kernel kernel, bool split) {
  for (attn::DecodeVariant v : kVariants) {
    const VariantScope scope(v);
    const Ran r = run_case(c);
    EXPECT_LE(r.result.worst, attn_test::kBound)
        << attn_test::describe(c) << "\n  plan: " << plan_name(r.plan) << "\n  worst row: " << r.result.where;
    EXPECT_EQ(r.plan.kernel, kernel) << attn_test::describe(c) << "\n  plan: " << plan_name(r.plan);
    // lanes8 plans stay within one wave at their occupancy (3-4 blocks per multiprocessor, splits
    // per item rounded down): with more than half a wave of work items there is no split.
    // Slots plans (and tiled ones) split only while the work items are fewer than 4 blocks per multiprocessor.
    const int64_t items = int64_t(r.plan.grid_y) * r.plan.grid_z;
    const bool filled = r.plan.kernel == attn::Kernel::Decode &&
                        (r.plan.variant != attn::DecodeVariant::Slots
                             ? 2 * items > attn::decode8_plan_blocks(r.plan.variant, c.head_dim, c.kt, c.vt) * kEmulatedSms
                             : items >= 4 * kEmulatedSms);
    // Decode launches bounded by attn::one_split_keys() keys read them in one split (no merge); with window splits
    // the bound is the window's span (plan_attention).
    int bound = 0, max_nq = 0;
    for (const SeqSpec& q : c.seqs) bound = std::max(bound, q.pos0 + q.n_q), max_nq = std::max(max_nq, q.n_q);
    int span = bound + c.extra_kv_bound;
    if (r.plan.window_splits)
      span = std::min(span, attn::kWindowSplitAlign - 1 + c.window + max_nq + c.extra_nq_bound - 1);
    const bool one_split = r.plan.kernel == attn::Kernel::Decode && span <= attn::one_split_keys();
    EXPECT_EQ(r.plan.n_splits > 1, split && !filled && !one_split)
        << attn_test::describe(c) << "\n  plan: " << plan_name(r.plan);
    if (kernel == attn::Kernel::Decode)
      EXPECT_EQ(r.plan.variant, attn::decode8_supports(c.head_dim) ? v : attn::DecodeVariant::Slots) << plan_name(r.plan);
    else
      EXPECT_EQ(r.plan.mma, attn::prefill_mma() && attn::tiled_mma_supports(c.head_dim) &&
                                r.plan.rows == attn::kMmaTiledRows)
          << plan_name(r.plan);
  }
}

// Sets attn::small_step_decode_q for a scope (0: the plan before 2026-12-02, the tiled kernel for
// multi-token steps that do not fit one block's rows).
struct SmallQScope {
  int saved;
  explicit SmallQScope(int v) : saved(attn::small_step_decode_q()) { attn::small_step_decode_q() = v; }
  ~SmallQScope() { attn::small_step_decode_q() = saved; }
};

// Checks the case and that it ran the expected kernel with (or without) key splits; decode cases
// with both decode kernels (Lanes8 falls back to Slots for head sizes 256 and 512). `kernel` is the
// plan's kernel before 2026-12-02 (small_step_decode_q 0); the case runs with that plan and with steps
// of up to 8 rows per sequence on the decode kernel in query tiles (the default takes up to 4).
void expect_ok(const Case& c, attn::Kernel kernel, bool split) {
  int max_q = 0;
  for (const SeqSpec& q : c.seqs) max_q = std::max(max_q, q.n_q);
  max_q += c.extra_nq_bound;
  for (const int small_q : {0, 8}) {
    const SmallQScope plan(small_q);
    const attn::Kernel want = kernel == attn::Kernel::Tiled && max_q <= small_q ? attn::Kernel::Decode : kernel;
    expect_ok_with_plan(c, want, split);
  }
}

TEST(CudaAttentionEmulation, EveryTypeAsKAndAsVDecode) {
  uint32_t seed = 1;
  const int n = int(std::size(kAllKvTypes));
  for (int i = 0; i < n; ++i) {
    Case c;
    c.kt = kAllKvTypes[i], c.vt = kAllKvTypes[(i + 3) % n], c.head_dim = 64, c.seed = seed++;
    c.seqs = {{0, 1}, {36, 1}, {299, 1}};
    expect_ok(c, attn::Kernel::Decode, true);
  }
}

TEST(CudaAttentionEmulation, EveryTypeAsKAndAsVPrefill) {
  uint32_t seed = 50;
  const int n = int(std::size(kAllKvTypes));
  for (int i = 0; i < n; ++i) {
    Case c;
    c.kt = kAllKvTypes[i], c.vt = kAllKvTypes[(i + 5) % n], c.head_dim = 64, c.seed = seed++;
    c.seqs = {{20, 37}, {0, 5}};
    expect_ok(c, attn::Kernel::Tiled, false);
  }
}

// Head size 32 (qwen2's fixture; small models): the slots decode kernel (2 lanes per key), the f32 tiled
// kernel with its 64-row shape only (no 16-row one: plan_tiled_rows), and the merge, every type as K and V.
TEST(CudaAttentionEmulation, HeadSize32EveryTypeAsKAndAsV) {
  uint32_t seed = 70;
  const int n = int(std::size(kAllKvTypes));
  for (int i = 0; i < n; ++i) {
    Case c;
    c.kt = kAllKvTypes[i], c.vt = kAllKvTypes[(i + 3) % n], c.head_dim = 32, c.seed = seed++;
    c.seqs = {{0, 1}, {36, 1}, {299, 1}};
    expect_ok(c, attn::Kernel::Decode, true);
    c.seqs = {{20, 37}, {0, 5}};
    c.seed = seed++;
    expect_ok(c, attn::Kernel::Tiled, false);
  }
}

TEST(CudaAttentionEmulation, HeadSizes) {
  uint32_t seed = 100;
  for (int hd : {128, 256, 512}) {
    Case c;
    c.kt = KvType::Turbo3T, c.vt = KvType::Turbo3, c.head_dim = hd, c.n_head_kv = 1, c.seed = seed++;
    c.seqs = {{0, 1}, {200, 1}};
    expect_ok(c, attn::Kernel::Decode, true);
    c.kt = KvType::Q8_0, c.vt = KvType::Turbo4T, c.seed = seed++;
    c.seqs = {{180, 20}};
    expect_ok(c, attn::Kernel::Tiled, true);
  }
}

// The tiled tensor-core kernel at head size 256 (attention_mma_kernel<256>, 64 rows: Qwen3.5's and Gemma's
// prefill), against the f32 kernel's bound: Qwen3.5's attention shape (GQA 4, q8_0 K / turbo3t V, two prompt
// chunks of uneven length, one past a 64-row block), Gemma's (softcap, sliding window, f16) and turbo K, each
// with key splits and without.
TEST(CudaAttentionEmulation, TiledMmaHeadSize256) {
  uint32_t seed = 170;
  struct Shape {
    KvType kt, vt;
    int window;
    float softcap;
  };
  for (const Shape& sh : {Shape{KvType::Q8_0, KvType::Turbo3T, 0, 0.0f}, Shape{KvType::F16, KvType::F16, 50, 30.0f},
                          Shape{KvType::Turbo3T, KvType::Q4_0, 0, 0.0f}}) {
    for (auto seqs : {std::vector<SeqSpec>{{0, 70}, {33, 17}}, std::vector<SeqSpec>{{400, 24}}}) {
      Case c;
      c.kt = sh.kt, c.vt = sh.vt, c.head_dim = 256, c.n_head_kv = 2, c.group = 4, c.window = sh.window,
      c.softcap = sh.softcap, c.seqs = seqs, c.seed = seed++;
      for (attn::DecodeVariant v : kVariants) {
        const VariantScope scope(v);
        const Ran r = run_case(c);
        EXPECT_LE(r.result.worst, attn_test::kBound)
            << attn_test::describe(c) << "\n  plan: " << plan_name(r.plan) << "\n  worst row: " << r.result.where;
        EXPECT_EQ(r.plan.kernel, attn::Kernel::Tiled) << plan_name(r.plan);
        EXPECT_EQ(r.plan.mma, v != attn::DecodeVariant::Slots) << plan_name(r.plan);
        EXPECT_EQ(r.plan.rows, r.plan.mma ? attn::kMmaTiledRows : attn::large_rows(256)) << plan_name(r.plan);
      }
    }
  }
}

// Long prompt passes (at least attn::kPrefill256MinRows rows a KV head) on the 256-row kernel with its
// partials merged (attn::prefill256): scaled-product types (q8_0 / turbo3t, f16), split ones (bf16 K,
// q4_0 V), a sliding window with softcap, attention sinks, GQA 4 and 8, head sizes 64 and 128, a second
// shorter sequence and a sequence starting past a pool block boundary; against the reference's bound. With
// prefill256 off the same cases take the 64-row tiled kernel.
TEST(CudaAttentionEmulation, LongPrefillOn256RowKernel) {
  uint32_t seed = 1300;
  struct Shape {
    KvType kt, vt;
    int hd, group, window;
    float softcap;
    bool sinks;
  };
  for (const Shape& sh : {Shape{KvType::Q8_0, KvType::Turbo3T, 128, 4, 0, 0.0f, false},
                          Shape{KvType::F16, KvType::F16, 64, 8, 100, 30.0f, false},
                          Shape{KvType::BF16, KvType::Q4_0, 64, 4, 0, 0.0f, true}}) {
    Case c;
    c.kt = sh.kt, c.vt = sh.vt, c.head_dim = sh.hd, c.n_head_kv = 1, c.group = sh.group, c.window = sh.window,
    c.softcap = sh.softcap, c.sinks = sh.sinks, c.seed = seed++;
    c.seqs = {{37, 256}, {0, 90}};
    for (const bool wide : {true, false}) {
      const bool saved = attn::prefill256();
      attn::prefill256() = wide;
      const Ran r = run_case(c);
      attn::prefill256() = saved;
      EXPECT_LE(r.result.worst, attn_test::kBound)
          << attn_test::describe(c) << "\n  plan: " << plan_name(r.plan) << "\n  worst row: " << r.result.where;
      EXPECT_EQ(r.plan.kernel, attn::Kernel::Tiled) << plan_name(r.plan);
      EXPECT_EQ(r.plan.rows, wide ? attn::kPrefix256Rows : attn::kMmaTiledRows) << plan_name(r.plan);
    }
  }
  // Below the threshold (255 queries x GQA 4 = 1020 rows) the 64-row kernel.
  Case c;
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = 64, c.n_head_kv = 1, c.seqs = {{0, 255}}, c.seed = seed++;
  const Ran r = run_case(c);
  EXPECT_EQ(r.plan.rows, attn::kMmaTiledRows) << plan_name(r.plan);
  EXPECT_LE(r.result.worst, attn_test::kBound);
}

// The merge's serial O loop (POLYKV_CUDA_MERGE=serial, kept for A/B) on split decode and prefill rows of
// every head size; the other tests run the default grouped loop.
TEST(CudaAttentionEmulation, SerialMergeHeadSizes) {
  struct Restore {
    ~Restore() { attn::merge_grouped() = true; }
  } restore;
  attn::merge_grouped() = false;
  uint32_t seed = 150;
  for (int hd : {32, 64, 128, 256, 512}) {
    Case c;
    c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = hd, c.n_head_kv = 1, c.seed = seed++;
    c.seqs = {{0, 1}, {700, 1}};
    expect_ok(c, attn::Kernel::Decode, true);
    c.seqs = {{600, 20}};
    expect_ok(c, attn::Kernel::Tiled, true);
  }
}

// The tiled kernel's small shape (the plan before 2026-12-02; expect_ok runs both plans).
TEST(CudaAttentionEmulation, SmallStepsGqaAndHeadParts) {
  uint32_t seed = 200;
  Case c;
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3, c.head_dim = 64, c.seed = seed++;
  c.seqs = {{150, 3}, {0, 2}};  // 4 heads x 3 tokens: the small tiled shape
  expect_ok(c, attn::Kernel::Tiled, true);
  c.head_dim = 128, c.seed = seed++;  // the small shape with two rows per thread in the accumulation
  expect_ok(c, attn::Kernel::Tiled, true);
  c.head_dim = 64;
  c.group = 1, c.n_head_kv = 3, c.seqs = {{150, 3}, {9, 4}}, c.seed = seed++;  // 4 tokens of 1 head: decode
  expect_ok(c, attn::Kernel::Decode, true);
  c.window = 3, c.seed = seed++;  // each of the 4 tokens of a block sees a different window
  expect_ok(c, attn::Kernel::Decode, true);
  c.window = 0;
  c.group = 8, c.n_head_kv = 1, c.seqs = {{170, 1}, {3, 1}}, c.seed = seed++;  // two head parts of 4
  expect_ok(c, attn::Kernel::Decode, true);
  c.group = 6, c.seed = seed++;  // a partial second head part
  expect_ok(c, attn::Kernel::Decode, true);
  c.head_dim = 512, c.group = 32, c.seqs = {{40, 2}}, c.seed = seed++;  // tiled, 16 rows: two head parts
  expect_ok(c, attn::Kernel::Tiled, false);
}

// More small multi-token steps (verify steps, short prompts), which the default plan runs on the decode
// kernel in query tiles of its 4 rows (expect_ok names the old plan's kernel and runs both): GQA groups
// of 2-32 (head parts), 2-9 rows, windows, softcaps, one split and key splits, head sizes 64-512.
TEST(CudaAttentionEmulation, SmallStepsOnTheDecodeKernel) {
  uint32_t seed = 250;
  Case c;
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = 128, c.seqs = {{299, 8}, {40, 5}, {7, 1}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  c.group = 2, c.n_head_kv = 2, c.seqs = {{600, 8}, {3, 2}}, c.seed = seed++;  // 2 rows of 2 heads per tile
  expect_ok(c, attn::Kernel::Tiled, true);
  c.group = 8, c.n_head_kv = 1, c.seqs = {{90, 4}}, c.seed = seed++;  // two head parts x 4 query tiles
  expect_ok(c, attn::Kernel::Tiled, false);
  c.group = 4, c.window = 5, c.seqs = {{200, 6}, {12, 8}}, c.seed = seed++;  // each row its own window
  expect_ok(c, attn::Kernel::Tiled, true);
  c.window = 0, c.softcap = 30.0f, c.kt = KvType::F16, c.vt = KvType::F16, c.seqs = {{1000, 7}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  c.softcap = 0.0f, c.head_dim = 256, c.kt = KvType::Q8_0, c.vt = KvType::Q8_0, c.seqs = {{130, 2}, {0, 3}},
  c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  c.head_dim = 512, c.group = 32, c.seqs = {{40, 2}}, c.seed = seed++;  // 8 head parts x 2 query tiles
  expect_ok(c, attn::Kernel::Tiled, false);
  c.head_dim = 64, c.group = 4, c.seqs = {{20, 9}}, c.seed = seed++;  // 9 rows: the tiled kernel in both plans
  expect_ok(c, attn::Kernel::Tiled, false);
}

TEST(CudaAttentionEmulation, WindowSoftcapAndSplitPrefill) {
  uint32_t seed = 300;
  for (int window : {0, 1, 50})
    for (float softcap : {0.0f, 20.0f}) {
      Case c;
      c.kt = KvType::F16, c.vt = KvType::Q4_0, c.head_dim = 64, c.window = window, c.softcap = softcap, c.seed = seed++;
      c.seqs = {{0, 1}, {250, 1}};
      expect_ok(c, attn::Kernel::Decode, true);
      c.seqs = {{150, 40}}, c.seed = seed++;
      expect_ok(c, attn::Kernel::Tiled, true);
    }
}

TEST(CudaAttentionEmulation, SharedBlocksOddBlockSizesAndLooseBounds) {
  uint32_t seed = 400;
  Case c;
  c.kt = KvType::BF16, c.vt = KvType::Turbo2T, c.head_dim = 64, c.block_tokens = 7, c.seed = seed++;
  c.seqs = {{210, 1}, {180, 1, 0, 20}, {150, 1, 0, 20}, {30, 1}};
  expect_ok(c, attn::Kernel::Decode, true);
  c.seqs = {{100, 1}, {140, 9, 0, 10}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  // Host bounds far above the real batch: lengths come from the (device) arrays.
  c.block_tokens = 16, c.seqs = {{0, 1}, {260, 1}}, c.extra_kv_bound = 3000, c.seed = seed++;
  expect_ok(c, attn::Kernel::Decode, true);
  c.n_head_kv = 1, c.seqs = {{0, 3}, {90, 20}}, c.extra_nq_bound = 40, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
}

// The lanes8 decode plans size their key splits to one wave at the kernel's occupancy (a second,
// mostly idle wave costs up to a third at 131072 keys): Llama-3.1-8B's attention on an H200
// (132 multiprocessors, 8 KV heads).
TEST(CudaAttentionEmulation, Lanes8SplitsFillOneWave) {
  constexpr int kSms = 132, kHeadKv = 8;
  for (int n_kv : {4096, 32768, 131072}) {
    const cuda::KvLayerDevice L{KvType::Q8_0, KvType::Turbo3T, 64, kHeadKv, 128, 128,
                                kv_head_bytes(KvType::Q8_0, 128), kv_head_bytes(KvType::Turbo3T, 128),
                                nullptr, 0, 0};
    AttentionParams p;
    p.n_head = 32;
    p.scale = 0.088f;
    const cuda::AttentionBatchDevice b{1, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, n_kv};
    for (attn::DecodeVariant v : {attn::DecodeVariant::Lanes8, attn::DecodeVariant::Lanes8x4}) {
      const VariantScope scope(v);
      const attn::Plan P = attn::plan_attention(L, p, b, kSms);
      const int slots = attn::decode8_plan_blocks(v, 128, L.k_type, L.v_type) * kSms, blocks = P.n_splits * kHeadKv;
      EXPECT_LE(blocks, slots) << n_kv << " keys: " << plan_name(P);
      if (n_kv == 131072) EXPECT_GE(blocks, slots * 9 / 10) << plan_name(P);
      EXPECT_GE(int64_t(P.chunk) * P.n_splits, n_kv) << plan_name(P);
    }
  }
}

// Shared prefixes read once for a group's queries (the prefix pass) and merged with each sequence's
// own keys: decode and multi-token steps, a group next to unshared sequences, a sequence of a group
// whose prefix is its whole context but the queries, empty groups (a graph sized for more), windows
// and softcap.
TEST(CudaAttentionEmulation, SharedPrefixCascade) {
  uint32_t seed = 500;
  Case c;
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3, c.head_dim = 64, c.seed = seed++;
  // 0 owns 230 keys; 1, 2 share its first 12 blocks (192 keys); 3 shares nothing; 4 and 5 share 2
  // blocks of 3 (another group).
  c.seqs = {{229, 1}, {200, 1, 0, 12}, {192, 1, 0, 12}, {40, 1}, {60, 1, 3, 2}, {33, 1, 3, 2}};
  c.prefix = {{0, 3, 12}, {3, 3, 2}};
  expect_ok(c, attn::Kernel::Decode, true);
  c.extra_prefix_groups = 2, c.seed = seed++;
  expect_ok(c, attn::Kernel::Decode, true);
  c.extra_prefix_groups = 0;
  c.seqs = {{220, 6}, {200, 5, 0, 12}, {192, 7, 0, 12}, {40, 2}, {60, 3, 3, 2}, {33, 1, 3, 2}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  c.window = 100, c.softcap = 25.0f, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  c.seqs = {{229, 1}, {200, 1, 0, 12}, {192, 1, 0, 12}, {40, 1}, {60, 1, 3, 2}, {33, 1, 3, 2}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Decode, true);
  c.window = 0, c.softcap = 0.0f;
  c.kt = KvType::Turbo4T, c.vt = KvType::F16, c.head_dim = 128, c.group = 8, c.n_head_kv = 1;  // head parts
  c.seqs = {{150, 1}, {170, 1, 0, 9}, {144, 1, 0, 9}}, c.prefix = {{0, 3, 9}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Decode, true);
}

// The embedded model's shape (head_dim 128, 2 KV heads, GQA 2, 256-token blocks) as the model runs it
// on the GPU: a 38-token prompt, then single-token decode steps, with the launch bound bucketed to 256
// keys (CudaBackend::kv_bucket). Its q8_0/q8_0 run hung on the H200 (2026-11-30).
void embedded_model_steps_with(KvType kt, KvType vt) {
  Case c;
  c.kt = kt, c.vt = vt, c.head_dim = 128, c.n_head_kv = 2, c.group = 2, c.block_tokens = 256, c.seed = 900;
  c.seqs = {{0, 38}};
  c.extra_kv_bound = 256 - 38;
  {
    const Ran r = run_case(c);
    EXPECT_LE(r.result.worst, attn_test::kBound) << attn_test::describe(c) << "\n  plan: " << plan_name(r.plan);
  }
  for (int p = 38; p < 42; ++p) {
    c.seqs = {{p, 1}};
    c.extra_kv_bound = 256 - (p + 1);
    const Ran r = run_case(c);
    EXPECT_LE(r.result.worst, attn_test::kBound) << attn_test::describe(c) << "\n  plan: " << plan_name(r.plan);
  }
}

void embedded_model_steps(KvType kt, KvType vt) {
  for (attn::DecodeVariant v : kVariants) {
    const VariantScope scope(v);
    embedded_model_steps_with(kt, vt);
  }
}

// Single-token decode at small depths with the launch bound the CUDA backend uses (its kv_bucket:
// 256, then powers of two): bounds up to attn::one_split_keys() (256 by default) make ONE key split
// whose block writes the normalized rows (no partials, no merge); larger ones split as before. Also
// with the one-split plan switched off (the old plan) and forced up to 1024 keys.
int backend_bucket(int keys) {
  int b = 256;
  while (b < keys) b *= 2;
  return b;
}

struct OneSplitScope {
  int saved = attn::one_split_keys();
  explicit OneSplitScope(int keys) { attn::one_split_keys() = keys; }
  ~OneSplitScope() { attn::one_split_keys() = saved; }
};

TEST(CudaAttentionEmulation, OneSplitAtSmallDepths) {
  const std::pair<KvType, KvType> pairs[] = {{KvType::Q8_0, KvType::Turbo3T}, {KvType::F16, KvType::F16},
                                             {KvType::Turbo3T, KvType::Turbo3T}};
  uint32_t seed = 1200;
  for (int one_split : {256, 0, 1024}) {
    const OneSplitScope scope(one_split);
    for (const auto& [kt, vt] : pairs)
      for (int depth : {1, 7, 255, 256, 257, 1000}) {
        Case c;
        c.kt = kt, c.vt = vt, c.head_dim = 128, c.n_head_kv = 2, c.group = 4, c.block_tokens = 64, c.seed = seed++;
        c.seqs = {{depth - 1, 1}};
        c.extra_kv_bound = backend_bucket(depth) - depth;
        const bool one = backend_bucket(depth) <= one_split;
        for (attn::DecodeVariant v : kVariants) {
          const VariantScope vs(v);
          const Ran r = run_case(c);
          const std::string what = attn_test::describe(c) + " one_split_keys " + std::to_string(one_split) +
                                   "\n  plan: " + plan_name(r.plan);
          EXPECT_LE(r.result.worst, attn_test::kBound) << what << "\n  worst row: " << r.result.where;
          EXPECT_EQ(r.plan.n_splits == 1, one) << what;  // bounds of >= 256 keys split otherwise
          if (one) EXPECT_EQ(r.plan.partial_o_floats, 0u) << what;
        }
      }
  }
}

TEST(CudaAttentionEmulation, EmbeddedModelShapeQ8) { embedded_model_steps(KvType::Q8_0, KvType::Q8_0); }
TEST(CudaAttentionEmulation, EmbeddedModelShapeF16) { embedded_model_steps(KvType::F16, KvType::F16); }
TEST(CudaAttentionEmulation, EmbeddedModelShapeTurbo) { embedded_model_steps(KvType::Turbo3T, KvType::Turbo3T); }

// The prefix pass's kernels (attention_cuda_plan.h PrefixKernel): many sequences sharing a prefix of
// awkward length (block size 7) with private suffixes, with each prefix kernel; the wide 128-row
// tensor-core kernel must be planned whenever a KV head has more than 64 sharing rows.
struct PrefixScope {
  attn::PrefixKernel saved = attn::prefix_kernel();
  explicit PrefixScope(attn::PrefixKernel k) { attn::prefix_kernel() = k; }
  ~PrefixScope() { attn::prefix_kernel() = saved; }
};
const char* prefix_kernel_name(attn::PrefixKernel k) {
  return k == attn::PrefixKernel::F32 ? "f32" : k == attn::PrefixKernel::Mma ? "mma64" : k == attn::PrefixKernel::Wide ? "wide128" : "wide256";
}

// n sequences sharing the first `blocks` blocks of sequence 0 (one group), n_q queries each, private
// suffixes of different lengths.
Case prefix_case(KvType kt, KvType vt, int hd, int n, int blocks, int n_q, uint32_t seed) {
  Case c;
  c.kt = kt, c.vt = vt, c.head_dim = hd, c.n_head_kv = 1, c.group = 4, c.block_tokens = 7, c.seed = seed;
  const int prefix = blocks * c.block_tokens;
  c.seqs.push_back({prefix + 9, n_q});
  for (int i = 1; i < n; ++i) c.seqs.push_back({prefix + (5 * i) % 23, n_q, 0, blocks});
  c.prefix = {{0, n, blocks}};
  return c;
}

constexpr attn::PrefixKernel kAllPrefixKernels[] = {attn::PrefixKernel::F32, attn::PrefixKernel::Mma,
                                                    attn::PrefixKernel::Wide, attn::PrefixKernel::Wide256};
void expect_prefix_ok(const Case& c, const std::vector<attn::PrefixKernel>& kernels = {std::begin(kAllPrefixKernels),
                                                                                       std::end(kAllPrefixKernels)}) {
  int rows = 0;  // rows sharing the prefix per KV head
  for (const SeqSpec& q : c.seqs) rows += q.n_q * c.group;
  for (attn::PrefixKernel k : kernels) {
    const PrefixScope scope(k);
    const Ran r = run_case(c);
    const std::string what = attn_test::describe(c) + "\n  prefix kernel " + prefix_kernel_name(k) +
                             ", prefix plan: " + plan_name(r.prefix_plan) + "\n  plan: " + plan_name(r.plan);
    EXPECT_LE(r.result.worst, attn_test::kBound) << what << "\n  worst row: " << r.result.where;
    // Wide256: beyond 128 rows the 256-row kernel, beyond 64 the 128-row one; Wide: beyond 64 the 128-row.
    const bool w256 = k == attn::PrefixKernel::Wide256 && rows > attn::kPrefixRows;
    const bool wide = !w256 && (k == attn::PrefixKernel::Wide || k == attn::PrefixKernel::Wide256) &&
                      rows > attn::large_rows(c.head_dim);
    EXPECT_EQ(r.prefix_plan.rows == attn::kPrefixRows, wide) << what;
    EXPECT_EQ(r.prefix_plan.rows == attn::kPrefix256Rows, w256) << what;
    if (k == attn::PrefixKernel::F32) EXPECT_FALSE(r.prefix_plan.mma) << what;
    if (k != attn::PrefixKernel::F32 && rows > attn::kSmallRows) EXPECT_TRUE(r.prefix_plan.mma) << what;
  }
}

TEST(CudaAttentionEmulation, PrefixPassManySequences) {
  // 40 sequences x GQA 4 = 160 rows: two wide blocks, the second partly empty; 301 shared keys.
  expect_prefix_ok(prefix_case(KvType::Q8_0, KvType::Turbo3T, 64, 40, 43, 1, 600));
  // Turbo K (the queries rotated in the prologue's two halves), 3 tokens each (multi-token steps).
  expect_prefix_ok(prefix_case(KvType::Turbo4T, KvType::F16, 64, 23, 30, 3, 601));
  // 5 and 16 sequences: the 64-row shapes (20 and 64 rows); 2: the small f32 shape.
  expect_prefix_ok(prefix_case(KvType::F16, KvType::F16, 64, 16, 20, 1, 602));
  expect_prefix_ok(prefix_case(KvType::Q8_0, KvType::Q8_0, 64, 5, 20, 1, 603));
  expect_prefix_ok(prefix_case(KvType::Q8_0, KvType::Q8_0, 64, 2, 20, 1, 604));
}

// The 256-row kernel at head size 128 (the others run these shapes in the tests above): 40 sequences
// x GQA 4 = 160 rows (warps 5..7 without rows), 301 shared keys in splits of 128 (4 tiles: both
// stages, the tile-ahead addresses, a partial last tile); f16 K and V (the 2-product path), then
// q8_0 / turbo3t with a window and softcap (the masked path), then 40 x 2 tokens = 320 rows (2 query
// tiles, the second partly empty) with turbo K (queries rotated in the prologue's parts).
// Each case runs both products (scaled: f16 values and f32 scales, two MMAs; split: hi / lo, three).
struct Products256Scope {
  attn::Prefix256Products saved = attn::prefix256_products();
  explicit Products256Scope(attn::Prefix256Products p) { attn::prefix256_products() = p; }
  ~Products256Scope() { attn::prefix256_products() = saved; }
};
TEST(CudaAttentionEmulation, PrefixPass256Rows) {
  const std::vector<attn::PrefixKernel> k256 = {attn::PrefixKernel::Wide256};
  for (attn::Prefix256Products products : {attn::Prefix256Products::Scaled, attn::Prefix256Products::Split}) {
    SCOPED_TRACE(products == attn::Prefix256Products::Scaled ? "scaled products" : "split products");
    const Products256Scope scope(products);
    expect_prefix_ok(prefix_case(KvType::F16, KvType::F16, 128, 40, 43, 1, 620), k256);
    Case c = prefix_case(KvType::Q8_0, KvType::Turbo3T, 128, 40, 43, 1, 621);
    c.window = 100, c.softcap = 30.0f;
    expect_prefix_ok(c, k256);
    expect_prefix_ok(prefix_case(KvType::Turbo3T, KvType::Q8_0, 128, 40, 20, 2, 622), k256);
  }
}

// The scaled products on every scaled-exact type as K and as V (per-32-value scales: q8_0, q4_0; per row:
// turbo, trellis, f16), and the split kernel that f32 / bf16 K or V take even with scaled products on.
TEST(CudaAttentionEmulation, PrefixPass256RowsScaledTypes) {
  const std::vector<attn::PrefixKernel> k256 = {attn::PrefixKernel::Wide256};
  const Products256Scope scope(attn::Prefix256Products::Scaled);
  EXPECT_TRUE(attn::prefix256_scaled(KvType::Q4_0, KvType::Turbo2T));
  EXPECT_FALSE(attn::prefix256_scaled(KvType::F32, KvType::Q8_0));
  EXPECT_FALSE(attn::prefix256_scaled(KvType::Q8_0, KvType::BF16));
  uint32_t seed = 630;
  for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Q8_0}, std::pair{KvType::Q4_0, KvType::Turbo3},
                               std::pair{KvType::Turbo4, KvType::Q4_0}, std::pair{KvType::Turbo2T, KvType::Turbo4T},
                               std::pair{KvType::F32, KvType::Q8_0}, std::pair{KvType::Q8_0, KvType::BF16}})
    expect_prefix_ok(prefix_case(kt, vt, 128, 40, 20, 1, seed++), k256);
  expect_prefix_ok(prefix_case(KvType::Q4_0, KvType::Turbo3T, 64, 40, 20, 1, seed++), k256);  // head size 64
}

TEST(CudaAttentionEmulation, PrefixPassWideHeadSize128WindowSoftcap) {
  Case c = prefix_case(KvType::Q8_0, KvType::Turbo3T, 128, 20, 19, 1, 610);  // 80 rows, 133 keys
  expect_prefix_ok(c);
  c.window = 60, c.softcap = 30.0f, c.seed = 611;  // rows whose window starts inside the prefix
  expect_prefix_ok(c);
}

// The prefix plans at the benchmark's shape (H200: 132 multiprocessors; Llama-3.1-8B: 8 KV heads, GQA
// 4, head_dim 128; one group over 32768 keys): 4 agents the small f32 shape, 16 the 64-row kernel,
// 64 the wide kernel in one wave at its 2 blocks per multiprocessor (8 x 2 query tiles x 16 splits).
TEST(CudaAttentionEmulation, PrefixPlansAtTheAgentsBenchShape) {
  constexpr int kSms = 132, kHeadKv = 8, kKeys = 32768;
  const cuda::KvLayerDevice L{KvType::Q8_0, KvType::Turbo3T, 64, kHeadKv, 128, 128,
                              kv_head_bytes(KvType::Q8_0, 128), kv_head_bytes(KvType::Turbo3T, 128),
                              nullptr, 0, 0};
  AttentionParams p;
  p.n_head = 32;
  p.scale = 0.088f;
  const PrefixScope scope(attn::PrefixKernel::Wide);
  for (int agents : {4, 16, 64}) {
    cuda::AttentionBatchDevice b{agents, nullptr, nullptr, nullptr, nullptr, nullptr, agents, 1, kKeys + 64};
    b.n_prefix = 1, b.max_prefix_q = agents, b.max_prefix_kv = kKeys;
    const attn::Plan P = attn::plan_prefix(L, p, b, kSms);
    EXPECT_EQ(P.rows, agents == 4 ? attn::kSmallRows : agents == 16 ? attn::large_rows(128) : attn::kPrefixRows)
        << agents << " agents: " << plan_name(P);
    EXPECT_EQ(P.mma, agents > 4) << plan_name(P);
    EXPECT_GE(int64_t(P.chunk) * P.n_splits, kKeys) << plan_name(P);
    if (agents == 64) {
      EXPECT_EQ(P.grid_y * P.grid_z, kHeadKv * 2) << plan_name(P);
      EXPECT_LE(P.n_splits * P.grid_y * P.grid_z, attn::kPrefixBlocksPerSm * kSms) << plan_name(P);
      EXPECT_GE(P.n_splits * P.grid_y * P.grid_z, attn::kPrefixBlocksPerSm * kSms * 9 / 10) << plan_name(P);
    }
  }
  // The default (Wide256): 64 agents take the 256-row kernel, one block per KV head and split, one
  // wave at one block per multiprocessor (8 x 16 splits of 2048 keys = 128 blocks); 16 agents as before.
  const PrefixScope scope256(attn::PrefixKernel::Wide256);
  for (int agents : {16, 64}) {
    cuda::AttentionBatchDevice b{agents, nullptr, nullptr, nullptr, nullptr, nullptr, agents, 1, kKeys + 64};
    b.n_prefix = 1, b.max_prefix_q = agents, b.max_prefix_kv = kKeys;
    const attn::Plan P = attn::plan_prefix(L, p, b, kSms);
    EXPECT_EQ(P.rows, agents == 16 ? attn::large_rows(128) : attn::kPrefix256Rows) << agents << " agents: " << plan_name(P);
    EXPECT_GE(int64_t(P.chunk) * P.n_splits, kKeys) << plan_name(P);
    if (agents == 64) {
      EXPECT_EQ(P.grid_y * P.grid_z, kHeadKv) << plan_name(P);
      EXPECT_LE(P.n_splits * P.grid_y * P.grid_z, kSms) << plan_name(P);
      EXPECT_GE(P.n_splits * P.grid_y * P.grid_z, kSms * 9 / 10) << plan_name(P);
    }
  }
}

// The lanes8 kernel specialized per (K, V) pair at head size 128 (attention_cuda_decode8_fixed.cuh) in each
// mode of attn::decode8_kernels(): generic (the runtime-dispatch kernel), fixed (specialized, decode8s) and
// packed (specialized, packed trellis decoder): every specialized pair plus one without a specialization,
// several sequences, splits, a window and softcap, odd block sizes; each mode must pick the kernel it names
// and stay within the bound. Plans of specialized kernels fill one wave at their 4 blocks per multiprocessor.
struct D8Scope {
  attn::Decode8Kernels saved = attn::decode8_kernels();
  explicit D8Scope(attn::Decode8Kernels k) { attn::decode8_kernels() = k; }
  ~D8Scope() { attn::decode8_kernels() = saved; }
};
struct SelfScope {
  attn::SelfEncode saved = attn::attention_self_encode();
  explicit SelfScope(attn::SelfEncode m) { attn::attention_self_encode() = m; }
  ~SelfScope() { attn::attention_self_encode() = saved; }
};

TEST(CudaAttentionEmulation, Decode8FixedPairsEveryMode) {
  std::vector<std::pair<KvType, KvType>> pairs;
  for (const attn::Decode8Pair& p : attn::kDecode8FixedPairs) pairs.push_back({p.k, p.v});
  pairs.push_back({KvType::Turbo4T, KvType::Turbo2T});  // no specialization: generic in every mode
  uint32_t seed = 3100;
  for (attn::Decode8Kernels mode : {attn::Decode8Kernels::Generic, attn::Decode8Kernels::Fixed,
                                    attn::Decode8Kernels::Packed, attn::Decode8Kernels::Pairs}) {
    const D8Scope d8(mode);
    const VariantScope vs(attn::DecodeVariant::Lanes8);
    for (const auto& [kt, vt] : pairs)
      for (int shape = 0; shape < 3; ++shape) {
        if (mode == attn::Decode8Kernels::Generic && shape == 1) continue;  // the generic kernel's own tests cover it
        g_emu_early = shape == 2 ? 1 : 0;  // shape 2: shape 0 with the early-start path
        Case c;
        c.kt = kt, c.vt = vt, c.head_dim = 128, c.n_head_kv = 2, c.group = 4, c.seed = seed++;
        if (shape == 0 || shape == 2) {
          c.block_tokens = 16;
          c.seqs = {{0, 1}, {37, 1}, {290, 1}};
        } else {
          c.block_tokens = 24;
          c.seqs = {{420, 1}};
          c.window = 150;
          c.softcap = 30.0f;
        }
        const Ran r = run_case(c);
        g_emu_early = 0;
        const bool fixed = attn::decode8_fixed(128, kt, vt, mode);
        const bool picked = attn::decode8_pick<128>(kt, vt, mode, &attn::decode8_kernel<128, 4>, [](auto) {});
        const std::string what = attn_test::describe(c) + " mode " + std::to_string(int(mode)) +
                                 "\n  plan: " + plan_name(r.plan);
        EXPECT_EQ(picked, fixed) << what;
        EXPECT_EQ(fixed, mode != attn::Decode8Kernels::Generic && kt != KvType::Turbo4T) << what;
        EXPECT_EQ(r.plan.variant, attn::DecodeVariant::Lanes8) << what;
        EXPECT_LE(r.result.worst, attn_test::kBound) << what << "\n  worst row: " << r.result.where;
      }
  }
}

// The early start with self-encoded new rows (Args::self_kv): the pool's bytes of the query rows' own keys are junk
// while the kernel runs, so a row it did not encode itself (or encoded at the wrong place) shows in the outputs.
// Plain K and V (both encoded), turbo / trellis V (K encoded, V copied from the pool after the wait), turbo K (no
// self-encoding); new keys at a tile's start and end, across two tiles (blocks of 16 keys), 1-4 rows, two
// sequences; head sizes 64 and 128; the generic and the specialized kernels.
TEST(CudaAttentionEmulation, EarlyStartEncodesTheNewRowsItself) {
  const std::pair<KvType, KvType> pairs[] = {
      {KvType::F16, KvType::F16},     {KvType::Q8_0, KvType::Q8_0},    {KvType::Q4_0, KvType::Q4_0},
      {KvType::BF16, KvType::F16},    {KvType::BF16, KvType::Q4_0},    {KvType::Q8_0, KvType::Turbo3T},
      {KvType::Q8_0, KvType::Turbo3}, {KvType::Turbo3T, KvType::Turbo3T}};
  const std::vector<std::vector<attn_test::SeqSpec>> seqs = {{{0, 1}}, {{37, 1}}, {{47, 1}}, {{48, 1}}, {{62, 4}},
                                                             {{5, 1}, {40, 2}}};
  uint32_t seed = 5200;
  for (attn::Decode8Kernels mode : {attn::Decode8Kernels::Generic, attn::Decode8Kernels::Pairs}) {
    const D8Scope d8(mode);
    const VariantScope vs(attn::DecodeVariant::Lanes8);
    for (const auto& [kt, vt] : pairs)
      for (int hd : {64, 128})
        for (const auto& sq : seqs) {
          Case c;
          c.kt = kt, c.vt = vt, c.head_dim = hd, c.n_head_kv = 2, c.group = 4, c.seed = seed++;
          c.block_tokens = 16;
          c.seqs = sq;
          g_emu_early = 1;
          g_emu_self = true;
          const Ran r = run_case(c);
          g_emu_early = 0;
          g_emu_self = false;
          const std::string what = attn_test::describe(c) + " mode " + std::to_string(int(mode)) +
                                   "\n  plan: " + plan_name(r.plan);
          EXPECT_EQ(r.plan.variant, attn::DecodeVariant::Lanes8) << what;
          EXPECT_LE(r.result.worst, attn_test::kBound) << what << "\n  worst row: " << r.result.where;
        }
  }
}

// A Llama-3.1-8B attention layer with q8_0/turbo3t rows in pool blocks of 64 keys (no pool memory: for plans),
// and its parameters (32 query heads).
cuda::KvLayerDevice llama8b_layer() {
  return {KvType::Q8_0, KvType::Turbo3T, 64, 8, 128, 128, kv_head_bytes(KvType::Q8_0, 128),
          kv_head_bytes(KvType::Turbo3T, 128), nullptr, 0, 0};
}
AttentionParams llama8b_params() {
  AttentionParams p;
  p.n_head = 32;
  p.scale = 0.088f;
  return p;
}

// The tensor-core decode kernel (attention_cuda_decode_tc.cuh, mode Mma) on every pair it takes, and one it
// does not (f16/f16: the pairs kernel): sequences at depths 0 .. 700 in pool blocks of 64 (full 64-key tiles,
// splits, short last tiles) and 128 with a window and softcap; the early-start path; a group of 2 (two tokens'
// rows in one block); a group of 8 (two head parts). Pool blocks of 16 or 24 keys keep the pairs kernel (its
// 64-key tiles never cross a pool block). Each must pick the kernel it names and stay within the bound, with
// both tile pipelines (bulk copies and the cp.async ring), at head sizes 128 and 64 (2026-12-07g).
TEST(CudaAttentionEmulation, DecodeTcEveryPair) {
  std::vector<std::pair<KvType, KvType>> pairs;
  for (const attn::Decode8Pair& p : attn::kDecodeTcPairs) pairs.push_back({p.k, p.v});
  pairs.push_back({KvType::F16, KvType::F16});
  const D8Scope d8(attn::Decode8Kernels::Mma);
  const VariantScope vs(attn::DecodeVariant::Lanes8);
  for (const int hd : {128, 64})
  for (const bool bulk : {true, false}) {  // both tile pipelines (the same seeds)
    const attn_test::TcPipeScope pipe(bulk);
    uint32_t seed = hd == 128 ? 4100 : 4600;
    for (const auto& [kt, vt] : pairs)
      for (int shape = 0; shape < 5; ++shape) {
        g_emu_early = shape == 2 ? 1 : 0;
        Case c;
        c.kt = kt, c.vt = vt, c.head_dim = hd, c.n_head_kv = 2, c.group = 4, c.seed = seed++;
        if (shape == 0) {
          c.block_tokens = 64;
          c.seqs = {{0, 1}, {37, 1}, {290, 1}};
        } else if (shape == 1) {
          c.block_tokens = 128;
          c.seqs = {{420, 1}};
          c.window = 300;  // past one split (window splits: 363 keys)
          c.softcap = 30.0f;
        } else if (shape == 2) {
          c.block_tokens = 64;
          c.seqs = {{700, 1}, {5, 1}};
        } else if (shape == 3) {
          c.block_tokens = 64;
          c.group = 2;
          c.seqs = {{300, 2}, {64, 2}};
        } else {
          c.block_tokens = 64;
          c.group = 8;
          c.seqs = {{513, 1}};
        }
        const Ran r = run_case(c);
        g_emu_early = 0;
        const bool supported = attn::decode_tc(hd, kt, vt, attn::Decode8Kernels::Mma);
        const bool picked =
            hd == 128 ? attn::decode_tc_pick<128>(kt, vt, [](auto) {}) : attn::decode_tc_pick<64>(kt, vt, [](auto) {});
        // Every shape's bound exceeds one split (256 keys), so a supported pair runs the tensor-core kernel.
        const bool tc = supported && r.plan.tc;
        EXPECT_EQ(r.plan.tc, supported) << attn_test::describe(c);
        const std::string what =
            attn_test::describe(c) + " shape " + std::to_string(shape) + (bulk ? " bulk" : " sync") + "\n  plan: " +
            plan_name(r.plan);
        EXPECT_EQ(picked, supported) << what;
        EXPECT_EQ(tc, kt != KvType::F16) << what;
        EXPECT_EQ(r.plan.kernel, attn::Kernel::Decode) << what;
        EXPECT_EQ(r.plan.tile_keys, tc ? attn::kDecodeTcTileKeys : attn::decode8_tile_keys()) << what;
        EXPECT_LE(r.result.worst, attn_test::kBound) << what << "\n  worst row: " << r.result.where;
      }
  }
}

// At one split (launch bound <= attn::one_split_keys(), 256) the plan keeps the pairs kernel even in mode Mma
// (a 64-key tile would leave three of four warps idle), and so it does with pool blocks of 16 or 24 keys; the
// batch-invariant decode plan takes the tensor-core kernel at every depth (its kernel may not depend on the
// depth). Every case still meets the bound.
// The address of a specialized lanes8 kernel (macro arguments may not hold its template's commas).
template <int K, int V, int DEC, int SELF>
const void* kernel_ptr() {
  return (const void*)&attn::decode8_kernel<128, 4, K, V, DEC, SELF>;
}

// The lean lanes8 kernels (decode8_kernel<..., SELF = 0>, no self-encoded rows): decode8_pick takes one exactly when the
// launch does not self-encode, the mode is pairs / mma and the pair has one (K not encodable, or V encodable); a
// launch that self-encodes, and mode Off's launches, keep the full kernel. Every emulation case of these pairs runs
// the kernel the pick returns, so the lean kernels are what the other tests check in the default mode.
TEST(CudaAttentionEmulation, LeanKernelsWhereNothingIsSelfEncoded) {
  const auto picked = [](KvType k, KvType v, attn::Decode8Kernels mode, bool lean) {
    const void* got = nullptr;
    attn::decode8_pick<128>(k, v, mode, attn::decode8_generic_kernel<128, 4>(lean),
                            [&](auto kernel) { got = (const void*)kernel; }, lean);
    return got;
  };
  constexpr int f16 = int(KvType::F16), q8 = int(KvType::Q8_0), q4 = int(KvType::Q4_0), t3t = int(KvType::Turbo3T);
  using attn::Decode8Kernels;
  EXPECT_EQ(picked(KvType::Q8_0, KvType::Q8_0, Decode8Kernels::Pairs, true),
            (kernel_ptr<q8, q8, attn::kDec8Pairs, 0>()));
  // (Mode Mma with a tensor-core pair picks decode_tc_kernel: the plans pass Pairs for the shallow ones, decode_tc_mode.)
  EXPECT_EQ(picked(KvType::F16, KvType::F16, Decode8Kernels::Mma, true),
            (kernel_ptr<f16, f16, attn::kDec8Pairs, 0>()));
  EXPECT_EQ(picked(KvType::Q4_0, KvType::Q4_0, Decode8Kernels::Pairs, true),
            (kernel_ptr<q4, q4, attn::kDec8Pairs, 0>()));
  EXPECT_EQ(picked(KvType::Turbo3T, KvType::Turbo3T, Decode8Kernels::Pairs, true),
            (kernel_ptr<t3t, t3t, attn::kDec8Pairs, 0>()));
  EXPECT_EQ(picked(KvType::Q8_0, KvType::Q8_0, Decode8Kernels::Pairs, false),
            (kernel_ptr<q8, q8, attn::kDec8Pairs, 1>()));
  EXPECT_EQ(picked(KvType::Q8_0, KvType::Q8_0, Decode8Kernels::Packed, true),
            (kernel_ptr<q8, q8, attn::kDec8Packed, 1>()));
  // q8_0/turbo3t self-encodes K by default: no lean kernel.
  EXPECT_FALSE(attn::decode8_lean_pair(KvType::Q8_0, KvType::Turbo3T));
  EXPECT_EQ(picked(KvType::Q8_0, KvType::Turbo3T, Decode8Kernels::Pairs, true),
            (kernel_ptr<q8, t3t, attn::kDec8Pairs, 1>()));
  // Pairs without a specialization, and mode Generic, take the generic kernel: lean too when asked.
  EXPECT_EQ(picked(KvType::Q8_0, KvType::Turbo4, Decode8Kernels::Pairs, true),
            (kernel_ptr<-1, -1, attn::kDec8Plain, 0>()));
  EXPECT_EQ(picked(KvType::Q8_0, KvType::Turbo4, Decode8Kernels::Pairs, false),
            (kernel_ptr<-1, -1, attn::kDec8Plain, 1>()));
  EXPECT_EQ(picked(KvType::Q8_0, KvType::Q8_0, Decode8Kernels::Generic, true),
            (kernel_ptr<-1, -1, attn::kDec8Plain, 0>()));
  EXPECT_NE((attn::decode8_generic_kernel<64, 4>(true)), (attn::decode8_generic_kernel<64, 4>(false)));
  // Which launches ask for it: nothing self-encoded and a mode other than Off.
  {
    const SelfScope self(attn::SelfEncode::TurboV);
    EXPECT_TRUE(attn::decode8_lean(0));
    EXPECT_FALSE(attn::decode8_lean(1));
  }
  {
    const SelfScope self(attn::SelfEncode::Off);
    EXPECT_FALSE(attn::decode8_lean(0));
  }
}

TEST(CudaAttentionEmulation, DecodeTcOnlyPastOneSplit) {
  const D8Scope d8(attn::Decode8Kernels::Mma);
  const VariantScope vs(attn::DecodeVariant::Lanes8);
  Case c;
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = 128, c.n_head_kv = 2, c.group = 4, c.seed = 4300;
  c.block_tokens = 64;
  c.seqs = {{100, 1}, {3, 1}};
  const Ran r = run_case(c);
  EXPECT_FALSE(r.plan.tc) << plan_name(r.plan);
  EXPECT_EQ(r.plan.tile_keys, attn::decode8_tile_keys()) << plan_name(r.plan);
  EXPECT_EQ(r.plan.n_splits, 1) << plan_name(r.plan);
  EXPECT_LE(r.result.worst, attn_test::kBound) << r.result.where;
  for (int bt : {16, 24, 64}) {  // past one split: pool blocks of a multiple of 64 keys only
    c.block_tokens = bt, c.seqs = {{600, 1}}, c.seed += 1;
    const Ran rb = run_case(c);
    EXPECT_EQ(rb.plan.tc, bt == 64) << bt << ": " << plan_name(rb.plan);
    EXPECT_LE(rb.result.worst, attn_test::kBound) << bt << ": " << rb.result.where;
  }
  const cuda::KvLayerDevice L = llama8b_layer();
  const AttentionParams p = llama8b_params();
  const cuda::AttentionBatchDevice b{1, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, 200};
  attn::Plan dec, tiled;
  attn::plan_invariant(L, p, b, 132, dec, tiled);
  EXPECT_TRUE(dec.tc) << plan_name(dec);
  EXPECT_FALSE(attn::plan_attention(L, p, b, 132).tc);
}

// One wave at the specialized kernels' occupancy: q8_0/turbo3t at 131072 keys on an H200 (132
// multiprocessors, 8 KV heads) plans 66 splits (528 blocks: 4 per multiprocessor), the generic kernel 49.
TEST(CudaAttentionEmulation, Decode8FixedSplitsFillOneWave) {
  const cuda::KvLayerDevice L = llama8b_layer();
  const AttentionParams p = llama8b_params();
  const cuda::AttentionBatchDevice b{1, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, 131072};
  const VariantScope vs(attn::DecodeVariant::Lanes8);
  for (attn::Decode8Kernels mode :
       {attn::Decode8Kernels::Generic, attn::Decode8Kernels::Packed, attn::Decode8Kernels::Pairs}) {
    const D8Scope d8(mode);
    const attn::Plan P = attn::plan_attention(L, p, b, 132);
    const int per_sm = mode == attn::Decode8Kernels::Generic ? 3 : 4;
    EXPECT_LE(P.n_splits * 8, per_sm * 132) << plan_name(P);
    EXPECT_GE(P.n_splits * 8, per_sm * 132 * 9 / 10) << plan_name(P);
  }
}

// Sliding-window decode at depth (Plan::window_splits): the key splits start at each block's first visible key
// (aligned down to 64) and cover the window, not the whole context. Before, a local layer of Gemma 3 (window 1024 in
// a 32k context) planned one wave of splits over every key, so its window's two or three splits were each as long as
// a global layer's (call H49: gemma-3-4b's attention exposed ~62 us a layer on average at depth 32768). One-token and
// 4-token steps (the small-step decode plan), windows of 100 and 700 at depths 2500-4000, head sizes 64, 128 and
// 256, both decode variants and the pairs / tensor-core modes; a window wider than the context keeps the old splits.
TEST(CudaAttentionEmulation, WindowedDecodeSplitsCoverTheWindow) {
  uint32_t seed = 1500;
  struct Shape {
    KvType kt, vt;
    int hd, window;
  };
  const SmallQScope small(8);
  for (const Shape& sh : {Shape{KvType::Q8_0, KvType::Q8_0, 128, 700}, Shape{KvType::Q8_0, KvType::Turbo3T, 128, 700},
                          Shape{KvType::Q8_0, KvType::Turbo3T, 128, 100}, Shape{KvType::F16, KvType::F16, 256, 700},
                          Shape{KvType::F16, KvType::Q4_0, 64, 300}, Shape{KvType::Q8_0, KvType::Turbo3T, 64, 300}}) {
    for (const int nq : {1, 4}) {
      Case c;
      c.kt = sh.kt, c.vt = sh.vt, c.head_dim = sh.hd, c.n_head_kv = 2, c.group = 4, c.window = sh.window;
      c.block_tokens = 64, c.seqs = {{4000, nq}, {2500, nq}}, c.seed = seed++;
      const int64_t span = 63 + sh.window + nq - 1;  // what one block's splits must cover
      for (attn::DecodeVariant v : kVariants)
        for (attn::Decode8Kernels mode : {attn::Decode8Kernels::Pairs, attn::Decode8Kernels::Mma}) {
          const VariantScope vs(v);
          const D8Scope d8(mode);
          const Ran r = run_case(c);
          const std::string what = attn_test::describe(c) + "\n  plan: " + plan_name(r.plan);
          EXPECT_LE(r.result.worst, attn_test::kBound) << what << "\n  worst row: " << r.result.where;
          EXPECT_EQ(r.plan.kernel, attn::Kernel::Decode) << what;
          EXPECT_TRUE(r.plan.window_splits) << what;
          EXPECT_GE(int64_t(r.plan.n_splits) * r.plan.chunk, span) << what;
          if (r.plan.n_splits > 1) EXPECT_LT(int64_t(r.plan.n_splits - 1) * r.plan.chunk, span) << what;
        }
    }
  }
  Case c;  // the window holds every key: splits over the context as before
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.window = 5000, c.block_tokens = 64, c.seqs = {{3000, 1}}, c.seed = seed;
  const Ran r = run_case(c);
  EXPECT_LE(r.result.worst, attn_test::kBound) << r.result.where;
  EXPECT_FALSE(r.plan.window_splits) << plan_name(r.plan);
  EXPECT_GT(r.plan.n_splits, 1) << plan_name(r.plan);
  // POLYKV_CUDA_WINDOW_SPLITS=0: the plans before (splits over the context), still right.
  bool& on = attn::window_splits_on();
  const bool saved = on;
  on = false;
  c.window = 100, c.seed = seed + 1;
  const Ran off = run_case(c);
  on = saved;
  EXPECT_LE(off.result.worst, attn_test::kBound) << off.result.where;
  EXPECT_FALSE(off.plan.window_splits) << plan_name(off.plan);
  EXPECT_GT(off.plan.n_splits, 1) << plan_name(off.plan);
}

}  // namespace
}  // namespace polykv

namespace polykv {
namespace {

// ---- Attention sinks (gpt-oss) and sliding windows (issue #11) ------------------------------------
// A sink joins a row's softmax denominator exactly once, wherever the row is finalized: the decode
// kernels' one-split end, the f32 tiled and tensor-core kernels without splits, merge_kernel after key
// splits and after a prefix pass (attention_cuda_kernels.cuh row_norm). gpt-oss's shape: GQA 8 (two
// head parts of 4 rows in decode), head sizes 64 (gpt-oss) and 128, windows 128 and 7 (smaller than a
// pool block) with contexts beyond them. make_sinks gives one head a sink far above every score.
void expect_sinks_ok(Case c) {
  c.sinks = true;
  c.seqs = {{0, 1}, {299, 1}};  // decode at depth 1 and 300: key splits
  expect_ok(c, attn::Kernel::Decode, true);
  c.seqs = {{0, 1}, {100, 1}}, c.seed += 1000;  // bound <= 256: one split, no merge
  expect_ok(c, attn::Kernel::Decode, true);
  c.seqs = {{150, 20}}, c.seed += 1000;  // prefill, two key splits merged
  expect_ok(c, attn::Kernel::Tiled, true);
  c.seqs = {{0, 37}}, c.seed += 1000;  // prefill without splits: the kernel writes the rows
  expect_ok(c, attn::Kernel::Tiled, false);
  c.seqs = {{150, 2}, {3, 2}}, c.seed += 1000;  // the small tiled shape, split
  expect_ok(c, attn::Kernel::Tiled, true);
  c.seqs = {{40, 2}, {3, 2}}, c.seed += 1000;  // the small tiled shape, one split
  expect_ok(c, attn::Kernel::Tiled, false);
}

TEST(CudaAttentionEmulation, SinksEveryPath) {
  uint32_t seed = 1300;
  const std::pair<KvType, KvType> pairs[] = {{KvType::Q8_0, KvType::Turbo3T}, {KvType::F16, KvType::F16}};
  for (int hd : {64, 128})
    for (const auto& [kt, vt] : pairs) {
      if (hd == 128 && kt == KvType::F16) continue;  // (time: the emulation is slow)
      Case c;
      c.kt = kt, c.vt = vt, c.head_dim = hd, c.n_head_kv = 2, c.group = 8, c.block_tokens = 16, c.seed = seed++;
      expect_sinks_ok(c);
    }
}

TEST(CudaAttentionEmulation, SinksWithSlidingWindows) {
  uint32_t seed = 1400;
  for (int window : {128, 7})
    for (int hd : {64, 128}) {
      Case c;
      c.kt = KvType::Q8_0, c.vt = KvType::Q8_0, c.head_dim = hd, c.n_head_kv = 1, c.group = 8, c.block_tokens = 16;
      c.window = window, c.seed = seed++;
      expect_sinks_ok(c);
    }
  // Windows without sinks too (the model's other layers): a window of 7 inside blocks of 64.
  Case c;
  c.kt = KvType::F16, c.vt = KvType::Turbo3T, c.head_dim = 64, c.group = 8, c.n_head_kv = 1, c.block_tokens = 64;
  c.window = 7, c.seed = seed++;
  c.seqs = {{0, 1}, {299, 1}, {40, 1}};
  expect_ok(c, attn::Kernel::Decode, true);
  c.seqs = {{150, 20}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
}

// Sinks over shared prefixes: the prefix pass's partials and the sequences' own are merged, the sink
// added once after both (decode and multi-token steps, each prefix kernel, a window over the prefix).
TEST(CudaAttentionEmulation, SinksSharedPrefix) {
  uint32_t seed = 1500;
  Case c;
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = 64, c.group = 8, c.sinks = true, c.seed = seed++;
  c.seqs = {{229, 1}, {200, 1, 0, 12}, {192, 1, 0, 12}, {40, 1}, {60, 1, 3, 2}, {33, 1, 3, 2}};
  c.prefix = {{0, 3, 12}, {3, 3, 2}};
  expect_ok(c, attn::Kernel::Decode, true);
  c.seqs = {{220, 6}, {200, 5, 0, 12}, {192, 7, 0, 12}, {40, 2}, {60, 3, 3, 2}, {33, 1, 3, 2}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  c.window = 128, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  Case p = prefix_case(KvType::Q8_0, KvType::Turbo3T, 64, 20, 19, 1, seed++);  // 80 rows: wide with Wide
  p.sinks = true;
  expect_prefix_ok(p);
  p = prefix_case(KvType::F16, KvType::F16, 128, 5, 20, 3, seed++);  // 60 rows: the 64-row kernel
  p.sinks = true;
  p.window = 7;
  expect_prefix_ok(p);
}

// The early start's plan leaves the kv_store's block slots free (cuda::attention reserves (2 x rows x KV heads
// + 3) / 4 + 1 = 5 at one row and 8 KV heads): at 32768 and 131072 keys (and a bound where the rounding
// would fill every slot) the specialized kernels' one wave has room for them.
TEST(CudaAttentionEmulation, Decode8EarlyPlanLeavesRoomForTheStore) {
  const cuda::KvLayerDevice L = llama8b_layer();
  const AttentionParams p = llama8b_params();
  const VariantScope vs(attn::DecodeVariant::Lanes8);
  const D8Scope d8(attn::Decode8Kernels::Pairs);
  for (int kv : {32768, 131072, 66 * 2048, 66 * 512, 5000}) {
    const cuda::AttentionBatchDevice b{1, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, kv};
    const attn::Plan P = attn::plan_attention(L, p, b, 132, 5);
    EXPECT_LE(P.n_splits * 8, 4 * 132 - 5) << kv << ": " << plan_name(P);
    if (kv >= 32768) EXPECT_GE(P.n_splits * 8, (4 * 132 - 5) * 85 / 100) << kv << ": " << plan_name(P);
  }
}

// Batch invariance (attn::plan_invariant, --batch-invariant; docs/CUDA_SPEC.md): every row of a step of
// several sequences (a k-token verify step, a decode step, a 40-row prefill chunk) run with the
// invariant plans, as cuda::attention runs them, is within the usual bound of attention_ref, and each row
// of a sequence of up to kInvariantDecodeQ rows equals bit for bit (memcmp) what the same query gets
// alone (one row at its position, the step's bound its own), across chunk boundaries (depths 505, 1100),
// with a sliding window, GQA 1 / 2 / 4 (1 to 4 tokens per decode block) and the slots kernel (head
// size 256). The default plans are counted for comparison (printed, not asserted).
std::vector<float> run_plans(const attn_test::Fixture& f, const cuda::AttentionBatchDevice& b, const float* q,
                             int total_rows, bool invariant) {
  attn::Plan P[2];
  const int n = invariant ? attn::plan_invariant(f.L, f.p, b, kEmulatedSms, P[0], P[1]) : 1;
  if (!invariant) P[0] = attn::plan_attention(f.L, f.p, b, kEmulatedSms);
  std::vector<float> out(size_t(total_rows) * f.row_floats);
  attn_test::poison(out.data(), out.size());
  for (int i = 0; i < n; ++i) {
    std::vector<float> part(P[i].partial_o_floats + P[i].partial_ml_floats, NAN);
    const attn::Args a = attn::make_args(f.L, f.p, b, P[i], q, out.data(), part.empty() ? nullptr : part.data());
    switch (f.c.head_dim) {
      case 64: run_kernels<64>(a, P[i], a, attn::Plan{}); break;
      case 128: run_kernels<128>(a, P[i], a, attn::Plan{}); break;
      default: run_kernels<256>(a, P[i], a, attn::Plan{}); break;
    }
  }
  return out;
}

TEST(CudaAttentionEmulation, InvariantPlansGiveEachRowTheBitsOfItsOwnStep) {
  attn::g_tables = cuda::make_kv_decode_tables();
  struct Inv {
    KvType kt, vt;
    int hd, group, depth, k, window;
  };
  const Inv invs[] = {{KvType::F16, KvType::F16, 128, 2, 20, 8, 0},       {KvType::Q8_0, KvType::Turbo3T, 128, 4, 505, 8, 0},
                      {KvType::Q8_0, KvType::Q8_0, 64, 1, 1100, 6, 0},     {KvType::Q8_0, KvType::Turbo3T, 128, 2, 306, 8, 100},
                      {KvType::Turbo3T, KvType::Turbo3T, 256, 2, 40, 5, 0}};
  uint32_t seed = 700;
  int rows = 0, default_differs = 0;
  for (const Inv& v : invs) {
    Case c;
    c.kt = v.kt, c.vt = v.vt, c.head_dim = v.hd, c.group = v.group, c.n_head_kv = 1, c.window = v.window;
    c.seed = seed++;
    c.seqs = {{v.depth, v.k}, {50, 40}, {3, 1}};  // a verify step, a prefill chunk (the tiled launch), a decode row
    c.extra_kv_bound = 37;                        // a bound above the real one, as the backend's bucket
    const auto f = attn_test::build(c);
    const std::vector<float> got = run_plans(*f, f->b, f->q.data(), f->total_rows, true);
    std::vector<float> checked(f->out_floats());
    attn_test::poison(checked.data(), checked.size());
    std::copy(got.begin(), got.end(), checked.begin());
    const attn_test::Result r = attn_test::check_outputs(*f, checked);
    EXPECT_LE(r.worst, attn_test::kBound) << attn_test::describe(c) << "\n  worst row: " << r.where;
    const std::vector<float> plain = run_plans(*f, f->b, f->q.data(), f->total_rows, false);
    for (int s : {0, 2}) {
      const SeqSpec& sq = c.seqs[size_t(s)];
      for (int j = 0; j < sq.n_q; ++j) {
        const int row = f->row0[size_t(s)] + j;
        const int32_t start = f->table_start[size_t(s)], pos = sq.pos0 + j, one = 1, zero = 0;
        cuda::AttentionBatchDevice b1 = f->b;  // the same pool and tables, this one row alone
        b1.n_seq = 1, b1.table_start = &start, b1.pos0 = &pos, b1.n_q = &one, b1.row0 = &zero;
        b1.total_rows = 1, b1.max_n_q = 1, b1.max_kv = pos + 1;
        const float* qr = f->q.data() + size_t(row) * f->row_floats;
        const std::vector<float> alone = run_plans(*f, b1, qr, 1, true), alone_plain = run_plans(*f, b1, qr, 1, false);
        const float* g = got.data() + size_t(row) * f->row_floats;
        ++rows;
        default_differs +=
            std::memcmp(plain.data() + size_t(row) * f->row_floats, alone_plain.data(), f->row_floats * sizeof(float)) != 0;
        if (std::memcmp(g, alone.data(), f->row_floats * sizeof(float)) == 0) continue;
        size_t i = 0;
        while (g[i] == alone[i] && i + 1 < f->row_floats) ++i;
        ADD_FAILURE() << attn_test::describe(c) << "\n  seq " << s << " token " << j << " (pos " << pos
                      << "): differs from the row alone at value " << i << ": " << g[i] << " vs " << alone[i];
      }
    }
  }
  std::printf("invariant plans: %d rows checked; with the default plans %d of them differ from the row alone\n", rows,
              default_differs);
}

}  // namespace
}  // namespace polykv
