// The CUDA attention kernels compiled as plain C++ for the CPU emulation tests
// (tests/cuda/attention_*emulation_test.cpp): the CUDA keywords and built-ins mapped onto the fibers of
// attention_emulation_fibers.h, the kernels' headers included under POLYKV_ATTN_EMULATION (their own
// inline namespace, so their symbols never meet the device build's), and the launches of the launcher's
// own plans (attention_cuda_plan.h) re-spelled as loops over the grid's blocks; plus the cases' checks
// that the test files share (expect_ok: the bound and the planned kernel; prefix_case / expect_prefix_ok:
// shared-prefix passes with each prefix kernel) and scopes for the process-wide kernel choices.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "attention_cuda_cases.h"
#include "attention_emulation_fibers.h"
#include "backend/cuda/attention_cuda_plan.h"

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
#define POLYKV_ATTN_EMULATION
#define POLYKV_ATTN_NS emulation
#define POLYKV_DYNAMIC_SHARED(name) float4* name = ::emu::dyn_smem.data()
#define POLYKV_EMU_MMA(d, a, b) ::emu::mma16816(d, a, b)
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
inline void run_grid(unsigned gx, unsigned gy, unsigned gz, size_t smem_bytes, const std::function<void()>& body,
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
        const attn::Decode8Kernels mode =
            P.variant == attn::DecodeVariant::Lanes8 ? attn::decode8_kernels() : attn::Decode8Kernels::Generic;
        attn::decode8_pick<HD>(a.k_type, a.v_type, mode, &attn::decode8_kernel<HD, 4>, [&](auto kernel) {
          run_grid(gx, gy, gz, P.smem, [&] { kernel(a); });
        });
        return;
      }
    }
    run_grid(gx, gy, gz, P.smem, [&] { attn::decode_kernel<HD>(a); });
  } else if (P.rows == attn::kPrefix256Rows) {
    if constexpr (attn::mma_supports(HD))
      run_grid(gx, gy, gz, attn::prefix256_smem_bytes(HD), [&] { attn::attention_prefix256_kernel<HD>(a); },
               attn::kPrefix256Threads);
  } else if (P.rows == attn::kPrefixRows) {
    if constexpr (attn::mma_supports(HD))
      run_grid(gx, gy, gz, attn::prefix_mma_smem_bytes(HD), [&] { attn::attention_prefix_mma_kernel<HD>(a); });
  } else if (P.rows == attn::kSmallRows) {
    run_grid(gx, gy, gz, attn::smem_bytes(HD, attn::kSmallRows),
             [&] { attn::attention_kernel<HD, attn::kSmallRows>(a); });
  } else {
    if constexpr (attn::mma_supports(HD)) {
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
    run_grid(unsigned(P.rows), unsigned(P.grid_y), unsigned(P.grid_z), 0,
             [&] { attn::merge_kernel<HD>(a, P.rows, ap, Pp.rows); });
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
inline int g_emu_early = 0;

inline Ran run_case(const Case& c) {
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
  const attn::Args ap =
      f->b.n_prefix > 0 ? attn::make_args(f->L, f->p, f->b, Pp, f->q.data(), out.data(), part.data() + own, true) : a;
  switch (c.head_dim) {
    case 64: run_kernels<64>(a, P, ap, Pp); break;
    case 128: run_kernels<128>(a, P, ap, Pp); break;
    case 256: run_kernels<256>(a, P, ap, Pp); break;
    default: run_kernels<512>(a, P, ap, Pp); break;
  }
  return {attn_test::check_outputs(*f, out), P, Pp};
}

inline std::string plan_name(const attn::Plan& P) {
  const char* kernel = P.kernel == attn::Kernel::Tiled ? (P.rows == attn::kPrefix256Rows ? "prefix (256-row mma)"
                                                          : P.rows == attn::kPrefixRows ? "prefix (wide mma)"
                                                          : P.mma                      ? "tiled (mma)"
                                                                                       : "tiled (f32)")
                       : P.variant == attn::DecodeVariant::Slots ? "decode (slots)"
                                                                 : "decode (lanes8)";
  return std::string(kernel) + " rows " + std::to_string(P.rows) +
         " splits " + std::to_string(P.n_splits) + " chunk " + std::to_string(P.chunk) + " head parts " +
         std::to_string(P.hparts) + " query tiles " + std::to_string(P.qtiles);
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

// Checks the case and that it ran the expected kernel with (or without) key splits; decode cases
// with both decode kernels (Lanes8 falls back to Slots for head sizes 256 and 512).
inline void expect_ok(const Case& c, attn::Kernel kernel, bool split) {
  for (attn::DecodeVariant v : kVariants) {
    const VariantScope scope(v);
    const Ran r = run_case(c);
    EXPECT_LE(r.result.worst, attn_test::kBound)
        << attn_test::describe(c) << "\n  plan: " << plan_name(r.plan) << "\n  worst row: " << r.result.where;
    EXPECT_EQ(r.plan.kernel, kernel) << attn_test::describe(c) << "\n  plan: " << plan_name(r.plan);
    // lanes8 plans stay within one wave at their occupancy (3-4 blocks per multiprocessor, splits
    // per item rounded down): with more than half a wave of work items there is no split.
    const bool filled = r.plan.kernel == attn::Kernel::Decode && r.plan.variant != attn::DecodeVariant::Slots &&
                        2 * int64_t(r.plan.grid_y) * r.plan.grid_z >
                            attn::decode8_plan_blocks(r.plan.variant, c.head_dim, c.kt, c.vt) * kEmulatedSms;
    // Decode launches bounded by attn::one_split_keys() keys read them in one split (no merge).
    int bound = 0;
    for (const SeqSpec& q : c.seqs) bound = std::max(bound, q.pos0 + q.n_q);
    const bool one_split = r.plan.kernel == attn::Kernel::Decode && bound + c.extra_kv_bound <= attn::one_split_keys();
    EXPECT_EQ(r.plan.n_splits > 1, split && !filled && !one_split)
        << attn_test::describe(c) << "\n  plan: " << plan_name(r.plan);
    if (kernel == attn::Kernel::Decode)
      EXPECT_EQ(r.plan.variant, c.head_dim <= 128 ? v : attn::DecodeVariant::Slots) << plan_name(r.plan);
    else
      EXPECT_EQ(r.plan.mma, attn::prefill_mma() && c.head_dim <= 128 && r.plan.rows == attn::large_rows(c.head_dim))
          << plan_name(r.plan);
  }
}

// The prefix pass's kernels (attention_cuda_plan.h PrefixKernel): many sequences sharing a prefix of
// awkward length (block size 7) with private suffixes, with each prefix kernel; the wide 128-row
// tensor-core kernel must be planned whenever a KV head has more than 64 sharing rows.
struct PrefixScope {
  attn::PrefixKernel saved = attn::prefix_kernel();
  explicit PrefixScope(attn::PrefixKernel k) { attn::prefix_kernel() = k; }
  ~PrefixScope() { attn::prefix_kernel() = saved; }
};
inline const char* prefix_kernel_name(attn::PrefixKernel k) {
  return k == attn::PrefixKernel::F32 ? "f32" : k == attn::PrefixKernel::Mma ? "mma64" : k == attn::PrefixKernel::Wide ? "wide128" : "wide256";
}

// n sequences sharing the first `blocks` blocks of sequence 0 (one group), n_q queries each, private
// suffixes of different lengths.
inline Case prefix_case(KvType kt, KvType vt, int hd, int n, int blocks, int n_q, uint32_t seed) {
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
inline void expect_prefix_ok(const Case& c, const std::vector<attn::PrefixKernel>& kernels = {std::begin(kAllPrefixKernels),
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


// Selects the lanes8 kernels (generic, fixed, packed: attn::decode8_kernels) for the scope.
struct D8Scope {
  attn::Decode8Kernels saved = attn::decode8_kernels();
  explicit D8Scope(attn::Decode8Kernels k) { attn::decode8_kernels() = k; }
  ~D8Scope() { attn::decode8_kernels() = saved; }
};


}  // namespace
}  // namespace polykv
