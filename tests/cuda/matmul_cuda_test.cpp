// GPU tests of backend/cuda/matmul_cuda (skip without a GPU): the mat-vec kernels of every weight type
// for 1..8 columns at awkward shapes and row alignments, against the CPU's matmul_ref (within the
// rigorous bound of the 8-bit activations), against the exact dot with those activations (f32
// rounding only) and bit for bit against the host emulation of the same kernels
// (cuda/matmul_cuda_test_util.h, which tests/cuda_quant_decode_test.cpp checks on the CPU); batch
// invariance (a column's result bit-identical whatever the other columns); the prefill path
// (chunked mat-vec and cuBLAS tiles); dequantize_rows exactly. Outputs are poisoned with NaN first and
// every element is checked. MatmulCudaBench.DISABLED_* time the kernels (run with
// --gtest_also_run_disabled_tests --gtest_filter='MatmulCudaBench.*').
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <vector>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/matmul_cuda_internal.h"
#include "cuda_test_util.h"
#include "matmul_cuda_test_util.h"

namespace polykv {
namespace {

using cuda_test::is_float_type;
using cuda_test::make_weights;

cuda::CudaContext& ctx() {
  static std::unique_ptr<cuda::CudaContext> c = std::make_unique<cuda::CudaContext>(0);
  return *c;
}

using cuda_test::DeviceBuffer;
using cuda_test::upload;

template <class T>
std::vector<T> download(const T* d, size_t n) {
  return cuda_test::download(d, n, ctx().stream());
}

// The weights on the device at the same offset (mod 256) as on the host, so the rows keep their
// alignment; returns the device matrix.
struct DeviceWeights {
  std::unique_ptr<DeviceBuffer> buf;
  WeightMatrix m;
};

DeviceWeights upload(const cuda_test::Weights& w) {
  DeviceWeights d;
  d.buf = std::make_unique<DeviceBuffer>(w.bytes.size() + 256);
  const size_t off = w.offset % 256;
  const size_t n = w.m.row_stride * size_t(w.m.n_out);
  cuda_test::h2d(d.buf->as<uint8_t>() + off, w.bytes.data() + w.offset, n);
  d.m = w.m;
  d.m.data = d.buf->as<uint8_t>() + off;
  return d;
}

void poison(float* y, size_t n) { cuda_test::poison(y, n, ctx().stream()); }

std::string describe(const WeightMatrix& w, int64_t n, const std::string& what) {
  std::ostringstream s;
  s << what << " " << dtype_name(w.type) << " n_out=" << w.n_out << " n_in=" << w.n_in << " n=" << n
    << " stride=" << w.row_stride << " align=" << cuda::hd::common_alignment(reinterpret_cast<uintptr_t>(w.data), w.row_stride);
  return s.str();
}

// Every element written (no NaN left from the poison) and within bounds; prints the first failure
// in full and a summary (relative error, bit mismatches against the emulation).
struct Check {
  std::string what;
  int fails = 0;
  void fail(const std::string& msg) {
    if (fails++ < 5) ADD_FAILURE() << what << ": " << msg;
  }
};

// Relative error bound of ‖y - matmul_ref‖ / ‖matmul_ref‖: the 8-bit activations on random normal
// data cost ~0.3-0.5 %; float weights only f32 rounding. Checked only where the norm averages over
// enough outputs (n_out >= kRelMinOutputs): a single output's relative error has no averaging and can
// be large where its dot cancels (q8_0, n_out 1, n_in 1440: 4 % on the H200, within the per-element
// bound). Every output is held to the rigorous per-element bound of the 8-bit activations anyway:
// |y - matmul_ref| <= Σ_i |w_i| amax_32(i) / 254 (1 % slack for the rounding of d) + 2e-5 Σ |w_i x_i|.
double rel_bound_matvec(DType t) { return is_float_type(t) ? 1e-5 : 1.5e-2; }
constexpr int64_t kRelMinOutputs = 256;

void check_matvec_result(const WeightMatrix& w, const std::vector<float>& x, int64_t n, const std::vector<float>& y,
                         const std::string& what, bool against_emulation) {
  Check chk{what};
  const auto ref = cuda_test::reference(w, x, n);
  std::vector<float> mref(size_t(n * w.n_out));
  matmul_ref(w, x.data(), mref.data(), n);
  for (size_t i = 0; i < y.size(); ++i) {
    const size_t c = i / size_t(w.n_out), o = i % size_t(w.n_out);
    std::ostringstream at;
    at << "y[" << c << "][" << o << "] = " << y[i];
    if (std::isnan(y[i])) {
      chk.fail(at.str() + " was not written (NaN poison left) or is NaN");
      continue;
    }
    const double tol_f32 = 2e-5 * ref.abs_dot[i] + 1e-30;
    if (std::fabs(y[i] - ref.exact_q[i]) > tol_f32)
      chk.fail(at.str() + ", exact dot with the kernel's activations " + std::to_string(ref.exact_q[i]) +
               " (tol " + std::to_string(tol_f32) + ")");
    if (std::fabs(y[i] - mref[i]) > 1.01 * ref.act_err[i] + tol_f32)
      chk.fail(at.str() + ", matmul_ref " + std::to_string(mref[i]) + " beyond the activation bound " +
               std::to_string(ref.act_err[i]));
  }
  const double rel = cuda_test::rel_error(y, mref);
  if (w.n_out >= kRelMinOutputs && rel > rel_bound_matvec(w.type))
    chk.fail("relative error " + std::to_string(rel) + " > " + std::to_string(rel_bound_matvec(w.type)));
  if (against_emulation) {
    const auto emu = cuda_test::emulate_matvec<1>(w, x, n);
    int64_t mismatches = 0, first = -1;
    double max_diff = 0;
    for (size_t i = 0; i < y.size(); ++i)
      if (std::memcmp(&y[i], &emu[i], 4) != 0) {
        if (first < 0) first = int64_t(i);
        ++mismatches;
        max_diff = std::max(max_diff, std::fabs(double(y[i]) - emu[i]));
      }
    if (mismatches)
      chk.fail(std::to_string(mismatches) + " of " + std::to_string(y.size()) +
               " outputs differ in bits from the host emulation (first at " + std::to_string(first) + ": " +
               std::to_string(y[size_t(first)]) + " vs " + std::to_string(emu[size_t(first)]) +
               ", max |diff| " + std::to_string(max_diff) + ")");
  }
  if (chk.fails) ADD_FAILURE() << what << ": " << chk.fails << " failures, relative error " << rel;
}

// n_in values for a type: multiples of 256 and (legacy / float types) lengths that are not.
std::vector<int64_t> test_lengths(DType t) {
  if (is_float_type(t)) return {37, 256, 1000, 2053};
  if (dtype_info(t).block_size == 32) return {32, 224, 1024, 1440};
  if (dtype_info(t).block_size == 128) return {128, 384, 1152, 2048};  // ptq1_0: odd numbers of blocks too
  return {256, 768, 2048};
}

TEST(MatmulCuda, MatvecMatchesReferenceEveryTypeAndWidth) {
  POLYKV_REQUIRE_GPU();
  const int64_t n_outs[] = {7, 33, 1000, 1};
  uint32_t seed = 1;
  for (DType t : cuda_test::weight_types()) {
    const auto lengths = test_lengths(t);
    for (size_t li = 0; li < lengths.size(); ++li) {
      const int64_t n_in = lengths[li];
      const int64_t n_out = n_outs[li % 4];
      // Packed rows from an aligned start, then padded (16-byte aligned) rows, then rows 2 bytes
      // off (4 for f32): the three load widths.
      const size_t rb = row_bytes(t, n_in);
      const size_t elem = t == DType::F32 ? 4 : 2;
      struct Layout { size_t stride, offset; };
      const Layout layouts[] = {{rb, 0}, {(rb + 31) / 16 * 16, 0}, {rb + 2 * elem, elem}};
      for (const Layout& L : layouts) {
        const auto w = make_weights(t, n_in, n_out, ++seed, seed % 2 == 0, L.stride, L.offset);
        const DeviceWeights dw = upload(w);
        for (int n : {1, 2, 3, 5, 8}) {
          const auto x = cuda_test::normal_floats(size_t(n * n_in), ++seed);
          const auto dx = upload(x);
          DeviceBuffer dy(size_t(n * n_out) * 4);
          poison(dy.as<float>(), size_t(n * n_out));
          cuda::matvec(dw.m, dx->as<float>(), dy.as<float>(), n, ctx());
          const auto y = download(dy.as<float>(), size_t(n * n_out));
          check_matvec_result(w.m, x, n, y, describe(dw.m, n, "matvec"), true);
        }
      }
    }
  }
}

// A column's result does not depend on the other columns: column j of an n-column call equals
// (memcmp) the same column computed alone, for n = 2..8, through matvec and through matmul's
// chunked path (n <= 32).
TEST(MatmulCuda, BatchInvariantBitForBit) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 900;
  for (DType t : cuda_test::weight_types()) {
    const int64_t n_in = is_float_type(t) ? 1000 : 1024, n_out = 259;
    const auto w = make_weights(t, n_in, n_out, ++seed, true);
    const DeviceWeights dw = upload(w);
    const int n_max = 20;
    const auto x = cuda_test::normal_floats(size_t(n_max * n_in), ++seed);
    const auto dx = upload(x);
    DeviceBuffer dy(size_t(n_max * n_out) * 4);
    std::vector<std::vector<float>> alone(n_max);
    for (int j = 0; j < n_max; ++j) {
      poison(dy.as<float>(), size_t(n_out));
      cuda::matvec(dw.m, dx->as<float>() + j * n_in, dy.as<float>(), 1, ctx());
      alone[size_t(j)] = download(dy.as<float>(), size_t(n_out));
    }
    auto expect_same = [&](const std::vector<float>& y, int n, const char* how) {
      for (int j = 0; j < n; ++j)
        for (int64_t o = 0; o < n_out; ++o) {
          const float a = y[size_t(j * n_out + o)], b = alone[size_t(j)][size_t(o)];
          ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << dtype_name(t) << " " << how << " n=" << n << ": column " << j
                                                << " row " << o << " is " << a << ", alone " << b;
        }
    };
    for (int n = 2; n <= 8; ++n) {
      poison(dy.as<float>(), size_t(n * n_out));
      cuda::matvec(dw.m, dx->as<float>(), dy.as<float>(), n, ctx());
      expect_same(download(dy.as<float>(), size_t(n * n_out)), n, "matvec");
    }
    if (!is_float_type(t)) {
      poison(dy.as<float>(), size_t(n_max * n_out));
      cuda::matmul(dw.m, dx->as<float>(), dy.as<float>(), n_max, ctx());
      expect_same(download(dy.as<float>(), size_t(n_max * n_out)), n_max, "matmul (chunked mat-vec)");
    }
  }
}

// The stream kernel (16-byte aligned rows) for every split: rows per warp 1 and the widest, forced,
// and automatic; PDL on and off; matrices large enough that every warp of the persistent grid streams
// several row groups (each of several iterations) through its ring. Every variant must equal the
// host emulation bit for bit (a row's result does not depend on the split), the automatic one also
// checked against matmul_ref.
TEST(MatmulCuda, StreamKernelEverySplitBitExact) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 3000;
  struct Variant {
    int rows;
    bool pdl;
  };
  const Variant variants[] = {{0, true}, {1, true}, {99, true}, {1, false}, {99, false}};
  for (DType t : cuda_test::weight_types()) {
    const int bs = dtype_info(t).block_size;
    // 2-3 iterations per row (32 units each).
    const int64_t n_in = is_float_type(t) ? 300 : bs == 32 ? 33 * 32 : 5 * 256;
    const size_t stride = (row_bytes(t, n_in) + 15) / 16 * 16;
    // Rows for two groups of the widest R per warp of a full GPU.
    WeightMatrix probe;
    probe.type = t;
    probe.n_in = n_in;
    probe.n_out = 1 << 20;
    probe.row_stride = stride;
    probe.data = reinterpret_cast<const void*>(uintptr_t(256));
    cuda::set_matvec_rows_per_warp(99);
    const cuda::StreamPlan wide = cuda::stream_plan(probe, 1, ctx());
    cuda::set_matvec_rows_per_warp(0);
    ASSERT_GT(wide.grid, 0) << dtype_name(t);
    const int64_t n_out =
        2 * int64_t(wide.rows_per_warp) * ctx().sm_count() * wide.blocks_per_sm * wide.warps_per_block + 37;
    const auto w = make_weights(t, n_in, n_out, ++seed, true, stride);
    const DeviceWeights dw = upload(w);
    for (int n : {1, 5}) {  // x loaded first (1-2 columns); column by column (the 8-wide kernel)
      const auto x = cuda_test::normal_floats(size_t(n * n_in), ++seed);
      const auto dx = upload(x);
      DeviceBuffer dy(size_t(n * n_out) * 4);
      std::vector<float> first;
      for (const Variant& v : variants) {
        cuda::set_matvec_rows_per_warp(v.rows);
        cuda::set_matvec_pdl(v.pdl);
        const cuda::StreamPlan plan = cuda::stream_plan(dw.m, n, ctx());
        std::ostringstream what;
        what << describe(dw.m, n, "stream matvec") << " rows_per_warp=" << plan.rows_per_warp
             << " (forced " << v.rows << ") warps=" << plan.warps_per_block << " depth=" << plan.depth
             << " grid=" << plan.grid << " blocks/SM=" << plan.blocks_per_sm << " pdl=" << v.pdl;
        EXPECT_LE(plan.grid, int64_t(ctx().sm_count()) * plan.blocks_per_sm) << what.str();
        if (v.rows == 1) EXPECT_EQ(plan.rows_per_warp, 1) << what.str();
        if (v.rows == 99) EXPECT_GT(plan.rows_per_warp, 1) << what.str();
        poison(dy.as<float>(), size_t(n * n_out));
        cuda::matvec(dw.m, dx->as<float>(), dy.as<float>(), n, ctx());
        const auto y = download(dy.as<float>(), size_t(n * n_out));
        if (first.empty()) {
          check_matvec_result(w.m, x, n, y, what.str(), true);
          first = y;
          continue;
        }
        int64_t diff = 0, at = -1;
        for (size_t i = 0; i < y.size(); ++i)
          if (std::memcmp(&y[i], &first[i], 4) != 0) {
            if (at < 0) at = int64_t(i);
            ++diff;
          }
        EXPECT_EQ(diff, 0) << what.str() << ": " << diff << " outputs differ in bits from the automatic split's"
                           << " (first y[" << (at < 0 ? 0 : at / n_out) << "][" << (at < 0 ? 0 : at % n_out)
                           << "] = " << (at < 0 ? 0.f : y[size_t(at)]) << " vs " << (at < 0 ? 0.f : first[size_t(at)])
                           << ")";
      }
      cuda::set_matvec_rows_per_warp(0);
      cuda::set_matvec_pdl(true);
    }
  }
}

// The small float kernel (a row in one warp's registers, loaded before the PDL wait) against the stream
// kernel and the host emulation, bit for bit: every float type, rows that end inside a unit, one unit, the
// router shapes (128 x 2048, 32 x 2880 f32), each register budget (8, 16, 24, 32 units a lane), row counts
// that leave a block's warps idle, PDL on and off. Matrices past its limits must stay on the stream kernel.
TEST(MatmulCuda, FloatRegsKernelSameBits) {
  POLYKV_REQUIRE_GPU();
  struct Shape {
    int64_t n_in, n_out;
  };
  const Shape shapes[] = {{1, 1},    {3, 5},      {37, 7},     {256, 33},  {1000, 9},  {2048, 128},
                          {2053, 3}, {2880, 32},  {3001, 100}, {4093, 17}, {4096, 1024}};
  uint32_t seed = 7000;
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (const Shape& sh : shapes) {
      const size_t stride = (row_bytes(t, sh.n_in) + 15) / 16 * 16;
      const auto w = make_weights(t, sh.n_in, sh.n_out, ++seed, false, stride);
      const DeviceWeights dw = upload(w);
      const auto x = cuda_test::normal_floats(size_t(sh.n_in), ++seed);
      const auto dx = upload(x);
      DeviceBuffer dy(size_t(sh.n_out) * 4);
      EXPECT_TRUE(cuda::matvec_float_regs_takes(dw.m, 1)) << describe(dw.m, 1, "takes");  // every shape is within
      EXPECT_FALSE(cuda::matvec_float_regs_takes(dw.m, 2));
      std::vector<float> ys[2];
      for (int regs = 1; regs >= 0; --regs) {
        for (bool pdl : {true, false}) {
          cuda::set_matvec_float_regs(regs == 1);
          cuda::set_matvec_pdl(pdl);
          poison(dy.as<float>(), size_t(sh.n_out));
          cuda::matvec(dw.m, dx->as<float>(), dy.as<float>(), 1, ctx());
          const auto y = download(dy.as<float>(), size_t(sh.n_out));
          const std::string what = describe(dw.m, 1, regs ? "float regs matvec" : "stream matvec") +
                                   (pdl ? " pdl" : " no pdl");
          check_matvec_result(w.m, x, 1, y, what, true);
          if (!pdl) ys[regs] = y;
        }
      }
      cuda::set_matvec_float_regs(true);
      cuda::set_matvec_pdl(true);
      EXPECT_EQ(std::memcmp(ys[0].data(), ys[1].data(), ys[0].size() * 4), 0) << describe(dw.m, 1, "regs vs stream");
    }
  }
  // Past the limits: more than 1024 rows, more than 4096 values, unaligned rows.
  WeightMatrix m;
  m.type = DType::F32;
  m.n_in = 2048;
  m.n_out = 1025;
  m.row_stride = 2048 * 4;
  m.data = reinterpret_cast<const void*>(uintptr_t(256));
  EXPECT_FALSE(cuda::matvec_float_regs_takes(m, 1));
  m.n_out = 1024;
  EXPECT_TRUE(cuda::matvec_float_regs_takes(m, 1));
  m.n_in = 4097;
  m.row_stride = 4112 * 4;
  EXPECT_FALSE(cuda::matvec_float_regs_takes(m, 1));
  m.n_in = 2048;
  m.row_stride = 2048 * 4 + 4;
  EXPECT_FALSE(cuda::matvec_float_regs_takes(m, 1));
}

// matmul() for n > 8: chunked mat-vec (quantized, n <= 32) or tensor cores; the latter rounds x and
// the weights to f16: |Δy| <= (2^-11 + 2^-11) Σ|w x| plus f32 accumulation, so 1.2e-3 Σ|w x| per
// element and ~2e-3 relative overall (f32 weights: an f32 GEMM, 1e-5).
TEST(MatmulCuda, PrefillMatchesReference) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 5000;
  for (size_t tile_bytes : {size_t(0), size_t(1)}) {  // the default tile, then small tiles (below)
    for (DType t : cuda_test::weight_types()) {
      const int64_t n_in = is_float_type(t) ? 520 : 512, n_out = 300;
      // Second pass: tiles of 128 rows (3 tiles over 300 rows, the last one partial).
      cuda::set_prefill_tile_bytes(tile_bytes ? size_t(n_in) * 2 * 128 : 0);
      const auto w = make_weights(t, n_in, n_out, ++seed, true);
      const DeviceWeights dw = upload(w);
      for (int n : {9, 33, 64, 300}) {
        const auto x = cuda_test::normal_floats(size_t(n * n_in), ++seed);
        const auto dx = upload(x);
        DeviceBuffer dy(size_t(n * n_out) * 4);
        poison(dy.as<float>(), size_t(n * n_out));
        cuda::matmul(dw.m, dx->as<float>(), dy.as<float>(), n, ctx());
        const auto y = download(dy.as<float>(), size_t(n * n_out));
        const std::string what = describe(dw.m, n, "matmul") + " tile_bytes=" + std::to_string(tile_bytes);
        const bool chunked = !is_float_type(t) && n <= cuda::kChunkedMatvecMaxCols;
        if (chunked) {
          check_matvec_result(w.m, x, n, y, what + " (chunked mat-vec)", true);
          continue;
        }
        std::vector<float> mref(size_t(n * n_out));
        matmul_ref(w.m, x.data(), mref.data(), n);
        const auto ref = cuda_test::reference(w.m, x, n);
        const double per_elem = t == DType::F32 ? 2e-5 : 1.2e-3, rel_bound = t == DType::F32 ? 1e-5 : 2e-3;
        Check chk{what + " (tensor cores)"};
        for (size_t i = 0; i < y.size(); ++i) {
          const double tol = per_elem * ref.abs_dot[i] + 1e-30;
          if (std::isnan(y[i]) || std::fabs(y[i] - mref[i]) > tol)
            chk.fail("y[" + std::to_string(i / size_t(n_out)) + "][" + std::to_string(i % size_t(n_out)) + "] = " +
                     std::to_string(y[i]) + ", matmul_ref " + std::to_string(mref[i]) + " (tol " + std::to_string(tol) +
                     ")");
        }
        const double rel = cuda_test::rel_error(y, mref);
        if (rel > rel_bound) chk.fail("relative error " + std::to_string(rel) + " > " + std::to_string(rel_bound));
      }
    }
  }
  cuda::set_prefill_tile_bytes(0);
}

// dequantize_rows: dequantize_row_ref times the scale exactly (a zero may change sign), repeated and
// out-of-range indices included (the latter give NaN rows).
TEST(MatmulCuda, DequantizeRowsExact) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 7000;
  for (DType t : cuda_test::weight_types()) {
    const int64_t n_in = is_float_type(t) ? 77 : 512, n_out = 19;
    for (bool aligned : {true, false}) {
      const size_t rb = row_bytes(t, n_in);
      const auto w = make_weights(t, n_in, n_out, ++seed, false, aligned ? rb : rb + (t == DType::F32 ? 4 : 2),
                                  aligned ? 0 : (t == DType::F32 ? 4 : 2));
      const DeviceWeights dw = upload(w);
      const std::vector<int32_t> rows = {0, 18, 3, 3, 7, -1, 19, 1};
      const auto drows = upload(rows);
      for (float scale : {1.0f, 0.3926991f}) {
        DeviceBuffer dd(rows.size() * size_t(n_in) * 4);
        poison(dd.as<float>(), rows.size() * size_t(n_in));
        cuda::dequantize_rows(dw.m, drows->as<int32_t>(), int(rows.size()), scale, dd.as<float>(), ctx().stream());
        const auto got = download(dd.as<float>(), rows.size() * size_t(n_in));
        std::vector<float> ref(static_cast<size_t>(n_in));
        for (size_t i = 0; i < rows.size(); ++i) {
          const bool valid = rows[i] >= 0 && rows[i] < n_out;
          if (valid) dequantize_row_ref(t, w.row(rows[i]), ref.data(), n_in);
          for (int64_t k = 0; k < n_in; ++k) {
            const float g = got[i * size_t(n_in) + size_t(k)];
            if (!valid) {
              ASSERT_TRUE(std::isnan(g)) << dtype_name(t) << " row index " << rows[i] << " value " << k << " = " << g;
              continue;
            }
            const float want = ref[size_t(k)] * scale;
            const bool same = want == 0.0f ? g == 0.0f : std::memcmp(&g, &want, 4) == 0;
            ASSERT_TRUE(same) << dtype_name(t) << (aligned ? "" : " misaligned") << " scale " << scale << " entry " << i
                              << " (row " << rows[i] << ") value " << k << ": got " << g << ", want " << want;
          }
        }
      }
    }
  }
}

// The ggml rows' prefill tile, staged kernel (the default) against the old one (POLYKV_CUDA_DEQUANT_ROWS=old): the
// same f16 bits for every quantized type, rows from an offset, unit counts that leave the last block part-filled.
TEST(MatmulCuda, DequantTileRowsStagedSameBits) {
  POLYKV_REQUIRE_GPU();
  struct Restore {
    ~Restore() { cuda::set_rows_dequant_staged(true); }  // the default
  } restore;
  uint32_t seed = 9100;
  for (DType t : cuda_test::weight_types()) {
    if (is_float_type(t)) continue;
    for (int64_t n_in : {int64_t(512), int64_t(1536)}) {
      for (int64_t n_out : {int64_t(1), int64_t(3), int64_t(77)}) {
        const auto w = make_weights(t, n_in, n_out, ++seed, true);
        const DeviceWeights dw = upload(w);
        const int64_t row0 = n_out > 2 ? 1 : 0, rows = n_out - row0;
        const size_t count = size_t(rows * n_in);
        std::vector<uint16_t> got[2];
        for (int k = 0; k < 2; ++k) {
          cuda::set_rows_dequant_staged(k == 1);
          DeviceBuffer d(count * 2);
          POLYKV_CUDA_CHECK(cudaMemsetAsync(d.p, 0xFF, count * 2, ctx().stream()));
          cuda::dequantize_tile(dw.m, row0, rows, d.p, ctx().stream());
          got[k].resize(count);
          POLYKV_CUDA_CHECK(cudaMemcpyAsync(got[k].data(), d.p, count * 2, cudaMemcpyDeviceToHost, ctx().stream()));
          POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx().stream()));
        }
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < count; ++i)
          if (got[1][i] != got[0][i] && bad++ == 0) first = i;
        EXPECT_EQ(bad, 0u) << dtype_name(t) << " " << n_out << "x" << n_in << ": first mismatch at " << first << " ("
                           << got[1][first] << " vs " << got[0][first] << ")";
      }
    }
  }
}

TEST(MatmulCuda, RejectsBadArguments) {
  POLYKV_REQUIRE_GPU();
  const auto w = make_weights(DType::Q4_0, 64, 4, 1);
  const DeviceWeights dw = upload(w);
  DeviceBuffer dx(9 * 64 * 4), dy(9 * 4 * 4);
  EXPECT_THROW(cuda::matvec(dw.m, dx.as<float>(), dy.as<float>(), 9, ctx()), Error);
  WeightMatrix odd = dw.m;
  odd.data = static_cast<const uint8_t*>(dw.m.data) + 1;  // 1-byte aligned rows
  EXPECT_THROW(cuda::matmul(odd, dx.as<float>(), dy.as<float>(), 1, ctx()), Error);
  WeightMatrix f32 = make_weights(DType::F32, 8, 2, 1).m;
  f32.data = static_cast<const uint8_t*>(dw.m.data) + 2;  // f32 rows need 4 bytes
  EXPECT_THROW(cuda::matvec(f32, dx.as<float>(), dy.as<float>(), 1, ctx()), Error);
  WeightMatrix q8k = dw.m;
  q8k.type = DType::Q8_K;
  EXPECT_THROW(cuda::matvec(q8k, dx.as<float>(), dy.as<float>(), 1, ctx()), Error);
}

// ---- benchmark (disabled by default) ----

using cuda_test::random_device_bytes;

// Median of `reps` timings (CUDA events around each call, after 3 warm-up calls), in seconds.
template <class Fn>
double median_seconds(Fn&& fn, int reps = 20) {
  return cuda_test::median_seconds(ctx().stream(), fn, reps);
}

// Device-to-device copy of 1 GiB: bytes read + written per second.
double copy_bandwidth() {
  const size_t n = size_t(1) << 30;
  DeviceBuffer a(n), b(n);
  const double s = median_seconds([&] {
    POLYKV_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, n, cudaMemcpyDeviceToDevice, ctx().stream()));
  }, 10);
  return 2.0 * double(n) / s;
}

// Weights of random bytes on the device (16-byte aligned packed rows, as the backend uploads them).
struct BenchMatrix {
  std::unique_ptr<DeviceBuffer> buf;
  WeightMatrix w;
  size_t bytes = 0;
};

BenchMatrix bench_matrix(DType t, int64_t n_out, int64_t n_in, uint64_t seed) {
  BenchMatrix m;
  m.w.type = t;
  m.w.n_in = n_in;
  m.w.n_out = n_out;
  m.w.row_stride = row_bytes(t, n_in);
  m.bytes = m.w.row_stride * size_t(n_out);
  m.buf = random_device_bytes(m.bytes, seed);
  m.w.data = m.buf->p;
  return m;
}

struct BenchShape {
  int64_t n_out, n_in;
};
// llama-3.1-8b's matrices: wq / wo, wk / wv, w_gate / w_up, w_down, the output.
const BenchShape kBenchShapes[] = {{4096, 4096}, {1024, 4096}, {14336, 4096}, {4096, 14336}, {128256, 4096}};

TEST(MatmulCudaBench, DISABLED_Matvec) {
  POLYKV_REQUIRE_GPU();
  const double copy = copy_bandwidth();
  std::printf("device-to-device copy: %.0f GB/s (read + write)\n", copy * 1e-9);
  // "call": matvec() (activation kernel + mat-vec kernel, PDL); "kernel": the mat-vec kernel alone on
  // prepared activations. GB/s = weight bytes / kernel time. R, grid: the stream kernel's rows per
  // warp and blocks.
  std::printf("%-5s %7s %7s %2s %2s %5s %9s %9s %8s %7s\n", "type", "n_out", "n_in", "n", "R", "grid", "call_us",
              "kernel_us", "GB/s", "%copy");
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::F16}) {
    for (const BenchShape& sh : kBenchShapes) {
      const BenchMatrix m = bench_matrix(t, sh.n_out, sh.n_in, 1);
      const auto x = cuda_test::normal_floats(size_t(8 * sh.n_in), 2);
      const auto dx = upload(x);
      DeviceBuffer dy(size_t(8 * sh.n_out) * 4);
      for (int n : {1, 2, 4, 8}) {
        const double call = median_seconds([&] { cuda::matvec(m.w, dx->as<float>(), dy.as<float>(), n, ctx()); });
        const cuda::ActView acts = cuda::prepare_acts(m.w, dx->as<float>(), n, ctx());
        const double kernel = median_seconds([&] { cuda::launch_matvec(m.w, acts, 0, n, dy.as<float>(), ctx()); });
        const cuda::StreamPlan plan = cuda::stream_plan(m.w, n, ctx());
        const double gbs = double(m.bytes) / kernel;
        std::printf("%-5s %7lld %7lld %2d %2d %5d %9.1f %9.1f %8.0f %6.1f%%\n", dtype_name(t), (long long)sh.n_out,
                    (long long)sh.n_in, n, plan.rows_per_warp, plan.grid, call * 1e6, kernel * 1e6, gbs * 1e-9,
                    100.0 * gbs / copy);
      }
    }
  }
}

// The stream kernel's choices side by side (for tuning): kernel time with rows per warp 1 and the
// widest, and the call's time with and without PDL, for 1 and 2 columns.
TEST(MatmulCudaBench, DISABLED_MatvecVariants) {
  POLYKV_REQUIRE_GPU();
  std::printf("%-5s %7s %7s %2s %4s %10s %10s %4s %10s %10s %10s\n", "type", "n_out", "n_in", "n", "auto", "R1_us",
              "Rmax_us", "Rmax", "call_pdl", "call_nopdl", "Rmax_GB/s");
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::F16}) {
    for (const BenchShape& sh : kBenchShapes) {
      const BenchMatrix m = bench_matrix(t, sh.n_out, sh.n_in, 1);
      const auto x = cuda_test::normal_floats(size_t(2 * sh.n_in), 2);
      const auto dx = upload(x);
      DeviceBuffer dy(size_t(2 * sh.n_out) * 4);
      for (int n : {1, 2}) {
        const int chosen = cuda::stream_plan(m.w, n, ctx()).rows_per_warp;
        const cuda::ActView acts = cuda::prepare_acts(m.w, dx->as<float>(), n, ctx());
        double us[2];
        int rmax = 0;
        for (int k = 0; k < 2; ++k) {
          cuda::set_matvec_rows_per_warp(k == 0 ? 1 : 99);
          if (k == 1) rmax = cuda::stream_plan(m.w, n, ctx()).rows_per_warp;
          us[k] = 1e6 * median_seconds([&] { cuda::launch_matvec(m.w, acts, 0, n, dy.as<float>(), ctx()); });
        }
        cuda::set_matvec_rows_per_warp(0);
        double call[2];
        for (int k = 0; k < 2; ++k) {
          cuda::set_matvec_pdl(k == 0);
          call[k] = 1e6 * median_seconds([&] { cuda::matvec(m.w, dx->as<float>(), dy.as<float>(), n, ctx()); });
        }
        cuda::set_matvec_pdl(true);
        std::printf("%-5s %7lld %7lld %2d %4d %10.1f %10.1f %4d %10.1f %10.1f %10.0f\n", dtype_name(t),
                    (long long)sh.n_out, (long long)sh.n_in, n, chosen, us[0], us[1], rmax, call[0], call[1],
                    double(m.bytes) / us[1] * 1e-3);
      }
    }
  }
}

// One llama-3.1-8b layer's mat-vecs for one token (q4_0 and q8_0: wq, wk, wv, wo, w_gate, w_up,
// w_down; each call quantizes its activations), back to back on the stream as a decode step issues
// them: time per layer against the bytes' floor at the copy bandwidth. Plain launches with and
// without PDL, then the same calls captured in a CUDA graph (no host launch overhead).
TEST(MatmulCudaBench, DISABLED_DecodeLayer) {
  POLYKV_REQUIRE_GPU();
  const double copy = copy_bandwidth();
  const BenchShape layer[] = {{4096, 4096}, {1024, 4096}, {1024, 4096}, {4096, 4096},
                              {14336, 4096}, {14336, 4096}, {4096, 14336}};
  std::printf("%-5s %-12s %10s %10s %8s %7s\n", "type", "launch", "layer_us", "floor_us", "GB/s", "%copy");
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    std::vector<BenchMatrix> ms;
    size_t bytes = 0;
    uint64_t seed = 10;
    for (const BenchShape& sh : layer) {
      ms.push_back(bench_matrix(t, sh.n_out, sh.n_in, ++seed));
      bytes += ms.back().bytes;
    }
    const auto x = cuda_test::normal_floats(14336, 3);
    const auto dx = upload(x);
    DeviceBuffer dy(14336 * 4);
    auto run_layer = [&] {
      for (const BenchMatrix& m : ms) cuda::matvec(m.w, dx->as<float>(), dy.as<float>(), 1, ctx());
    };
    auto report = [&](const char* how, double s) {
      const double gbs = double(bytes) / s;
      std::printf("%-5s %-12s %10.1f %10.1f %8.0f %6.1f%%\n", dtype_name(t), how, s * 1e6, double(bytes) / copy * 1e6,
                  gbs * 1e-9, 100.0 * gbs / copy);
    };
    cuda::set_matvec_pdl(false);
    report("plain", median_seconds(run_layer));
    cuda::set_matvec_pdl(true);
    report("pdl", median_seconds(run_layer));
    // Graph: warm (scratch sized, kernels configured) above; capture one layer, replay.
    cudaStream_t s = ctx().stream();
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    POLYKV_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    run_layer();
    POLYKV_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    POLYKV_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    report("graph+pdl", median_seconds([&] { POLYKV_CUDA_CHECK(cudaGraphLaunch(exec, s)); }));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
}

// The ggml rows' prefill tile (64 MiB of f16, n_in 4096), old kernel against staged: GB/s of weights read + f16
// written, median of 15 over 4 matrices in turn.
TEST(MatmulCudaBench, DISABLED_DequantTileRows) {
  POLYKV_REQUIRE_GPU();
  struct Restore {
    ~Restore() { cuda::set_rows_dequant_staged(true); }  // the default
  } restore;
  std::printf("%-6s %6s %8s %8s %8s %8s\n", "type", "rows", "old_us", "stg_us", "old_GB/s", "stg_GB/s");
  DeviceBuffer dst(size_t(64) << 20);
  for (DType t : cuda_test::weight_types()) {
    if (is_float_type(t)) continue;
    const int64_t n_in = 4096, rows = (int64_t(64) << 20) / (n_in * 2);
    const auto hw = make_weights(t, n_in, 1, 3, true);
    std::vector<std::unique_ptr<DeviceBuffer>> bufs;
    std::vector<WeightMatrix> ws;
    for (int c = 0; c < 4; ++c) {
      WeightMatrix w = hw.m;
      w.n_out = rows;
      std::vector<uint8_t> all(w.row_stride * size_t(rows));
      for (int64_t o = 0; o < rows; ++o) std::memcpy(all.data() + size_t(o) * w.row_stride, hw.row(0), w.row_stride);
      bufs.push_back(upload(all));
      w.data = bufs.back()->p;
      ws.push_back(w);
    }
    const double bytes = double(ws[0].row_stride) * double(rows) + 2.0 * double(rows) * double(n_in);
    double us[2];
    for (int k = 0; k < 2; ++k) {
      cuda::set_rows_dequant_staged(k == 1);
      int i = 0;
      us[k] = 1e6 * median_seconds([&] { cuda::dequantize_tile(ws[size_t(i++ % 4)], 0, rows, dst.p, ctx().stream()); }, 15);
    }
    std::printf("%-6s %6lld %8.1f %8.1f %8.0f %8.0f\n", dtype_name(t), (long long)rows, us[0], us[1], bytes / us[0] * 1e-3,
                bytes / us[1] * 1e-3);
    std::fflush(stdout);
  }
}

TEST(MatmulCudaBench, DISABLED_Prefill) {
  POLYKV_REQUIRE_GPU();
  std::printf("%-5s %7s %7s %5s %10s %8s\n", "type", "n_out", "n_in", "n", "us", "TFLOP/s");
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::F16}) {
    for (int64_t n_out : {int64_t(4096), int64_t(14336)}) {
      WeightMatrix w;
      w.type = t;
      w.n_in = 4096;
      w.n_out = n_out;
      w.row_stride = row_bytes(t, w.n_in);
      // Real-looking values (random bytes could hold f16 infinities, whose products are NaN).
      const auto hw = make_weights(t, w.n_in, 1, 3, true);
      std::vector<uint8_t> all(w.row_stride * size_t(n_out));
      for (int64_t o = 0; o < n_out; ++o) std::memcpy(all.data() + size_t(o) * w.row_stride, hw.row(0), w.row_stride);
      const auto wbuf = upload(all);
      w.data = wbuf->p;
      for (int n : {32, 512, 4096}) {
        const auto x = cuda_test::normal_floats(size_t(n * w.n_in), 4);
        const auto dx = upload(x);
        DeviceBuffer dy(size_t(n * n_out) * 4);
        const double s = median_seconds([&] { cuda::matmul(w, dx->as<float>(), dy.as<float>(), n, ctx()); }, 10);
        std::printf("%-5s %7lld %7lld %5d %10.1f %8.1f\n", dtype_name(t), (long long)n_out, (long long)w.n_in, n,
                    s * 1e6, 2.0 * double(n) * double(n_out) * double(w.n_in) / s * 1e-12);
      }
    }
  }
}

}  // namespace
}  // namespace polykv
