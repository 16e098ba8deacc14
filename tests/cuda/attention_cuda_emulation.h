// The CPU emulation of the CUDA attention kernels (attention_cuda_emulation_test.cpp's harness): a block's threads on
// fiber_emulator.h's fibers, the CUDA keywords and built-ins spelled for the host compiler (mma.sync and ldmatrix
// across a warp's fibers), the kernels compiled as plain C++, and run_case / expect_ok, which plan a case as the
// launcher does, run its kernels and check the outputs against attention_ref.
//
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
// Include this header from that one .cpp only (the reason above: it instantiates the kernels and g_tables).
#pragma once
#include <gtest/gtest.h>


#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <limits>
#include <vector>

#include "attention_cuda_cases.h"
#include "fiber_emulator.h"
#include "backend/cuda/attention_cuda_plan.h"
#include "core/fp16.h"

namespace emu {
// One block at a time, its threads fibers of fiber_emulator.h (128, or 256: the 256-row prefix kernel).
using fiberemu::current;
using fiberemu::kWarps;
using fiberemu::warp_sync;
inline int n_fibers = 128;  // threads of the blocks being run

struct Idx {
  unsigned x = 0, y = 0, z = 0;
};
inline Idx thread_idx, block_idx, grid_dim;  // thread_idx: the fiber running now
inline std::vector<float4> dyn_smem;

inline float shfl_xor(float v, int o) { return fiberemu::exchange(v, current % 32 ^ o); }

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

// Runs f as every thread of one block.
inline void run_block(const std::function<void()>& f) {
  fiberemu::run(n_fibers, [&](int) { f(); }, [](int i) { thread_idx = {unsigned(i), 0, 0}; });
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
#define __syncthreads() ::fiberemu::syncthreads()
#define __shfl_xor_sync(mask, v, o) ::emu::shfl_xor(v, o)
#define __syncwarp() ::fiberemu::warp_sync()
#define __any_sync(mask, p) ::fiberemu::warp_any(p)
#define POLYKV_ATTN_EMULATION
#define POLYKV_ATTN_NS emulation
#define POLYKV_DYNAMIC_SHARED(name) float4* name = ::emu::dyn_smem.data()
#define POLYKV_EMU_MMA(d, a, b) ::emu::mma16816(d, a, b)
#define POLYKV_EMU_YIELD() ::fiberemu::yield()
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
    if constexpr (attn::decode_tc_head(HD)) {  // as launch_main: the tensor-core kernel when the plan takes it
      if (P.tc && attn::decode_tc_pick<HD>(a.k_type, a.v_type, [&](auto kernel) {
            run_grid(gx, gy, gz, P.smem, [&] { kernel(a); });
          }))
        return;
    }
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

}  // namespace
}  // namespace polykv
