// GPU tests of the quantized mat-mul on tensor cores (backend/cuda/matmul_cuda_mmq.cu and
// matmul_cuda_mmq2.cu; skip without a GPU): for q4_0, q8_0, q4_K and q6_K in the split layout, awkward
// n_out / n_in and n = 9, 16, 17, 33, 63, 64, 100, 128 columns:
//  - against the exact dot of the f16-rounded weights and activations (what the tensor cores
//    multiply; f32 sums, truncating in the tensor core: |err| <= 1e-4 x sum |w x| + 1e-6) and against
//    matmul_ref (NMSE <= 1e-5, f16 rounding of both operands), every output written;
//  - batch invariance: a column gives the same bits alone in a 9-column call, in a 64- and in a
//    100-column call, and with any K split forced alike;
//  - routing: matmul() and matmul_parts() take it for 9..max columns (same bits as matmul_mmq), and
//    not when switched off.
// Every failure prints the type, shape, n, first bad (column, row), got / want, count and NMSE.
// CudaMmqBench.DISABLED_VsOldPath times it against the old path (chunked mat-vec / cuBLAS tiles).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <vector>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/matmul_cuda_internal.h"
#include "backend/cuda/matmul_cuda_split.h"
#include "core/fp16.h"
#include "cuda_test_util.h"
#include "matmul_cuda_test_util.h"

namespace polykv {
namespace {

cuda::CudaContext& ctx() {
  static std::unique_ptr<cuda::CudaContext> c = std::make_unique<cuda::CudaContext>(0);
  return *c;
}

using cuda_test::DeviceBuffer;
using cuda_test::upload;

std::vector<float> download(const float* d, size_t n) { return cuda_test::download(d, n, ctx().stream()); }
void poison(float* y, size_t n) { cuda_test::poison(y, n, ctx().stream()); }

// The settings of the mmq path for one test; restored after it (the wgmma kernel: back on, the default).
struct MmqScope {
  bool on = cuda::mmq_enabled();
  ~MmqScope() {
    cuda::set_mmq(on);
    cuda::set_mmq_wgmma(true);
  }
};

// The kernels to test for w on this device: the mma.sync kernel, and the wgmma kernel where it runs
// (builds for sm_90, an H100 / H200). Sets the switch; the name for messages.
std::vector<bool> kernels_for(const WeightMatrix& w) {
  cuda::set_mmq_wgmma(true);
  std::vector<bool> k = {false};
  if (cuda::mmq_wgmma_takes(w, ctx())) k.push_back(true);
  return k;
}
const char* kernel_name(bool wgmma) { return wgmma ? "mmq wgmma" : "mmq mma.sync"; }

struct Split {
  std::unique_ptr<DeviceBuffer> buf;
  WeightMatrix w;
};

Split upload_split(const WeightMatrix& host) {
  Split s;
  s.buf = std::make_unique<DeviceBuffer>(cuda::split_row_stride(host.type, host.n_in) * size_t(host.n_out));
  s.w = cuda::upload_split(host, s.buf->p, ctx().stream());
  return s;
}

std::string describe(const WeightMatrix& w, int64_t n, const std::string& what) {
  std::ostringstream s;
  s << what << ": " << dtype_name(w.type) << " n_out=" << w.n_out << " n_in=" << w.n_in << " n=" << n;
  return s.str();
}

float f16_round(float v) { return fp16_to_f32(f32_to_fp16(v)); }

// What the tensor cores multiply: f16 weights and activations, exact products; y [n][n_out] in double
// and Σ |w x|.
struct Ref16 {
  std::vector<double> y, abs;
};

Ref16 reference16(const WeightMatrix& host, const std::vector<float>& x, int64_t n) {
  const int64_t n_in = host.n_in, n_out = host.n_out;
  std::vector<float> w16(size_t(n_out * n_in)), x16(size_t(n * n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    dequantize_row_ref(host.type, static_cast<const uint8_t*>(host.data) + size_t(o) * host.row_stride,
                       w16.data() + o * n_in, n_in);
  }
  for (auto& v : w16) v = f16_round(v);
  for (size_t i = 0; i < x16.size(); ++i) x16[i] = f16_round(x[i]);
  Ref16 r;
  r.y.assign(size_t(n * n_out), 0);
  r.abs.assign(size_t(n * n_out), 0);
  for (int64_t c = 0; c < n; ++c)
    for (int64_t o = 0; o < n_out; ++o) {
      double s = 0, a = 0;
      const float* wr = w16.data() + o * n_in;
      const float* xc = x16.data() + c * n_in;
      for (int64_t i = 0; i < n_in; ++i) {
        const double p = double(wr[i]) * double(xc[i]);
        s += p;
        a += std::fabs(p);
      }
      r.y[size_t(c * n_out + o)] = s;
      r.abs[size_t(c * n_out + o)] = a;
    }
  return r;
}

// got (the first n columns) against ref (computed for >= n columns of the same x).
void expect_near_ref16(const std::vector<float>& got, const Ref16& ref, int64_t n, int64_t n_out, const std::string& what) {
  size_t bad = 0, first = 0;
  double num = 0, den = 0;
  for (size_t i = 0; i < size_t(n * n_out); ++i) {
    const double want = ref.y[i], err = std::fabs(double(got[i]) - want);
    num += err * err;
    den += want * want;
    if (!(err <= 1e-4 * ref.abs[i] + 1e-6) && bad++ == 0) first = i;
  }
  if (bad)
    ADD_FAILURE() << what << ": " << bad << " of " << n * n_out << " outputs off the f16 reference; first at " << first
                  << " (column " << first / size_t(n_out) << ", row " << first % size_t(n_out) << "): got "
                  << got[first] << ", want " << ref.y[first] << " (sum |w x| " << ref.abs[first]
                  << "), NMSE " << (den > 0 ? num / den : num);
}

void expect_nmse_vs_matmul_ref(const std::vector<float>& got, const WeightMatrix& host, const std::vector<float>& x,
                               int64_t n, const std::string& what) {
  std::vector<float> y(size_t(n * host.n_out));
  matmul_ref(host, x.data(), y.data(), n);
  double num = 0, den = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double d = double(got[i]) - double(y[i]);
    num += d * d;
    den += double(y[i]) * double(y[i]);
  }
  const double nmse = den > 0 ? num / den : num;
  EXPECT_LE(nmse, 1e-5) << what << ": NMSE against matmul_ref";
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what,
                      int64_t n_out) {
  EXPECT_TRUE(cuda_test::same_bits(got, want, what, n_out));
}

struct Shape {
  int64_t n_out, n_in;
};

std::vector<Shape> shapes_for(DType t) {
  if (dtype_info(t).block_size == 256) return {{1000, 4096}, {4097, 1280}, {129, 14336}, {37, 256}, {300, 768}};
  return {{1000, 4096}, {4097, 1056}, {129, 14336}, {37, 96}, {300, 4128}};
}

const DType kTypes[] = {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};
const int kCols[] = {9, 16, 17, 33, 63, 64, 100, 128};

TEST(MmqCuda, AgainstTheReferences) {
  POLYKV_REQUIRE_GPU();
  MmqScope scope;
  uint32_t seed = 100;
  for (DType t : kTypes) {
    for (const Shape& s : shapes_for(t)) {
      ++seed;
      const auto w = cuda_test::make_weights(t, s.n_in, s.n_out, seed, seed % 2 == 0);
      const Split d = upload_split(w.m);
      ASSERT_TRUE(cuda::mmq_supports(d.w)) << dtype_name(t);
      const int64_t nmax = 128;
      const auto x = cuda_test::normal_floats(size_t(nmax * s.n_in), seed + 3);
      const auto dx = upload(x);
      const Ref16 ref = reference16(w.m, x, nmax);
      DeviceBuffer y(size_t(nmax * s.n_out) * 4);
      for (const bool wgmma : kernels_for(d.w))
      for (const int n : kCols) {
        cuda::set_mmq_wgmma(wgmma);
        const size_t total = size_t(n * s.n_out);
        poison(y.as<float>(), total);
        cuda::matmul_mmq(d.w, dx->as<float>(), y.as<float>(), n, ctx());
        const auto got = download(y.as<float>(), total);
        const std::string what = describe(w.m, n, kernel_name(wgmma));
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_FALSE(std::isnan(got[i])) << what << ": output " << i << " (column " << i / size_t(s.n_out)
                                           << ", row " << i % size_t(s.n_out) << ") not written";
        expect_near_ref16(got, ref, n, s.n_out, what);
        if (n == 17 || n == 100) {
          const std::vector<float> xn(x.begin(), x.begin() + n * s.n_in);
          expect_nmse_vs_matmul_ref(got, w.m, xn, n, what);
        }
        if (HasFailure()) return;
      }
    }
  }
}

// Column k of a 9-column call = column k of a 64- and a 100-column call over the same x, bit for bit
// (the 9 columns are placed at 55..63 of the wider calls), for the automatic and forced K splits.
TEST(MmqCuda, BatchInvariant) {
  POLYKV_REQUIRE_GPU();
  MmqScope scope;
  uint32_t seed = 200;
  for (DType t : kTypes) {
    const int64_t n_in = dtype_info(t).block_size == 256 ? 4352 : 4128, n_out = 1000;
    const auto w = cuda_test::make_weights(t, n_in, n_out, ++seed, true);
    const Split d = upload_split(w.m);
    const auto x = cuda_test::normal_floats(size_t(100 * n_in), seed + 1);
    const auto dx = upload(x);
    for (const bool wgmma : kernels_for(d.w))
    for (const int splits : {0, 1, 3, 16}) {
      cuda::set_mmq(true, 0, 0, splits);
      cuda::set_mmq_wgmma(wgmma);
      DeviceBuffer y9(size_t(9 * n_out) * 4), y64(size_t(64 * n_out) * 4), y100(size_t(100 * n_out) * 4);
      cuda::matmul_mmq(d.w, dx->as<float>() + 55 * n_in, y9.as<float>(), 9, ctx());
      cuda::matmul_mmq(d.w, dx->as<float>(), y64.as<float>(), 64, ctx());
      cuda::matmul_mmq(d.w, dx->as<float>(), y100.as<float>(), 100, ctx());
      const auto a9 = download(y9.as<float>(), size_t(9 * n_out));
      const auto a64 = download(y64.as<float>(), size_t(64 * n_out));
      const auto a100 = download(y100.as<float>(), size_t(100 * n_out));
      const std::vector<float> c64(a64.begin() + 55 * n_out, a64.end());
      const std::vector<float> c100(a100.begin() + 55 * n_out, a100.begin() + 64 * n_out);
      const std::string tag = std::string(" (") + kernel_name(wgmma) + ", splits " + std::to_string(splits) + ")";
      expect_same_bits(a9, c64, describe(w.m, 9, "columns 55..63 alone vs in 64 columns" + tag), n_out);
      expect_same_bits(a9, c100, describe(w.m, 9, "columns 55..63 alone vs in 100 columns" + tag), n_out);
      // One column alone in a 9-column call of copies of another column: still the same bits.
      std::vector<float> xs(size_t(9 * n_in));
      for (int c = 0; c < 9; ++c)
        std::copy_n(x.begin() + (c == 4 ? 60 : 3) * n_in, n_in, xs.begin() + c * n_in);
      const auto dxs = upload(xs);
      cuda::matmul_mmq(d.w, dxs->as<float>(), y9.as<float>(), 9, ctx());
      const auto b9 = download(y9.as<float>(), size_t(9 * n_out));
      expect_same_bits(std::vector<float>(b9.begin() + 4 * n_out, b9.begin() + 5 * n_out),
                       std::vector<float>(a64.begin() + 60 * n_out, a64.begin() + 61 * n_out),
                       describe(w.m, 9, "column 60 among other columns vs in 64 columns" + tag), n_out);
      if (HasFailure()) return;
    }
  }
}

// matmul() and matmul_parts() route 9..max columns of split weights to it (same bits), not when off.
TEST(MmqCuda, Routing) {
  POLYKV_REQUIRE_GPU();
  MmqScope scope;
  cuda::set_mmq(true, 9, 128, 0);
  const int64_t n_in = 2048;
  const auto wq = cuda_test::make_weights(DType::Q4_0, n_in, 300, 301, true);
  const auto wk = cuda_test::make_weights(DType::Q4_0, n_in, 77, 302, true);
  const Split dq = upload_split(wq.m), dk = upload_split(wk.m);
  const auto x = cuda_test::normal_floats(size_t(130 * n_in), 303);
  const auto dx = upload(x);
  DeviceBuffer ya(size_t(130 * 300) * 4), yb(size_t(130 * 300) * 4), yk(size_t(130 * 77) * 4);
  for (int n : {8, 9, 33, 128, 129}) {
    cuda::matmul(dq.w, dx->as<float>(), ya.as<float>(), n, ctx());
    cuda::matmul_mmq(dq.w, dx->as<float>(), yb.as<float>(), n, ctx());
    const auto a = download(ya.as<float>(), size_t(n * 300)), b = download(yb.as<float>(), size_t(n * 300));
    const bool same = std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
    EXPECT_EQ(same, n >= 9 && n <= 128) << "matmul() with " << n << " columns "
                                        << (same ? "took" : "did not take") << " the mmq path";
    // matmul_parts shares one f16 x among the parts.
    const cuda::MatvecPart parts[] = {{&dq.w, ya.as<float>()}, {&dk.w, yk.as<float>()}};
    cuda::matmul_parts(parts, dx->as<float>(), n, ctx());
    cuda::matmul(dq.w, dx->as<float>(), yb.as<float>(), n, ctx());
    expect_same_bits(download(ya.as<float>(), size_t(n * 300)), download(yb.as<float>(), size_t(n * 300)),
                     describe(dq.w, n, "matmul_parts part 0 vs matmul"), 300);
    cuda::matmul(dk.w, dx->as<float>(), yb.as<float>(), n, ctx());
    expect_same_bits(download(yk.as<float>(), size_t(n * 77)), download(yb.as<float>(), size_t(n * 77)),
                     describe(dk.w, n, "matmul_parts part 1 vs matmul"), 77);
  }
  cuda::set_mmq(false);
  EXPECT_FALSE(cuda::mmq_takes(dq.w, 64));
  cuda::matmul(dq.w, dx->as<float>(), ya.as<float>(), 64, ctx());
  cuda::matmul_mmq(dq.w, dx->as<float>(), yb.as<float>(), 64, ctx());
  const auto a = download(ya.as<float>(), size_t(64 * 300)), b = download(yb.as<float>(), size_t(64 * 300));
  EXPECT_NE(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "switched off, matmul() still took the mmq path";
}

// The wgmma kernel against the mma.sync kernel on the same f16 operands: both sum exact products in f32,
// in other orders, so they agree to a few f32 roundings of the sum of |products| (the bound of
// AgainstTheReferences); prints whether they are bit-identical. Also matmul_parts over parts of two
// types (q4_K and q6_K: two permutations of x) equals matmul() per part.
TEST(MmqCuda, WgmmaAgainstMmaSync) {
  POLYKV_REQUIRE_GPU();
  MmqScope scope;
  uint32_t seed = 400;
  for (DType t : kTypes) {
    const int64_t n_in = dtype_info(t).block_size == 256 ? 4352 : 4128, n_out = 777;
    const auto w = cuda_test::make_weights(t, n_in, n_out, ++seed, true);
    const Split d = upload_split(w.m);
    if (kernels_for(d.w).size() < 2) GTEST_SKIP() << "no wgmma kernel on this device or build";
    const auto x = cuda_test::normal_floats(size_t(64 * n_in), seed + 1);
    const auto dx = upload(x);
    const Ref16 ref = reference16(w.m, x, 64);
    DeviceBuffer ya(size_t(64 * n_out) * 4), yb(size_t(64 * n_out) * 4);
    for (const int n : {9, 24, 64}) {
      cuda::set_mmq_wgmma(false);
      cuda::matmul_mmq(d.w, dx->as<float>(), ya.as<float>(), n, ctx());
      cuda::set_mmq_wgmma(true);
      cuda::matmul_mmq(d.w, dx->as<float>(), yb.as<float>(), n, ctx());
      const auto a = download(ya.as<float>(), size_t(n * n_out)), b = download(yb.as<float>(), size_t(n * n_out));
      expect_near_ref16(b, ref, n, n_out, describe(w.m, n, "wgmma"));
      size_t differ = 0;
      double worst = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        differ += a[i] != b[i];
        worst = std::max(worst, double(std::fabs(a[i] - b[i])));
      }
      std::printf("%s n=%d: wgmma vs mma.sync: %zu of %zu outputs differ, max |diff| %.3g\n", dtype_name(t), n, differ,
                  a.size(), worst);
      if (HasFailure()) return;
    }
  }
  // Parts of two types in one matmul_parts call.
  const int64_t n_in = 2048;
  const auto wk = cuda_test::make_weights(DType::Q4_K, n_in, 300, 501, true);
  const auto wv = cuda_test::make_weights(DType::Q6_K, n_in, 200, 502, true);
  const Split dk = upload_split(wk.m), dv = upload_split(wv.m);
  const auto x = cuda_test::normal_floats(size_t(40 * n_in), 503);
  const auto dx = upload(x);
  DeviceBuffer yk(size_t(40 * 300) * 4), yv(size_t(40 * 200) * 4), y1(size_t(40 * 300) * 4);
  const cuda::MatvecPart parts[] = {{&dk.w, yk.as<float>()}, {&dv.w, yv.as<float>()}, {&dk.w, y1.as<float>()}};
  cuda::matmul_parts(parts, dx->as<float>(), 40, ctx());
  DeviceBuffer yr(size_t(40 * 300) * 4);
  cuda::matmul(dk.w, dx->as<float>(), yr.as<float>(), 40, ctx());
  expect_same_bits(download(yk.as<float>(), size_t(40 * 300)), download(yr.as<float>(), size_t(40 * 300)),
                   describe(dk.w, 40, "matmul_parts q4_K part vs matmul"), 300);
  expect_same_bits(download(y1.as<float>(), size_t(40 * 300)), download(yr.as<float>(), size_t(40 * 300)),
                   describe(dk.w, 40, "matmul_parts third part (q4_K after q6_K) vs matmul"), 300);
  cuda::matmul(dv.w, dx->as<float>(), yr.as<float>(), 40, ctx());
  expect_same_bits(download(yv.as<float>(), size_t(40 * 200)), download(yr.as<float>(), size_t(40 * 200)),
                   describe(dv.w, 40, "matmul_parts q6_K part vs matmul"), 200);
}

// ---- benchmark ----

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

// llama-3.1-8b's matrices as the decoder multiplies them (matmul_parts launches q, k, v and gate, up one
// by one): q/o 4096x4096, k/v 1024x4096, gate/up 14336x4096, down 4096x14336, at 16, 32, 64 and 128
// columns, for q4_0, q8_0, q4_K and q6_K: matmul() with mmq off (the old path: chunked mat-vec up to 32
// columns, dequantize + cuBLAS above) and on (the mmq kernel), interleaved, each over enough copies of the
// matrix (>= 256 MiB) that L2 holds none. GB/s = weight bytes / time; %fl = that / the copy bandwidth
// (read + write). Then per layer (2 q/o + 2 k/v + 2 gate/up + down) and its floor (weight bytes / copy
// bandwidth). POLYKV_MMQ_BENCH_TYPES=q4_0,q6_K limits the types; scripts/mmq_bench_json.py makes JSON.
TEST(CudaMmqBench, DISABLED_VsOldPath) {
  POLYKV_REQUIRE_GPU();
  MmqScope scope;
  double copy = 0;
  {
    const size_t n = size_t(1) << 30;
    DeviceBuffer a(n), b(n);
    copy = 2.0 * double(n) / median_per_call([&](int) {
      POLYKV_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, n, cudaMemcpyDeviceToDevice, ctx().stream()));
    }, 1, 7);
  }
  std::printf("device-to-device copy: %.0f GB/s (read + write); mmq splits %s\n", copy * 1e-9,
              std::getenv("POLYKV_CUDA_MMQ_SPLITS") ? std::getenv("POLYKV_CUDA_MMQ_SPLITS") : "auto");
  std::printf("%-5s %-8s %6s %6s %4s %9s %9s %9s %9s %6s %7s %7s\n", "type", "matrix", "n_out", "n_in", "n", "old_us",
              "mmq_us", "wgmma_us", "best_GB/s", "best%fl", "old/bst", "mma/wg");
  struct BenchShape {
    const char* name;
    int64_t n_out, n_in;
    int per_layer;
  };
  const BenchShape shapes[] = {
      {"q/o", 4096, 4096, 2}, {"k/v", 1024, 4096, 2}, {"gate/up", 14336, 4096, 2}, {"down", 4096, 14336, 1}};
  const int kNs[] = {16, 32, 64, 128};
  const char* only = std::getenv("POLYKV_MMQ_BENCH_TYPES");
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    if (only && !std::strstr(only, dtype_name(t))) continue;
    double layer[4][3] = {};  // [n][path: old, mmq mma.sync, mmq wgmma] us
    double layer_bytes = 0;
    for (const BenchShape& sh : shapes) {
      const size_t stride = cuda::split_row_stride(t, sh.n_in);
      const size_t bytes = stride * size_t(sh.n_out);
      layer_bytes += double(bytes) * sh.per_layer;
      const int copies = int(std::max<size_t>(2, ((size_t(256) << 20) + bytes - 1) / bytes));
      std::vector<std::unique_ptr<DeviceBuffer>> bufs;
      std::vector<WeightMatrix> ws;
      for (int c = 0; c < copies; ++c) {
        bufs.push_back(std::make_unique<DeviceBuffer>(bytes));
        POLYKV_CUDA_CHECK(cudaMemset(bufs.back()->p, 0x11, bytes));  // every f16 scale 5.6e-4
        WeightMatrix w;
        w.type = t;
        w.n_in = sh.n_in;
        w.n_out = sh.n_out;
        w.row_stride = stride;
        w.layout = WeightLayout::CudaSplit;
        w.data = bufs.back()->p;
        ws.push_back(w);
      }
      const auto x = cuda_test::normal_floats(size_t(128 * sh.n_in), 2);
      const auto dx = upload(x);
      DeviceBuffer y(size_t(128 * sh.n_out) * 4);
      for (int ni = 0; ni < 4; ++ni) {
        const int n = kNs[ni];
        double us[3] = {};  // 0: the old path; 1: mmq, mma.sync kernel; 2: mmq, wgmma kernel (where it runs)
        for (int k = 0; k < 3; ++k) {
          cuda::set_mmq(k > 0, 1, 1 << 20, 0);
          cuda::set_mmq_wgmma(k == 2);
          if (k == 2 && !cuda::mmq_wgmma_takes(ws[0], ctx())) break;
          us[k] = 1e6 * median_per_call([&](int i) {
            cuda::matmul(ws[size_t(i % copies)], dx->as<float>(), y.as<float>(), n, ctx());
          }, copies);
          layer[ni][k] += us[k] * sh.per_layer;
        }
        const int best = us[2] > 0 ? 2 : 1;
        const double gb = double(bytes) / us[best] * 1e-3;
        std::printf("%-5s %-8s %6lld %6lld %4d %9.1f %9.1f %9.1f %9.0f %5.1f%% %7.2f %7.2f\n", dtype_name(t), sh.name,
                    (long long)sh.n_out, (long long)sh.n_in, n, us[0], us[1], us[2], gb, 100.0 * gb * 1e9 / copy,
                    us[0] / us[best], us[2] > 0 ? us[1] / us[2] : 0.0);
        std::fflush(stdout);
      }
    }
    for (int ni = 0; ni < 4; ++ni)
      std::printf("%-5s LAYER n=%-4d old %8.1f us  mmq %8.1f us  wgmma %8.1f us  floor %6.1f us  (mma.sync / wgmma %.2fx)\n",
                  dtype_name(t), kNs[ni], layer[ni][0], layer[ni][1], layer[ni][2], 1e6 * layer_bytes / copy,
                  layer[ni][2] > 0 ? layer[ni][1] / layer[ni][2] : 0.0);
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace polykv
