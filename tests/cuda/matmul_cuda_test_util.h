// Helpers of the CUDA matmul tests, shared by the CPU test of the kernels' arithmetic
// (tests/cuda_quant_decode_test.cpp, runs in CI) and the GPU test (tests/cuda/matmul_cuda_test.cpp):
// random weights of every type, and references. Host code only (no CUDA header).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cuda/matmul_cuda_dot.cuh"
#include "core/dtype.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "../quant_block_fields.h"

namespace polykv::cuda_test {

// Every weight type the CPU matmul takes (DTypeInfo::weight_type).
inline std::vector<DType> weight_types() {
  return {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,  DType::Q4_1,  DType::Q5_0, DType::Q5_1,
          DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::TQ1_0, DType::TQ2_0, DType::PTQ1_0};
}

using test::half_fields;
using test::is_float_type;

inline std::vector<float> normal_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& f : v) f = dist(rng);
  return v;
}

// n_out rows of n_in values of type t, `stride` bytes apart (>= the row's bytes; 0: packed rows),
// stored at byte `offset` of `bytes` (to test misaligned rows). Quantized rows: random bytes (every
// bit pattern of the quants) with the f16 scales set to small finite values, or, when `quantized` and
// quantize_row_ref supports t, quantized random normal floats. Float rows: random normal values.
struct Weights {
  std::vector<uint8_t> bytes;
  size_t offset = 0;
  WeightMatrix m;
  const uint8_t* row(int64_t o) const { return static_cast<const uint8_t*>(m.data) + size_t(o) * m.row_stride; }
};

inline Weights make_weights(DType t, int64_t n_in, int64_t n_out, uint32_t seed, bool quantized = false,
                            size_t stride = 0, size_t offset = 0) {
  Weights w;
  const size_t rb = row_bytes(t, n_in);
  if (stride == 0) stride = rb;
  w.offset = offset;
  w.bytes.assign(offset + stride * size_t(n_out) + 16, 0xA5);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
  for (int64_t o = 0; o < n_out; ++o) {
    uint8_t* row = w.bytes.data() + offset + size_t(o) * stride;
    if (is_float_type(t) || (quantized && can_quantize(t))) {
      const auto f = normal_floats(size_t(n_in), seed * 7919u + uint32_t(o), 0.1f);
      quantize_row_ref(t, f.data(), row, n_in);
    } else {
      for (size_t i = 0; i < rb; ++i) row[i] = uint8_t(rng());
      const DTypeInfo& info = dtype_info(t);
      for (int64_t b = 0; b < n_in / info.block_size; ++b)
        for (size_t off : half_fields(t)) {
          const uint16_t h = f32_to_fp16(scale(rng));
          std::memcpy(row + size_t(b) * size_t(info.type_size) + off, &h, 2);
        }
    }
  }
  w.m.type = t;
  w.m.data = w.bytes.data() + offset;
  w.m.n_in = n_in;
  w.m.n_out = n_out;
  w.m.row_stride = stride;
  return w;
}

// The activations the quantized-weight kernels use: x rounded to d * q per block of 32 (the host
// twin of the device's quantization). Float weights use x unchanged.
inline std::vector<float> quantized_acts(const std::vector<float>& x, int64_t n_in, int64_t n) {
  std::vector<float> out(x.size());
  int8_t q[32];
  cuda::hd::ActScale s;
  for (int64_t c = 0; c < n; ++c)
    for (int64_t b = 0; b < n_in / 32; ++b) {
      const float* xb = x.data() + c * n_in + b * 32;
      cuda::hd::quantize_act_block(xb, q, s);
      for (int i = 0; i < 32; ++i) out[size_t(c * n_in + b * 32 + i)] = s.d * float(q[i]);
    }
  return out;
}

// Per output y[c][o]: the exact dot with the activations the kernels use (double, from
// dequantize_row_ref), Σ |w_i x_i|, and the rigorous bound of the activation quantization
// Σ |w_i| amax_32(i) / 254 (0 for float weights).
struct Reference {
  std::vector<double> exact_q;   // [n][n_out] Σ w_i * xq_i
  std::vector<double> abs_dot;   // [n][n_out] Σ |w_i x_i|
  std::vector<double> act_err;   // [n][n_out]
};

inline Reference reference(const WeightMatrix& w, const std::vector<float>& x, int64_t n) {
  Reference r;
  const size_t total = size_t(n * w.n_out);
  r.exact_q.assign(total, 0);
  r.abs_dot.assign(total, 0);
  r.act_err.assign(total, 0);
  const bool quant = !is_float_type(w.type);
  const std::vector<float> xq = quant ? quantized_acts(x, w.n_in, n) : x;
  std::vector<float> row(size_t(w.n_in));
  for (int64_t o = 0; o < w.n_out; ++o) {
    dequantize_row_ref(w.type, static_cast<const uint8_t*>(w.data) + size_t(o) * w.row_stride, row.data(), w.n_in);
    for (int64_t c = 0; c < n; ++c) {
      const float* xc = x.data() + c * w.n_in;
      const float* qc = xq.data() + c * w.n_in;
      double e = 0, a = 0, q = 0;
      for (int64_t i0 = 0; i0 < w.n_in; i0 += 32) {
        const int64_t i1 = std::min<int64_t>(w.n_in, i0 + 32);
        double amax = 0;
        for (int64_t i = i0; i < i1; ++i) amax = std::max(amax, double(std::fabs(xc[i])));
        for (int64_t i = i0; i < i1; ++i) {
          const double wi = row[size_t(i)];
          e += wi * double(qc[i]);
          a += std::fabs(wi * double(xc[i]));
          if (quant) q += std::fabs(wi) * amax / 254.0;
        }
      }
      const size_t k = size_t(c * w.n_out + o);
      r.exact_q[k] = e;
      r.abs_dot[k] = a;
      r.act_err[k] = q;
    }
  }
  return r;
}

// ‖a - b‖ / ‖b‖ over all elements.
inline double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Host emulation of the CUDA mat-vec kernels (matmul_cuda.cu): the same per-lane functions, lane by
// lane, and the warp butterfly emulated; NC columns per kernel call, R = rows_per_warp_q / _f rows per
// warp. Returns y [n][n_out]. The device computes exactly these operations (see matmul_cuda_hd.cuh).
struct QuantActs {
  std::vector<int8_t> qs;              // [n][n_in]
  std::vector<cuda::hd::ActScale> s;   // [n][n_in / 32]
};

inline QuantActs quantize_acts(const std::vector<float>& x, int64_t n_in, int64_t n) {
  QuantActs a;
  a.qs.resize(size_t(n * n_in));
  a.s.resize(size_t(n * (n_in / 32)));
  for (int64_t c = 0; c < n; ++c)
    for (int64_t b = 0; b < n_in / 32; ++b)
      cuda::hd::quantize_act_block(x.data() + c * n_in + b * 32, a.qs.data() + c * n_in + b * 32,
                                   a.s[size_t(c * (n_in / 32) + b)]);
  return a;
}

template <int NC, int R, class RowFn>
std::vector<float> emulate_warps(const WeightMatrix& w, int64_t n, RowFn&& lane_fn) {
  std::vector<float> y(size_t(n * w.n_out), NAN);
  for (int64_t col0 = 0; col0 < n; col0 += NC) {
    const int ncols = int(std::min<int64_t>(NC, n - col0));
    for (int64_t row0 = 0; row0 < w.n_out; row0 += R) {
      const uint8_t* rows[R];
      for (int r = 0; r < R; ++r)
        rows[r] = static_cast<const uint8_t*>(w.data) + size_t(std::min<int64_t>(row0 + r, w.n_out - 1)) * w.row_stride;
      std::vector<float> acc(size_t(32 * R * NC), 0.0f);
      for (int lane = 0; lane < 32; ++lane) {
        float a[R][NC] = {};
        lane_fn(rows, col0, ncols, lane, a);
        for (int r = 0; r < R; ++r)
          for (int c = 0; c < NC; ++c) acc[size_t((r * NC + c) * 32 + lane)] = a[r][c];
      }
      for (int r = 0; r < R && row0 + r < w.n_out; ++r)
        for (int c = 0; c < ncols; ++c) {
          float v[32];
          for (int l = 0; l < 32; ++l) v[l] = acc[size_t((r * NC + c) * 32 + l)];
          y[size_t((col0 + c) * w.n_out + row0 + r)] = cuda::hd::warp_sum_emulated(v);
        }
    }
  }
  return y;
}

template <int NC>
std::vector<float> emulate_matvec(const WeightMatrix& w, const std::vector<float>& x, int64_t n) {
  std::vector<float> y;
  const bool quant = cuda::hd::visit_quant_decoder(w.type, [&](auto dec) {
    using T = decltype(dec);
    constexpr int R = cuda::hd::rows_per_warp_q<T, NC>();
    const QuantActs a = quantize_acts(x, w.n_in, n);
    const int64_t nbx = w.n_in / 32;
    y = emulate_warps<NC, R>(w, n, [&](const uint8_t* const (&rows)[R], int64_t col0, int ncols, int lane,
                                        float (&acc)[R][NC]) {
      cuda::hd::lane_dot_q<T, NC, R, 2>(rows, a.qs.data() + col0 * w.n_in, a.s.data() + col0 * nbx, w.n_in,
                                         ncols, lane, acc);
    });
  });
  if (quant) return y;
  cuda::hd::visit_float_decoder(w.type, [&](auto dec) {
    using F = decltype(dec);
    constexpr int R = cuda::hd::rows_per_warp_f<F, NC>();
    const int64_t ldx = (w.n_in + 7) / 8 * 8;
    std::vector<float> xp(size_t(n * ldx), 0.0f);
    for (int64_t c = 0; c < n; ++c) std::copy_n(x.data() + c * w.n_in, w.n_in, xp.data() + c * ldx);
    y = emulate_warps<NC, R>(w, n, [&](const uint8_t* const (&rows)[R], int64_t col0, int ncols, int lane,
                                        float (&acc)[R][NC]) {
      cuda::hd::lane_dot_f<F, NC, R, false>(rows, xp.data() + col0 * ldx, ldx, w.n_in, ncols, lane, acc);
    });
  });
  return y;
}

// The stream kernel's staging on the host (matmul_cuda_stream.cu; rows whose start and stride are
// 16-byte aligned): per iteration, the chunks of hd::Stage (quantized) or hd::FStage (float) copied
// from the row to a 16-byte aligned buffer that is poisoned first, then every lane's
// hd::staged_lane_step / staged_lane_step_f. Counts in *bad_copies the chunk copies that would leave
// [row, row + stride) or overflow the buffer. R = 1 and the type's widest are both emulated by the
// callers (emulate_warps puts R rows in one warp; the rows' results must not depend on it), and
// K units per lane per iteration (the kernel's R = 1 takes 2).
template <int NC, int R0 = 0, int K = 1>
std::vector<float> emulate_matvec_staged(const WeightMatrix& w, const std::vector<float>& x, int64_t n,
                                         int64_t* bad_copies) {
  std::vector<float> y;
  *bad_copies = 0;
  const bool quant = cuda::hd::visit_quant_decoder(w.type, [&](auto dec) {
    using T = decltype(dec);
    {
      using St = cuda::hd::Stage<T, K>;
      constexpr int R = R0 ? R0 : cuda::hd::rows_per_warp_q<T, NC>();
      const QuantActs a = quantize_acts(x, w.n_in, n);
      const int64_t nbx = w.n_in / 32, n_blocks = w.n_in / T::kBlockValues;
      const int64_t n_iters = (n_blocks + St::kBlocks - 1) / St::kBlocks;
      std::vector<uint8_t> bufs(size_t(R) * St::kChunks * 16);  // operator new: 16-byte aligned
      y = emulate_warps<NC, R>(w, n, [&](const uint8_t* const (&rows)[R], int64_t col0, int ncols, int lane,
                                         float (&acc)[R][NC]) {
        for (int64_t it = 0; it < n_iters; ++it) {
          const St st = cuda::hd::stage_plan<T, K>(it, n_blocks);
          const uint8_t* b[R];
          for (int r = 0; r < R; ++r) {
            uint8_t* dst = bufs.data() + size_t(r) * St::kChunks * 16;
            std::fill_n(dst, St::kChunks * 16, uint8_t(0xEE));
            const uint8_t* src = cuda::hd::stage_source<T>(rows[r], st);
            if (st.chunks > St::kChunks || src < rows[r] || src + 16 * st.chunks > rows[r] + w.row_stride)
              ++*bad_copies;
            else
              std::memcpy(dst, src, size_t(16 * st.chunks));
            b[r] = dst;
          }
          cuda::hd::staged_lane_step<T, NC, R, K>(b, st, a.qs.data() + col0 * w.n_in, a.s.data() + col0 * nbx, w.n_in,
                                               ncols, lane, acc);
        }
      });
    }
  });
  if (quant) return y;
  cuda::hd::visit_float_decoder(w.type, [&](auto dec) {
    using F = decltype(dec);
    constexpr int R = R0 ? R0 : cuda::hd::rows_per_warp_f<F, NC>();
    const int64_t ldx = (w.n_in + 7) / 8 * 8;
    std::vector<float> xp(size_t(n * ldx), 0.0f);
    for (int64_t c = 0; c < n; ++c) std::copy_n(x.data() + c * w.n_in, w.n_in, xp.data() + c * ldx);
    const int64_t n_units = (w.n_in + F::kValues - 1) / F::kValues, n_iters = (n_units + 32 * K - 1) / (32 * K);
    std::vector<uint8_t> bufs(size_t(R) * 32 * K * 16);
    y = emulate_warps<NC, R>(w, n, [&](const uint8_t* const (&rows)[R], int64_t col0, int ncols, int lane,
                                       float (&acc)[R][NC]) {
      for (int64_t it = 0; it < n_iters; ++it) {
        const cuda::hd::FStage<K> st = cuda::hd::fstage_plan<F, K>(it, w.n_in);
        const uint8_t* b[R];
        for (int r = 0; r < R; ++r) {
          uint8_t* dst = bufs.data() + size_t(r) * 32 * K * 16;
          std::fill_n(dst, 32 * K * 16, uint8_t(0xEE));
          const uint8_t* src = rows[r] + 16 * st.u0;
          if (st.nu > 32 * K || st.nu < 1 || src + 16 * st.nu > rows[r] + w.row_stride)
            ++*bad_copies;
          else
            std::memcpy(dst, src, size_t(16 * st.nu));
          b[r] = dst;
        }
        cuda::hd::staged_lane_step_f<F, NC, R, K>(b, st, xp.data() + col0 * ldx, ldx, w.n_in, ncols, lane, acc);
      }
    });
  });
  return y;
}

}  // namespace polykv::cuda_test
