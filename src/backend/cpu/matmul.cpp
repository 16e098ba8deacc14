// matmul(): validation, ISA dispatch, activation quantization and the multithreaded loop over weight
// rows. The per-type arithmetic lives in the kernel files (matmul_kernels.h).
//
// Work split: each pool thread gets one contiguous range of output rows (ThreadPool::parallel_for).
// Within its range a thread walks the rows once per token tile and, for each row, computes the dot
// with every token of the tile while the row is hot in L1/L2, so decode (1..8 tokens, one tile) reads
// each weight byte from memory exactly once: the memory-bandwidth floor.
//
// Batch invariance (issue #8): y[t][o] is bit-identical whatever other tokens share the call, their
// number, token t's place among them and the thread count. Every path below keeps it: activations are
// quantized per token, the work split (threads, token tiles, kernel calls of 1..8 tokens, row groups)
// never splits one (row, token) dot, and each kernel family sums a (row, token) dot in one fixed
// order for every call width (matmul_kernels.h). Which family computes a row depends only on the
// weights and the ISA, except for float weights, whose tile shapes and row kernel share one order.
#include "backend/cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string_view>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/mxfp4_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "backend/cpu/ternary_kernels.h"
#include "backend/cpu/ternary_lut.h"
#include "core/error.h"
#include "quant/quant.h"
#include "quant/ternary.h"

namespace polykv {
namespace cpu {
namespace {

// The widest kernel available for `type` at or below `isa`.
RowDotFn pick_kernel(Isa isa, DType type) {
  RowDotFn f = ternary_row_dot(isa, type);  // nullptr unless ternary (ternary_kernels.h)
  if (!f) f = mxfp4_row_dot(isa, type);     // nullptr unless mxfp4 (mxfp4_kernels.h)
  if (!f && isa == Isa::Avx512) f = row_dot_avx512(type);
  if (!f && isa_has_avx2(isa)) f = row_dot_avx2(type);
#if defined(__aarch64__)
  if (!f && isa == Isa::Neon) f = row_dot_neon(type);
#endif
  if (!f) f = row_dot_scalar(type);
  check(f != nullptr, "matmul: no kernel for weight type ", dtype_name(type));
  return f;
}

// POLYKV_PACKED_AVX2_ON_AVX512=0: q5_K / q6_K stay on the AVX-512 row kernels on AVX-512 machines (A/B runs).
bool packed_avx2_on_avx512() {
  static const bool on = [] {
    const char* e = std::getenv("POLYKV_PACKED_AVX2_ON_AVX512");
    return !(e && std::string_view(e) == "0");
  }();
  return on;
}

// Kernel for a packed matrix under `isa`, or nullptr (then the original rows are used).
PackedDotFn pick_packed_kernel(Isa isa, DType type) {
  if (isa == Isa::Avx512) {
    if (const PackedDotFn f = packed_dot_avx512(type)) return f;
    // q5_K and q6_K have no AVX-512 packed kernel. Their AVX-VNNI packed kernels (256-bit), with the records
    // prefetched, beat the AVX-512 row kernels at every k on an AVX-512 + AVX-VNNI Zen 5 (docs/VERIFY_KERNELS.md
    // "2026-12-05e"; without the prefetch they lost at k = 1, "2026-12-05c"). Without AVX-VNNI (vpmaddubsw
    // only) that was not measured: the rows stay.
    if ((type == DType::Q5_K || type == DType::Q6_K) && packed_avx2_on_avx512()) return packed_dot_avxvnni(type);
    return nullptr;
  }
  if (isa == Isa::Avx2) return packed_dot_avx2(type);
  if (isa == Isa::Scalar) return packed_dot_scalar(type);
  return nullptr;
}

// Byte layout of one token's quantized activations in the scratch buffer; every part starts on a
// 64-byte boundary: qs [n_in] int8, d [n_blocks] f32, sums [n_blocks] i32 (Q8_32) or
// bsums [n_in/16] i16 (Q8_K), then (with_zp, Q8_32) zp [n_blocks] i32 (ActRow::zp).
struct ActLayout {
  size_t off_d = 0, off_sums = 0, off_zp = 0, off_perm = 0, stride = 0;
};

size_t round64(size_t n) { return (n + 63) / 64 * 64; }

// perm_bytes: then ActRow::tperm (ternary_perm_bytes) at off_perm.
ActLayout act_layout(ActFormat fmt, int64_t n_in, bool with_zp = false, size_t perm_bytes = 0) {
  ActLayout l;
  const size_t n = size_t(n_in);
  const size_t n_blocks = fmt == ActFormat::Q8_32 ? n / 32 : n / 256;
  l.off_d = round64(n);
  l.off_sums = l.off_d + round64(n_blocks * sizeof(float));
  l.off_zp = l.off_sums + round64(fmt == ActFormat::Q8_32 ? n_blocks * 4 : (n / 16) * 2);
  // The extra part: zp [n_blocks] i32 (Q8_32) or bsp [n_blocks][4] i32 (Q8_K).
  l.off_perm = l.off_zp + (with_zp ? round64(n_blocks * (fmt == ActFormat::Q8_32 ? 4 : 16)) : 0);
  l.stride = l.off_perm + round64(perm_bytes);
  return l;
}

// POLYKV_PACKED_ZP=off: no zp / bsp, so the AVX-512 packed kernels take their former paths (the zero
// point from sum, q4_K's mins from bsums, a pointer per token; for A/B runs: bench/verify_cost.sh);
// the results are the same bits either way.
bool packed_zp_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("POLYKV_PACKED_ZP");
    return e == nullptr || std::strcmp(e, "off") != 0;
  }();
  return on;
}

void validate(const WeightMatrix& w) {
  const DTypeInfo& info = dtype_info(w.type);
  check(info.weight_type, "matmul: unsupported weight type ", info.name);
  check(w.n_in > 0 && w.n_out >= 0, "matmul: bad shape ", w.n_out, "x", w.n_in);
  check(w.row_stride >= row_bytes(w.type, w.n_in), "matmul: row stride ", w.row_stride,
        " is smaller than a ", info.name, " row of ", w.n_in, " values");
  check(w.data != nullptr || w.n_out == 0, "matmul: null weights");
}

}  // namespace

ActFormat act_format(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: return ActFormat::F32;
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0:
      return ActFormat::Q8_32;
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
    case DType::TQ1_0: case DType::TQ2_0:
      return ActFormat::Q8_K;
    case DType::MXFP4: return ActFormat::Q8_32;   // blocks of 32, one scale each: as q4_0
    case DType::PTQ1_0: return ActFormat::Q8_32;  // 128-value blocks: rows need not be whole 256s
    default: fail("matmul: unsupported weight type ", dtype_name(t));
  }
}

// The activation format matmul() gives a row kernel: act_format(), except PTQ1_0 rows of whole 256s
// (ternary_kernels.h: Q8_K).
static ActFormat act_format_for(DType t, int64_t n_in) {
  return t == DType::PTQ1_0 && ptq1_0_reads_q8_K(n_in) ? ActFormat::Q8_K : act_format(t);
}

int64_t token_tile(DType weight_type, int64_t n_in) {
  // As many tokens as fit kActTileBytes of activations (they stay in L2 while the rows stream by; the
  // weights are read once per tile), never fewer than 8 so that decode batches are a single pass over
  // the weights; a multiple of 8 (kMaxPackedTokens).
  // 512 KiB, half of a Zen 4 L2, leaves room for a row group's weights (measured against 256 and
  // 768 KiB: f16 prefill +8 %, q4_0 / q8_0 within noise).
  const size_t kActTileBytes = size_t(512) << 10;
  const ActFormat fmt = act_format_for(weight_type, n_in);
  const size_t act_row_bytes =
      fmt == ActFormat::F32 ? size_t(n_in) * sizeof(float)
                            : act_layout(fmt, n_in, false,
                                         ternary_wants_perm(active_isa(), weight_type, n_in)
                                             ? ternary_perm_bytes(weight_type, n_in)
                                             : 0)
                                  .stride;  // (with the VBMI ternary kernels' permuted copy)
  return std::max<int64_t>(8, int64_t(kActTileBytes / act_row_bytes) / 8 * 8);
}

}  // namespace cpu

const char* matmul_isa() { return cpu::isa_name(cpu::active_isa()); }

namespace {

// pool->parallel_for, or fn over the whole range on the calling thread when pool is null (matmul_serial).
void run_range(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk = 1) {
  if (pool) {
    pool->parallel_for(n, fn, min_chunk);
  } else if (n > 0) {
    fn(0, n);
  }
}

// matmul() and matmul_serial(): the same kernels and activations, so the same bits; only the split of the
// work over threads differs (none when pool is null).
void matmul_impl(const WeightMatrix& w, const float* x, float* y, int64_t n_tokens, ThreadPool* pool) {
  using namespace cpu;
  validate(w);
  if (n_tokens <= 0 || w.n_out == 0) return;
  const RowDotFn dot = pick_kernel(active_isa(), w.type);
  const ActFormat fmt = act_format_for(w.type, w.n_in);
  const int64_t n_in = w.n_in;

  // Ternary matrices packed for the LUT path (ternary_lut.h).
  const bool lut = w.packed && w.packed->rows_per_group == kLutRows && fmt == ActFormat::Q8_K;

  // Activations, quantized once per matmul (in parallel over tokens) for the integer kernels.
  std::vector<ActRow> acts(static_cast<size_t>(n_tokens));
  // The AVX-512 packed kernels of q4_0 / q8_0 / mxfp4 start each block's sum at zp[b] (ActRow::zp).
  const int32_t zero_point = w.packed && fmt == ActFormat::Q8_32 && active_isa() == Isa::Avx512 &&
                                     packed_zp_enabled()
                                 ? packed_zero_point(w.type)
                                 : 0;
  // The AVX-512 packed q4_K kernel takes the mins term from bsp (ActRow::bsp).
  const bool with_bsp = w.packed && w.type == DType::Q4_K && active_isa() == Isa::Avx512 && packed_zp_enabled();
  if (fmt == ActFormat::F32) {
    for (int64_t t = 0; t < n_tokens; ++t) acts[size_t(t)].f32 = x + t * n_in;
  } else {
    // (The LUT path reads qs and d only: the permuted copy is for the row kernel, i.e. for its tail rows.)
    const bool lut_covers_all = lut && w.packed->n_groups * kLutRows >= w.n_out;
    const size_t perm_bytes = fmt == ActFormat::Q8_K && !lut_covers_all && ternary_wants_perm(active_isa(), w.type, n_in)
                                  ? ternary_perm_bytes(w.type, n_in)
                                  : 0;
    const ActLayout l = act_layout(fmt, n_in, zero_point != 0 || with_bsp, perm_bytes);
    thread_local std::vector<uint8_t> scratch;  // reused across calls by the calling thread
    scratch.resize(l.stride * size_t(n_tokens) + 64);
    uint8_t* base = reinterpret_cast<uint8_t*>(
        (reinterpret_cast<uintptr_t>(scratch.data()) + 63) & ~uintptr_t(63));
    const Isa qisa = active_isa();  // the SIMD quantizers are bit-identical to the scalar one
    const auto q8_32 = qisa == Isa::Avx512 ? quantize_act_q8_32_avx512
                       : qisa == Isa::Avx2 ? quantize_act_q8_32_avx2
                                           : quantize_act_q8_32;
    const auto q8_K = qisa == Isa::Avx512 ? quantize_act_q8_K_avx512
                      : qisa == Isa::Avx2 ? quantize_act_q8_K_avx2
                                          : quantize_act_q8_K;
    run_range(pool, n_tokens, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        uint8_t* p = base + size_t(t) * l.stride;
        int8_t* qs = reinterpret_cast<int8_t*>(p);
        float* d = reinterpret_cast<float*>(p + l.off_d);
        if (fmt == ActFormat::Q8_32) {
          int32_t* sum = reinterpret_cast<int32_t*>(p + l.off_sums);
          q8_32(x + t * n_in, n_in, qs, d, sum);
          if (zero_point != 0) {  // |sum| <= 32 * 127: the product fits an int32
            int32_t* zp = reinterpret_cast<int32_t*>(p + l.off_zp);
            for (int64_t b = 0; b < n_in / 32; ++b) zp[b] = -zero_point * sum[b];
          }
        } else {
          const int16_t* bs = reinterpret_cast<int16_t*>(p + l.off_sums);
          q8_K(x + t * n_in, n_in, qs, d, reinterpret_cast<int16_t*>(p + l.off_sums));
          if (perm_bytes != 0) ternary_permute_act_vbmi(w.type, qs, bs, n_in, reinterpret_cast<int8_t*>(p + l.off_perm));
          if (with_bsp) {  // |bs_j| <= 32 * 127: an int16
            int16_t* bp = reinterpret_cast<int16_t*>(p + l.off_zp);
            for (int64_t b = 0; b < n_in / 256; ++b, bs += 16, bp += 8) {
              int16_t s[8];
              for (int j = 0; j < 8; ++j) s[j] = int16_t(bs[2 * j] + bs[2 * j + 1]);
              const int order[8] = {0, 2, 1, 3, 4, 6, 5, 7};
              for (int i = 0; i < 8; ++i) bp[i] = s[order[i]];
            }
          }
        }
      }
    });
    for (int64_t t = 0; t < n_tokens; ++t) {
      const uint8_t* p = base + size_t(t) * l.stride;
      ActRow& a = acts[size_t(t)];
      a.qs = reinterpret_cast<const int8_t*>(p);
      a.d = reinterpret_cast<const float*>(p + l.off_d);
      if (fmt == ActFormat::Q8_32) a.sum = reinterpret_cast<const int32_t*>(p + l.off_sums);
      else a.bsums = reinterpret_cast<const int16_t*>(p + l.off_sums);
      if (zero_point != 0) a.zp = reinterpret_cast<const int32_t*>(p + l.off_zp);
      if (with_bsp) a.bsp = reinterpret_cast<const int32_t*>(p + l.off_zp);
      if (perm_bytes != 0) a.tperm = reinterpret_cast<const int8_t*>(p + l.off_perm);
    }
  }

  const int64_t tile = token_tile(w.type, n_in);
  const uint8_t* wbase = static_cast<const uint8_t*>(w.data);
  const int64_t n_out = w.n_out;
  // Rows [o0, o1) × tokens [t0, t1) with the row kernel, row_call_tokens() tokens per call.
  const int64_t call_tokens = row_call_tokens(active_isa());
  auto rows = [&](int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    for (int64_t o = o0; o < o1; ++o) {
      const void* row = wbase + size_t(o) * w.row_stride;
      for (int64_t t = t0; t < t1; t += call_tokens) {
        const int nt = int(std::min<int64_t>(call_tokens, t1 - t));
        float out[kMaxTokensPerCall];
        dot(row, &acts[size_t(t)], nt, n_in, out);
        for (int k = 0; k < nt; ++k) y[(t + k) * n_out + o] = out[k];
      }
    }
  };

  // Grouped paths: work items are groups of `rows_per_group` rows, plus one item for the tail rows
  // (n_out % rows_per_group, row kernel); group(g, t, nt) computes group g for tokens [t, t + nt).
  auto run_groups = [&](int64_t rows_per_group, int64_t max_tok, auto&& group) {
    const int64_t n_groups = n_out / rows_per_group;
    const bool tail = n_out > n_groups * rows_per_group;
    run_range(pool, n_groups + (tail ? 1 : 0), [&](int64_t g0, int64_t g1) {
      for (int64_t t0 = 0; t0 < n_tokens; t0 += tile) {
        const int64_t t1 = std::min(n_tokens, t0 + tile);
        for (int64_t g = g0; g < g1; ++g) {
          if (g == n_groups) {
            rows(n_groups * rows_per_group, n_out, t0, t1);
            continue;
          }
          // ceil(len / max_tok) calls of near-equal width (32 tokens by 6: 6,6,5,5,5,5 rather
          // than 6,6,6,6,6,2: a narrow call reuses each weight vector for few tokens).
          const int64_t len = t1 - t0, calls = (len + max_tok - 1) / max_tok;
          for (int64_t c = 0, t = t0; c < calls; ++c) {
            const int64_t nt = len / calls + (c < len % calls ? 1 : 0);
            group(g, t, int(nt));
            t += nt;
          }
        }
      }
    });
  };

  if (lut) {
    // Ternary LUT layout (ternary_lut.h): each thread takes one contiguous range of 64-row chunks (its
    // tables are built once per block for all of them); the n_out % 64 tail rows go to the row kernel.
    const PackedMatrix& p = *w.packed;
    const bool simd = ternary_lut_available(w.type, n_in);
    const int64_t parts = pool ? pool->size() : 1, n_chunks = std::min(p.n_groups, n_out / kLutRows);
    run_range(pool, parts, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t c0 = n_chunks * i / parts, c1 = n_chunks * (i + 1) / parts;
        if (simd) ternary_lut_matmul_avx512vbmi(p, c0, c1, acts.data(), int(n_tokens), y, n_out);
        else ternary_lut_matmul_scalar(p, c0, c1, acts.data(), int(n_tokens), y, n_out);
        if (i == parts - 1 && n_chunks * kLutRows < n_out) rows(n_chunks * kLutRows, n_out, 0, n_tokens);
      }
    });
    return;
  }
  if (const PackedDotFn pdot = w.packed ? pick_packed_kernel(active_isa(), w.type) : nullptr) {
    const PackedMatrix& p = *w.packed;  // p.n_groups == n_out / kPackRows
    run_groups(kPackRows, kMaxPackedTokens, [&](int64_t g, int64_t t, int nt) {
      pdot(p, g, &acts[size_t(t)], nt, y + t * n_out + g * kPackRows, n_out);
    });
    return;
  }
  // Float weights on AVX2 / AVX-512: tile kernels, many rows for one token (decode: their FMA chains
  // overlap) or rows × tokens blocks (prefill). The shape depends on n_tokens, the results do not.
  const Isa isa = active_isa();
  const bool one_token = n_tokens == 1;
  const TileKernel tk = isa == Isa::Avx512 ? tile_kernel_avx512(w.type, one_token)
                        : isa == Isa::Avx2 ? tile_kernel_avx2(w.type, one_token)
                                           : TileKernel{};
  if (tk.fn) {
    run_groups(tk.rows, tk.max_tokens, [&](int64_t g, int64_t t, int nt) {
      tk.fn(wbase + size_t(g * tk.rows) * w.row_stride, w.row_stride, &acts[size_t(t)], nt, n_in,
            y + t * n_out + g * tk.rows, n_out);
    });
    return;
  }

  run_range(pool, n_out, [&](int64_t o0, int64_t o1) {
    for (int64_t t0 = 0; t0 < n_tokens; t0 += tile) rows(o0, o1, t0, std::min(n_tokens, t0 + tile));
  });
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool) {
  matmul_impl(w, x, y, n_tokens, &pool);
}

void matmul_serial(const WeightMatrix& w, const float* x, float* y, int64_t n_tokens) {
  matmul_impl(w, x, y, n_tokens, nullptr);
}

void pack_for_matmul(WeightMatrix& w) {
  using namespace cpu;
  const Isa isa = active_isa();  // pack where the active ISA has a packed kernel (not for scalar)
  if (is_ternary(w.type)) {  // the LUT layout where the CPU has its kernel (ternary_lut.h)
    if (!w.packed && w.n_out >= kLutMinRows && ternary_lut_enabled() && ternary_lut_available(w.type, w.n_in)) {
      validate(w);
      w.packed = pack_ternary_lut(w.type, w.data, w.n_in, w.n_out, w.row_stride);
    }
    return;
  }
  if (w.packed || isa == Isa::Scalar || !packable(w.type) || !pick_packed_kernel(isa, w.type)) return;
  validate(w);
  w.packed = pack_matrix(w.type, w.data, w.n_in, w.n_out, w.row_stride);
}

bool matmul_reads_original(const WeightMatrix& w) {
  using namespace cpu;
  if (w.packed && w.packed->rows_per_group == kLutRows)  // every ISA has a LUT kernel (the scalar one)
    return w.packed->n_groups * kLutRows != w.n_out || act_format_for(w.type, w.n_in) != ActFormat::Q8_K;
  return !(w.packed && w.packed->n_groups * kPackRows == w.n_out &&
           pick_packed_kernel(active_isa(), w.type) != nullptr);
}

void matmul_ref(const WeightMatrix& w, const float* x, float* y, int64_t n_tokens) {
  cpu::validate(w);
  std::vector<float> row(size_t(w.n_in));
  const uint8_t* wbase = static_cast<const uint8_t*>(w.data);
  for (int64_t o = 0; o < w.n_out; ++o) {
    dequantize_row_ref(w.type, wbase + size_t(o) * w.row_stride, row.data(), w.n_in);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * w.n_in;
      double acc = 0.0;
      for (int64_t i = 0; i < w.n_in; ++i) acc += double(row[size_t(i)]) * double(xt[i]);
      y[t * w.n_out + o] = float(acc);
    }
  }
}

}  // namespace polykv
