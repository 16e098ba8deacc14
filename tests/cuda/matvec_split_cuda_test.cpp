// GPU tests of the split weight layout (backend/cuda/matmul_cuda_split.{cuh,cu}; skip without a GPU):
// for q4_0, q8_0, q4_K and q6_K at awkward shapes, weights uploaded as ggml rows (the old path: the stream
// kernel) and repacked by upload_split (the split kernel) must give the same bits for the mat-vec
// with 1..8 columns, the chunked mat-vec (20 columns), the tensor-core path (40 columns: the same f16
// tiles), matmul_parts over several split matrices (= separate calls), the prepared-activation
// variants, and dequantize_rows; the split results are also checked against the host emulation of
// the kernels (bits) and matmul_ref (the rigorous bound of the 8-bit activations). Every failure
// prints the type, shape, column count, first bad index, got / want and the number of mismatches.
// MatvecSplitCudaBench.DISABLED_OldVsSplit times both layouts (GB/s of weights) on llama-3.1-8b shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/matmul_cuda_internal.h"
#include "backend/cuda/matmul_cuda_prepared.h"
#include "backend/cuda/matmul_cuda_split.h"
#include "cuda_test_util.h"
#include "matmul_cuda_test_util.h"

namespace polykv {
namespace {

using cuda_test::make_weights;

cuda::CudaContext& ctx() {
  static std::unique_ptr<cuda::CudaContext> c = std::make_unique<cuda::CudaContext>(0);
  return *c;
}

using cuda_test::DeviceBuffer;
using cuda_test::upload;

std::vector<float> download(const float* d, size_t n) { return cuda_test::download(d, n, ctx().stream()); }
void poison(float* y, size_t n) { cuda_test::poison(y, n, ctx().stream()); }

// One host matrix on the device twice: ggml rows (layout Rows, 256-byte aligned) and split.
struct Both {
  std::unique_ptr<DeviceBuffer> old_buf, split_buf;
  WeightMatrix old_w, split_w;
};

Both upload_both(const WeightMatrix& host) {
  Both b;
  const size_t n = host.row_stride * size_t(host.n_out);
  b.old_buf = std::make_unique<DeviceBuffer>(n);
  cuda_test::h2d(b.old_buf->p, host.data, n);
  b.old_w = host;
  b.old_w.data = b.old_buf->p;
  b.split_buf = std::make_unique<DeviceBuffer>(cuda::split_row_stride(host.type, host.n_in) * size_t(host.n_out));
  b.split_w = cuda::upload_split(host, b.split_buf->p, ctx().stream());
  return b;
}

std::string describe(const WeightMatrix& w, int64_t n, const std::string& what) {
  std::ostringstream s;
  s << what << ": " << dtype_name(w.type) << " n_out=" << w.n_out << " n_in=" << w.n_in << " n=" << n;
  return s.str();
}

// got == want bit for bit (NaN = NaN when both have the same bits); reports the first mismatch.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what,
                      int64_t n_out) {
  EXPECT_TRUE(cuda_test::same_bits(got, want, what, n_out));
}

// |y - matmul_ref| within the rigorous bound of the 8-bit activations (as tests/cuda/matmul_cuda_test.cpp).
void expect_within_reference(const std::vector<float>& got, const WeightMatrix& host, const std::vector<float>& x,
                             int64_t n, const std::string& what) {
  const auto ref = cuda_test::reference(host, x, n);
  std::vector<float> y(size_t(n * host.n_out));
  matmul_ref(host, x.data(), y.data(), n);
  int fails = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = 1.01 * ref.act_err[i] + 2e-5 * ref.abs_dot[i] + 1e-6;
    const double err = std::fabs(double(got[i]) - double(y[i]));
    if (!(err <= bound) && fails++ < 3)
      ADD_FAILURE() << what << ": output " << i << " (column " << i / size_t(host.n_out) << ", row "
                    << i % size_t(host.n_out) << ") = " << got[i] << ", matmul_ref " << y[i] << ", |err| " << err
                    << " > bound " << bound;
  }
}

struct Shape {
  int64_t n_out, n_in;
};

std::vector<Shape> shapes_for(DType t) {
  if (dtype_info(t).block_size == 256)
    return {{1, 256}, {3, 256}, {37, 1280}, {129, 4096}, {67, 14336}, {33, 11264}, {5, 11008 + 256}};
  return {{1, 32}, {3, 32}, {37, 96}, {129, 4096}, {67, 14336}, {33, 11008 + 32}, {259, 1024}};
}

const DType kSplitTypes[] = {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

TEST(MatvecSplitCuda, SameBitsAsTheOldKernelsOneToEightColumns) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 1000;
  for (DType t : kSplitTypes) {
    for (const Shape& s : shapes_for(t)) {
      ++seed;
      const auto w = make_weights(t, s.n_in, s.n_out, seed, seed % 2 == 0);
      const Both b = upload_both(w.m);
      ASSERT_EQ(b.split_w.layout, WeightLayout::CudaSplit);
      const auto x = cuda_test::normal_floats(size_t(8 * s.n_in), seed + 7);
      const auto dx = upload(x);
      DeviceBuffer y_old(size_t(8 * s.n_out) * 4), y_split(size_t(8 * s.n_out) * 4);
      for (int n = 1; n <= 8; ++n) {
        const size_t total = size_t(n * s.n_out);
        poison(y_old.as<float>(), total);
        poison(y_split.as<float>(), total);
        cuda::matvec(b.old_w, dx->as<float>(), y_old.as<float>(), n, ctx());
        cuda::matvec(b.split_w, dx->as<float>(), y_split.as<float>(), n, ctx());
        const auto got = download(y_split.as<float>(), total), want = download(y_old.as<float>(), total);
        const std::string what = describe(w.m, n, "matvec split vs old");
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_FALSE(std::isnan(got[i])) << what << ": output " << i << " not written";
        expect_same_bits(got, want, what, s.n_out);
        if (n == 1 || n == 3 || n == 8) {
          const std::vector<float> xn(x.begin(), x.begin() + n * s.n_in);
          expect_within_reference(got, w.m, xn, n, what);
          const auto emu = n == 1 ? cuda_test::emulate_matvec<1>(w.m, xn, n)
                           : n == 3 ? cuda_test::emulate_matvec<4>(w.m, xn, n)
                                    : cuda_test::emulate_matvec<8>(w.m, xn, n);
          expect_same_bits(got, emu, what + " against the host emulation", s.n_out);
        }
        if (HasFailure()) return;
      }
    }
  }
}

// A column's bits do not depend on the other columns (speculative verification): column c of an
// n-column call = the 1-column call on that column.
TEST(MatvecSplitCuda, BatchInvariant) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 2000;
  for (DType t : kSplitTypes) {
    const int64_t n_in = dtype_info(t).block_size == 256 ? 4352 : 4128, n_out = 77;
    const auto w = make_weights(t, n_in, n_out, ++seed, true);
    const Both b = upload_both(w.m);
    const auto x = cuda_test::normal_floats(size_t(8 * n_in), seed + 1);
    const auto dx = upload(x);
    DeviceBuffer y1(size_t(n_out) * 4), yn(size_t(8 * n_out) * 4);
    for (int n : {2, 3, 5, 8}) {
      cuda::matvec(b.split_w, dx->as<float>(), yn.as<float>(), n, ctx());
      const auto all = download(yn.as<float>(), size_t(n * n_out));
      for (int c = 0; c < n; ++c) {
        cuda::matvec(b.split_w, dx->as<float>() + c * n_in, y1.as<float>(), 1, ctx());
        const auto one = download(y1.as<float>(), size_t(n_out));
        const std::vector<float> col(all.begin() + c * n_out, all.begin() + (c + 1) * n_out);
        expect_same_bits(col, one, describe(w.m, n, "column " + std::to_string(c) + " vs the 1-column call"), n_out);
      }
      if (HasFailure()) return;
    }
  }
}

// More columns: the chunked mat-vec (20) and the tensor cores (40 with the staged tile kernel, 41 with the old
// one; the same f16 tiles, so the same bits), split vs old, with the mmq path off (it takes split weights from 9
// columns on: tests/cuda/mmq_cuda_test.cpp).
TEST(MatvecSplitCuda, ChunkedAndPrefillSameBits) {
  POLYKV_REQUIRE_GPU();
  const bool mmq_was = cuda::mmq_enabled();
  cuda::set_mmq(false);
  struct Restore {
    bool on;
    ~Restore() { cuda::set_mmq(on); }
  } restore{mmq_was};
  struct RestoreDequant {
    ~RestoreDequant() { cuda::set_split_dequant(cuda::SplitDequant::Staged); }
  } restore_dequant;
  uint32_t seed = 3000;
  for (DType t : kSplitTypes) {
    const int64_t n_in = dtype_info(t).block_size == 256 ? 1280 : 1056, n_out = 200;
    const auto w = make_weights(t, n_in, n_out, ++seed, true);
    const Both b = upload_both(w.m);
    for (int n : {20, 40, 41}) {
      // 41: the tensor-core path with the split tile's other kernel (40: the default).
      cuda::set_split_dequant(n == 41 ? cuda::SplitDequant::Old : cuda::SplitDequant::Staged);
      cuda::set_prefill_tile_bytes(size_t(64) * size_t(n_in) * 2);  // several tiles
      const auto x = cuda_test::normal_floats(size_t(n * n_in), seed + 5);
      const auto dx = upload(x);
      DeviceBuffer y_old(size_t(n * n_out) * 4), y_split(size_t(n * n_out) * 4);
      poison(y_split.as<float>(), size_t(n * n_out));
      cuda::matmul(b.old_w, dx->as<float>(), y_old.as<float>(), n, ctx());
      cuda::matmul(b.split_w, dx->as<float>(), y_split.as<float>(), n, ctx());
      expect_same_bits(download(y_split.as<float>(), size_t(n * n_out)), download(y_old.as<float>(), size_t(n * n_out)),
                       describe(w.m, n, "matmul split vs old"), n_out);
      cuda::set_prefill_tile_bytes(0);
    }
  }
}

// The prefill tile's two kernels (cuda::SplitDequant) give the same f16 bits, rows from an offset, row counts
// whose units do not fill the staged kernel's last thread block.
TEST(MatvecSplitCuda, DequantTileKernelsSameBits) {
  POLYKV_REQUIRE_GPU();
  struct RestoreDequant {
    ~RestoreDequant() { cuda::set_split_dequant(cuda::SplitDequant::Staged); }
  } restore;
  const cuda::SplitDequant variants[] = {cuda::SplitDequant::Old, cuda::SplitDequant::Staged};
  uint32_t seed = 7100;
  for (DType t : kSplitTypes) {
    for (const Shape& sh : shapes_for(t)) {
      const auto w = make_weights(t, sh.n_in, sh.n_out, ++seed, true);
      const Both b = upload_both(w.m);
      const int64_t row0 = sh.n_out > 2 ? 1 : 0, rows = sh.n_out - row0;
      const size_t count = size_t(rows * sh.n_in);
      std::vector<std::vector<uint16_t>> got;
      for (cuda::SplitDequant v : variants) {
        cuda::set_split_dequant(v);
        DeviceBuffer d(count * 2);
        POLYKV_CUDA_CHECK(cudaMemsetAsync(d.p, 0xFF, count * 2, ctx().stream()));
        cuda::dequantize_split_tile_f16(b.split_w, row0, rows, d.p, ctx().stream());
        std::vector<uint16_t> h(count);
        POLYKV_CUDA_CHECK(cudaMemcpyAsync(h.data(), d.p, count * 2, cudaMemcpyDeviceToHost, ctx().stream()));
        POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx().stream()));
        got.push_back(std::move(h));
      }
      for (size_t k = 1; k < got.size(); ++k) {
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < count; ++i)
          if (got[k][i] != got[0][i] && bad++ == 0) first = i;
        EXPECT_EQ(bad, 0u) << dtype_name(t) << " " << sh.n_out << "x" << sh.n_in << " kernel " << k
                           << ": first mismatch at " << first << " (" << got[k][first] << " vs " << got[0][first] << ")";
      }
    }
  }
}

// matmul_parts over split matrices of awkward row counts (one launch) = separate old calls.
TEST(MatvecSplitCuda, PartsSameBitsAsSeparateCalls) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 4000;
  for (DType t : kSplitTypes) {
    const int64_t n_in = dtype_info(t).block_size == 256 ? 2048 : 2080;
    const int64_t rows[] = {37, 5, 130, 1};
    std::vector<cuda_test::Weights> ws;
    std::vector<Both> bs;
    for (int64_t r : rows) {
      ws.push_back(make_weights(t, n_in, r, ++seed, true));
      bs.push_back(upload_both(ws.back().m));
    }
    const auto x = cuda_test::normal_floats(size_t(8 * n_in), seed + 3);
    const auto dx = upload(x);
    for (int n : {1, 2, 4, 7}) {
      for (size_t np = 1; np <= 4; ++np) {
        std::vector<std::unique_ptr<DeviceBuffer>> ys;
        std::vector<cuda::MatvecPart> parts;
        for (size_t p = 0; p < np; ++p) {
          ys.push_back(std::make_unique<DeviceBuffer>(size_t(n * rows[p]) * 4));
          poison(ys.back()->as<float>(), size_t(n * rows[p]));
          parts.push_back({&bs[p].split_w, ys.back()->as<float>()});
        }
        ASSERT_TRUE(cuda::parts_stream_together(parts)) << "split parts should run in one launch";
        cuda::matmul_parts(parts, dx->as<float>(), n, ctx());
        for (size_t p = 0; p < np; ++p) {
          DeviceBuffer y(size_t(n * rows[p]) * 4);
          cuda::matmul(bs[p].old_w, dx->as<float>(), y.as<float>(), n, ctx());
          expect_same_bits(download(ys[p]->as<float>(), size_t(n * rows[p])), download(y.as<float>(), size_t(n * rows[p])),
                           describe(bs[p].old_w, n, "part " + std::to_string(p) + " of " + std::to_string(np)), rows[p]);
        }
        if (HasFailure()) return;
      }
    }
  }
}

// A split and a ggml matrix together: not one launch, still the right results.
TEST(MatvecSplitCuda, MixedLayoutsFallBackToSeparateCalls) {
  POLYKV_REQUIRE_GPU();
  const auto w = make_weights(DType::Q4_0, 4096, 33, 5001, true);
  const Both b = upload_both(w.m);
  DeviceBuffer y0(33 * 4), y1(33 * 4);
  const cuda::MatvecPart parts[] = {{&b.split_w, y0.as<float>()}, {&b.old_w, y1.as<float>()}};
  EXPECT_FALSE(cuda::parts_stream_together(parts));
  const auto x = cuda_test::normal_floats(4096, 5002);
  const auto dx = upload(x);
  cuda::matmul_parts(parts, dx->as<float>(), 1, ctx());
  expect_same_bits(download(y0.as<float>(), 33), download(y1.as<float>(), 33), "mixed layouts", 33);
}

// dequantize_rows on split weights = on ggml rows, bit for bit (NaN rows for bad indices).
TEST(MatvecSplitCuda, DequantizeRowsSameBits) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 6000;
  for (DType t : kSplitTypes) {
    const int64_t n_in = dtype_info(t).block_size == 256 ? 512 : 96, n_out = 19;
    const auto w = make_weights(t, n_in, n_out, ++seed);
    const Both b = upload_both(w.m);
    const std::vector<int32_t> rows = {0, 18, 3, 3, 7, -1, 19, 1};
    const auto drows = upload(rows);
    const size_t total = rows.size() * size_t(n_in);
    DeviceBuffer d_old(total * 4), d_split(total * 4);
    poison(d_split.as<float>(), total);
    cuda::dequantize_rows(b.old_w, drows->as<int32_t>(), int(rows.size()), 0.3926991f, d_old.as<float>(), ctx().stream());
    cuda::dequantize_rows(b.split_w, drows->as<int32_t>(), int(rows.size()), 0.3926991f, d_split.as<float>(),
                          ctx().stream());
    expect_same_bits(download(d_split.as<float>(), total), download(d_old.as<float>(), total),
                     describe(w.m, int64_t(rows.size()), "dequantize_rows split vs old"), n_in);
  }
}

// The backend's upload: split for the split types unless switched off (POLYKV_CUDA_MATVEC=old), ggml
// rows otherwise and for other types; matmul and matmul_multi through the backend give the same bits
// either way.
TEST(MatvecSplitCuda, BackendUploadFollowsTheSwitch) {
  POLYKV_REQUIRE_GPU();
  const auto wq = make_weights(DType::Q4_0, 4096, 96, 7001, true), wk = make_weights(DType::Q4_0, 4096, 32, 7002, true);
  const auto w5 = make_weights(DType::Q5_0, 4096, 40, 7003, true);
  const auto x = cuda_test::normal_floats(size_t(2 * 4096), 7004);
  std::vector<float> out[2];
  const bool was = cuda::split_layout_enabled(DType::Q4_0);
  for (int k = 0; k < 2; ++k) {
    cuda::set_split_layout_enabled(k == 0);
    auto be = make_cuda_backend(0);
    const WeightMatrix dq = be->upload_matrix(wq.m), dk = be->upload_matrix(wk.m), d5 = be->upload_matrix(w5.m);
    EXPECT_EQ(dq.layout, k == 0 ? WeightLayout::CudaSplit : WeightLayout::Rows) << "switch " << (k == 0 ? "on" : "off");
    EXPECT_EQ(d5.layout, WeightLayout::Rows) << "q5_0 has no split layout";
    float* dx = static_cast<float*>(be->allocate(x.size() * 4));
    float* dy = static_cast<float*>(be->allocate(size_t(2 * (96 + 32 + 40)) * 4));
    be->upload(dx, x.data(), x.size() * 4);
    const Backend::MatmulOut parts[] = {{&dq, dy}, {&dk, dy + 2 * 96}};
    be->matmul_multi(parts, dx, 2);
    be->matmul(d5, dx, dy + 2 * (96 + 32), 2);
    out[k].resize(size_t(2 * (96 + 32 + 40)));
    be->download(out[k].data(), dy, out[k].size() * 4);
    be->release(dx);
    be->release(dy);
  }
  cuda::set_split_layout_enabled(was);
  expect_same_bits(out[0], out[1], "backend matmul_multi + matmul, split vs old", 96);
}

// ---- benchmark ----

// Device bytes all equal to `v` (the kernels' speed does not depend on the values; 0x11 makes every
// f16 scale 5.6e-4).
std::unique_ptr<DeviceBuffer> filled_bytes(size_t n, int v) {
  auto b = std::make_unique<DeviceBuffer>(n);
  POLYKV_CUDA_CHECK(cudaMemset(b->p, v, n));
  return b;
}

// Median over `reps` of the time of `per` calls back to back (events around them) / per, seconds.
template <class Fn>
double median_per_call(Fn&& fn, int per, int reps = 15) {
  cudaStream_t s = ctx().stream();
  for (int i = 0; i < per; ++i) fn(i);
  cudaEvent_t a, b;
  POLYKV_CUDA_CHECK(cudaEventCreate(&a));
  POLYKV_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    POLYKV_CUDA_CHECK(cudaEventRecord(a, s));
    for (int i = 0; i < per; ++i) fn(i);
    POLYKV_CUDA_CHECK(cudaEventRecord(b, s));
    POLYKV_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    POLYKV_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e-3 / per);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Both layouts of llama-3.1-8b's matrices (q, o: 4096x4096; gate+up as one launch: 2 x 14336x4096;
// down: 4096x14336; the output head: 128256x4096) for 1, 2, 4 and 8 columns: the mat-vec kernel alone
// on prepared activations, launched back to back (PDL as in decode) over enough copies of the matrix
// (>= 256 MiB in all) that L2 (50 MB) holds none of them. GB/s = weight bytes / time per call; %copy
// against the device-to-device copy (bytes read + written).
// The prefill tile's dequantization (cuda::SplitDequant), llama-3.1-8b tiles as matmul_tensor_cores cuts them
// (64 MiB of f16), GB/s of weights read + f16 written.
TEST(MatvecSplitCudaBench, DISABLED_DequantTile) {
  POLYKV_REQUIRE_GPU();
  struct RestoreDequant {
    ~RestoreDequant() { cuda::set_split_dequant(cuda::SplitDequant::Staged); }
  } restore;
  const char* names[] = {"old", "staged"};
  std::printf("%-5s %6s %6s %-14s %9s %9s\n", "type", "rows", "n_in", "kernel", "us", "GB/s");
  DeviceBuffer dst(size_t(64) << 20);
  for (DType t : kSplitTypes) {
    for (int64_t n_in : {int64_t(4096), int64_t(14336)}) {
      const int64_t rows = (int64_t(64) << 20) / (n_in * 2) / 128 * 128;
      const size_t stride = cuda::split_row_stride(t, n_in);
      const int copies = 4;  // 4 matrices in turn: the weights come from DRAM
      std::vector<std::unique_ptr<DeviceBuffer>> bufs;
      std::vector<WeightMatrix> ws;
      for (int c = 0; c < copies; ++c) {
        WeightMatrix w;
        w.type = t;
        w.n_in = n_in;
        w.n_out = rows;
        w.row_stride = stride;
        w.layout = WeightLayout::CudaSplit;
        bufs.push_back(filled_bytes(stride * size_t(rows), 0x11));
        w.data = bufs.back()->p;
        ws.push_back(w);
      }
      const double bytes = double(stride) * double(rows) + 2.0 * double(rows) * double(n_in);
      for (int v = 0; v < 2; ++v) {
        cuda::set_split_dequant(cuda::SplitDequant(v));
        const double us = 1e6 * median_per_call([&](int i) {
          cuda::dequantize_split_tile_f16(ws[size_t(i % copies)], 0, rows, dst.p, ctx().stream());
        }, copies);
        std::printf("%-5s %6lld %6lld %-14s %9.1f %9.0f\n", dtype_name(t), (long long)rows, (long long)n_in, names[v],
                    us, bytes / us * 1e-3);
        std::fflush(stdout);
      }
    }
  }
}

TEST(MatvecSplitCudaBench, DISABLED_OldVsSplit) {
  POLYKV_REQUIRE_GPU();
  double copy = 0;
  {
    const size_t n = size_t(1) << 30;
    DeviceBuffer a(n), b(n);
    copy = 2.0 * double(n) / median_per_call([&](int) {
      POLYKV_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, n, cudaMemcpyDeviceToDevice, ctx().stream()));
    }, 1, 7);
  }
  std::printf("device-to-device copy: %.0f GB/s (read + write)\n", copy * 1e-9);
  std::printf("%-5s %-10s %7s %6s %2s %10s %10s %9s %9s %7s %7s %6s\n", "type", "matrix", "n_out", "n_in", "n",
              "old_us", "split_us", "old_GB/s", "split_GB/s", "old%", "split%", "ratio");
  struct BenchShape {
    const char* name;
    int64_t n_out, n_in;
    int parts;  // the rows split into this many equal matrices launched together
  };
  const BenchShape shapes[] = {{"q/o", 4096, 4096, 1},      {"gate+up", 28672, 4096, 2}, {"up", 14336, 4096, 1},
                               {"down", 4096, 14336, 1},    {"head", 128256, 4096, 1}};
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (const BenchShape& sh : shapes) {
      const int64_t part_rows = sh.n_out / sh.parts;
      const size_t old_stride = row_bytes(t, sh.n_in), split_stride = cuda::split_row_stride(t, sh.n_in);
      const size_t bytes = old_stride * size_t(sh.n_out);
      const int copies = int(std::max<size_t>(2, ((size_t(256) << 20) + bytes - 1) / bytes));
      // copies x parts matrices per layout.
      std::vector<std::unique_ptr<DeviceBuffer>> bufs;
      std::vector<std::vector<WeightMatrix>> old_w(static_cast<size_t>(copies)), split_w(static_cast<size_t>(copies));
      for (int c = 0; c < copies; ++c) {
        for (int p = 0; p < sh.parts; ++p) {
          WeightMatrix w;
          w.type = t;
          w.n_in = sh.n_in;
          w.n_out = part_rows;
          w.row_stride = old_stride;
          bufs.push_back(filled_bytes(old_stride * size_t(part_rows), 0x11));
          w.data = bufs.back()->p;
          old_w[size_t(c)].push_back(w);
          w.row_stride = split_stride;
          w.layout = WeightLayout::CudaSplit;
          bufs.push_back(filled_bytes(split_stride * size_t(part_rows), 0x11));
          w.data = bufs.back()->p;
          split_w[size_t(c)].push_back(w);
        }
      }
      const auto x = cuda_test::normal_floats(size_t(8 * sh.n_in), 2);
      const auto dx = upload(x);
      std::vector<std::unique_ptr<DeviceBuffer>> ys;
      for (int p = 0; p < sh.parts; ++p) ys.push_back(std::make_unique<DeviceBuffer>(size_t(8 * part_rows) * 4));
      for (int n : {1, 2, 4, 8}) {
        const cuda::ActView acts = cuda::prepare_acts(old_w[0][0], dx->as<float>(), n, ctx());
        double us[2];
        for (int k = 0; k < 2; ++k) {
          const auto& set = k == 0 ? old_w : split_w;
          us[k] = 1e6 * median_per_call([&](int i) {
            const auto& ws = set[size_t(i % copies)];
            std::vector<cuda::MatvecPart> parts;
            for (int p = 0; p < sh.parts; ++p) parts.push_back({&ws[size_t(p)], ys[size_t(p)]->as<float>()});
            if (!cuda::launch_matvec_stream_parts(parts, acts, 0, n, ctx()))
              for (const auto& part : parts) cuda::launch_matvec(*part.w, acts, 0, n, part.y, ctx());
          }, copies);
        }
        const double gb[2] = {double(bytes) / us[0] * 1e-3, double(bytes) / us[1] * 1e-3};
        std::printf("%-5s %-10s %7lld %6lld %2d %10.2f %10.2f %9.0f %9.0f %6.1f%% %6.1f%% %6.2f\n", dtype_name(t),
                    sh.name, (long long)sh.n_out, (long long)sh.n_in, n, us[0], us[1], gb[0], gb[1],
                    100.0 * gb[0] * 1e9 / copy, 100.0 * gb[1] * 1e9 / copy, us[0] / us[1]);
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace
}  // namespace polykv
