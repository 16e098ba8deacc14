// GPU tests of cuda::kv_store (backend/cuda/kv_cuda.h): rows scattered into a device pool laid out as
// kv/kv_block_store.h, compared byte for byte with the CPU's kv_type_ops(type).quantize_head written
// through a host KvBlockStore of the same shape (so the addressing is the store's own), every K and V
// type, head sizes 32..512, 1 and 4 KV heads; untouched bytes must keep their poison. Also: padding
// slots (-1) write nothing, capture in a CUDA graph, and the speed of a 4096-row prefill.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_cuda.h"
#include "cuda_test_util.h"
#include "kv/kv_block_store.h"
#include "kv/kv_type.h"

namespace polykv::cuda {
namespace {

constexpr uint8_t kPoison = 0xA5;

class DeviceKvMemory final : public KvMemory {
 public:
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    return cudaMalloc(&p, bytes) == cudaSuccess ? p : nullptr;
  }
  void release(void* p) override { cudaFree(p); }
  void copy(void* dst, const void* src, size_t bytes) override {
    POLYKV_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
  }
  bool host_accessible() const override { return false; }
  const char* name() const override { return "cuda test"; }
};

template <class T>
struct DeviceArray {
  T* p = nullptr;
  explicit DeviceArray(const std::vector<T>& h) {
    POLYKV_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, h.size()) * sizeof(T)));
    if (!h.empty()) cuda_test::h2d(p, h.data(), h.size() * sizeof(T));
  }
  ~DeviceArray() { cudaFree(p); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

// Rows of several kinds by (row, head): gaussian, loud outlier channels, all zero, tiny, huge, a zero
// first group, rounding ties of q8_0/q4_0 (d = 1: x * id is exact and lands on k + 0.5), subnormal
// values (the GPU must not flush them), one-hot (equal rotated magnitudes: trellis cost ties).
std::vector<float> make_rows(int n, int n_head, int hd, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::vector<float> x(size_t(n) * size_t(n_head) * size_t(hd));
  for (int rh = 0; rh < n * n_head; ++rh) {
    float* r = x.data() + size_t(rh) * size_t(hd);
    for (int i = 0; i < hd; ++i) r[i] = nd(rng);
    switch (rh % 9) {
      case 1: for (int k = 0; k < 3; ++k) r[rng() % unsigned(hd)] *= 150.0f; break;
      case 2: std::fill(r, r + hd, 0.0f); break;
      case 3: for (int i = 0; i < hd; ++i) r[i] *= 1e-20f; break;
      case 4: for (int i = 0; i < hd; ++i) r[i] *= 2e4f; break;
      case 5: std::fill(r, r + std::min(hd, 128), 0.0f); break;
      case 6:
        for (int i = 0; i < hd; ++i)
          r[i] = i % 32 == 0 ? ((i / 32) % 2 ? 127.0f : -8.0f) : float(int(r[i] * 20.0f)) + 0.5f;
        break;
      case 7: for (int i = 0; i < hd; ++i) r[i] *= 1e-41f; break;
      case 8: {
        const float a = r[0];
        std::fill(r, r + hd, 0.0f);
        r[rng() % unsigned(hd)] = a;
        break;
      }
      default: break;
    }
  }
  return x;
}

struct Case {
  KvType k, v;
  int head_dim, head_dim_v, n_head;
};
std::string describe(const Case& c) {
  std::ostringstream s;
  s << "K " << kv_type_name(c.k) << " V " << kv_type_name(c.v) << " head_dim " << c.head_dim << "/" << c.head_dim_v
    << " n_head_kv " << c.n_head;
  return s.str();
}

// The device view of one layer of a store (kv_cuda.h's addressing).
KvLayerDevice layer_of(const KvBlockStore& s, int layer) {
  KvLayerDevice L;
  L.k_type = s.k_type();
  L.v_type = s.v_type();
  L.block_tokens = s.block_tokens();
  L.n_head_kv = s.shape().n_head_kv;
  L.head_dim = s.shape().head_dim;
  L.head_dim_v = s.shape().head_dim_v;
  L.k_head_bytes = s.k_head_bytes();
  L.v_head_bytes = s.v_head_bytes();
  L.layer_base = const_cast<uint8_t*>(s.data()) + size_t(layer) * s.layer_bytes();
  L.block_stride = s.block_bytes();
  L.v_offset = s.k_part_bytes();
  return L;
}

bool fits(KvType t, int hd) {
  try {
    check_kv_head_dim(t, hd);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// The (row, head) of a byte of the pool, for messages.
std::string locate(const KvBlockStore& s, size_t byte) {
  const size_t block = byte / s.block_bytes(), in_block = byte % s.block_bytes();
  const size_t layer = in_block / s.layer_bytes(), in_layer = in_block % s.layer_bytes();
  const bool is_v = in_layer >= s.k_part_bytes();
  const size_t head_bytes = is_v ? s.v_head_bytes() : s.k_head_bytes();
  const size_t in_part = is_v ? in_layer - s.k_part_bytes() : in_layer;
  const size_t row = in_part / head_bytes;
  std::ostringstream o;
  o << "block " << block << " layer " << layer << (is_v ? " V" : " K") << " head " << row / size_t(s.block_tokens())
    << " slot-in-block " << row % size_t(s.block_tokens()) << " byte " << in_part % head_bytes << " of " << head_bytes;
  return o.str();
}

// Stores n_rows rows (plus a padding row when n_rows > 2) into layer 1 of a device pool and compares
// the whole pool with the CPU's encoding. Returns false (with a failure) if any byte differs.
bool check_case(const Case& c, uint32_t seed, int n_rows = 37) {
  SCOPED_TRACE(describe(c) + " seed " + std::to_string(seed));
  const int n_blocks = 5, block_tokens = 16, layer = 1;
  KvShape shape;
  shape.n_layer = 2;
  shape.n_head_kv = c.n_head;
  shape.head_dim = c.head_dim;
  shape.head_dim_v = c.head_dim_v;
  DeviceKvMemory devmem;
  KvBlockStore dev(shape, c.k, c.v, n_blocks, block_tokens, devmem);
  KvBlockStore want(shape, c.k, c.v, n_blocks, block_tokens);  // host: the expected bytes
  const size_t pool_bytes = dev.block_bytes() * size_t(n_blocks);
  POLYKV_CUDA_CHECK(cudaMemset(const_cast<uint8_t*>(dev.data()), kPoison, pool_bytes));
  std::memset(want.k_part(0, 0), kPoison, pool_bytes);

  // n_rows rows to random distinct slots out of 80, and one padding row (slot -1) in the middle.
  std::mt19937 rng(seed);
  std::vector<int32_t> all(size_t(n_blocks * block_tokens));
  for (size_t i = 0; i < all.size(); ++i) all[i] = int32_t(i);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int32_t> slots(all.begin(), all.begin() + n_rows);
  if (n_rows > 2) slots.insert(slots.begin() + n_rows / 2, -1);
  const int n = int(slots.size());
  const std::vector<float> k = make_rows(n, c.n_head, c.head_dim, rng), v = make_rows(n, c.n_head, c.head_dim_v, rng);

  const KvTypeOps &kops = kv_type_ops(c.k), &vops = kv_type_ops(c.v);
  for (int r = 0; r < n; ++r) {
    if (slots[size_t(r)] < 0) continue;
    const int b = slots[size_t(r)] / block_tokens, i = slots[size_t(r)] % block_tokens;
    for (int g = 0; g < c.n_head; ++g) {
      kops.quantize_head(k.data() + (size_t(r) * size_t(c.n_head) + size_t(g)) * size_t(c.head_dim),
                         want.k_part(b, layer) + size_t(g * block_tokens + i) * want.k_head_bytes(), c.head_dim);
      vops.quantize_head(v.data() + (size_t(r) * size_t(c.n_head) + size_t(g)) * size_t(c.head_dim_v),
                         want.v_part(b, layer) + size_t(g * block_tokens + i) * want.v_head_bytes(), c.head_dim_v);
    }
  }

  DeviceArray<int32_t> d_slots(slots);
  DeviceArray<float> d_k(k), d_v(v);
  kv_store(layer_of(dev, layer), d_slots.p, n, d_k.p, d_v.p, nullptr);
  POLYKV_CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<uint8_t> got(pool_bytes);
  POLYKV_CUDA_CHECK(cudaMemcpy(got.data(), dev.data(), pool_bytes, cudaMemcpyDeviceToHost));
  const uint8_t* w = want.k_part(0, 0);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < pool_bytes; ++i)
    if (got[i] != w[i] && bad++ == 0) first = i;
  if (bad == 0) return true;
  // Which rows differ (K, V) and whether bytes outside the stored rows changed.
  size_t bad_rows[2] = {0, 0}, bad_outside = 0;
  for (int b = 0; b < n_blocks; ++b)
    for (int l = 0; l < shape.n_layer; ++l)
      for (int part = 0; part < 2; ++part) {
        const size_t hb = part ? want.v_head_bytes() : want.k_head_bytes();
        const size_t start = size_t(part ? want.v_part(b, l) - w : want.k_part(b, l) - w);
        for (int row = 0; row < c.n_head * block_tokens; ++row) {
          const size_t o = start + size_t(row) * hb;
          if (std::memcmp(got.data() + o, w + o, hb) == 0) continue;
          bool stored = false;  // a row that was written (not poison in want)
          for (size_t q = 0; q < hb && !stored; ++q) stored = w[o + q] != kPoison;
          ++(stored ? bad_rows[part] : bad_outside);
        }
      }
  // Decode the first bad row both ways to say how far apart the values are.
  std::ostringstream msg;
  msg << "rows that differ: K " << bad_rows[0] << ", V " << bad_rows[1] << " of " << (n_rows * c.n_head)
      << " stored each; unwritten rows changed: " << bad_outside << "; " << bad << " of " << pool_bytes
      << " bytes differ; first at " << locate(want, first) << ": got 0x" << std::hex
      << int(got[first]) << " want 0x" << int(w[first]) << std::dec
      << (w[first] == kPoison ? " (want is poison: a byte outside every stored row was written)" : "");
  const size_t in_layer = first % dev.block_bytes() % dev.layer_bytes();
  if (w[first] != kPoison) {
    const bool is_v = in_layer >= dev.k_part_bytes();
    const size_t hb = is_v ? dev.v_head_bytes() : dev.k_head_bytes();
    const size_t row_start = first - (is_v ? in_layer - dev.k_part_bytes() : in_layer) % hb;
    const int hd = is_v ? c.head_dim_v : c.head_dim;
    std::vector<float> dg(static_cast<size_t>(hd)), dw(static_cast<size_t>(hd));
    (is_v ? vops : kops).dequantize_head(got.data() + row_start, dg.data(), hd);
    (is_v ? vops : kops).dequantize_head(w + row_start, dw.data(), hd);
    double err = 0, ref = 0, max_diff = 0;
    for (int i = 0; i < hd; ++i) {
      const double d = double(dg[size_t(i)]) - dw[size_t(i)];
      err += d * d, ref += double(dw[size_t(i)]) * dw[size_t(i)], max_diff = std::max(max_diff, std::fabs(d));
    }
    msg << "; that row decoded: max |diff| " << max_diff << ", NMSE " << (ref > 0 ? err / ref : err);
  }
  ADD_FAILURE() << msg.str();
  return false;
}

TEST(CudaKvStore, EveryTypeMatchesQuantizeHeadBytes) {
  POLYKV_REQUIRE_GPU();
  const uint32_t seed0 = std::random_device{}();
  std::printf("seed %u\n", seed0);
  const int n_types = int(std::size(kAllKvTypes));
  int cases = 0, failed = 0;
  auto run = [&](const Case& c, uint32_t seed, int n_rows) {
    ++cases;
    if (!check_case(c, seed, n_rows)) ++failed;
    return failed < 12;  // enough to see the pattern
  };
  for (int ti = 0; ti < n_types; ++ti) {
    const KvType kt = kAllKvTypes[ti];
    for (int shift : {0, 4}) {  // each type meets several partners, as K and as V
      const KvType vt = kAllKvTypes[(ti + 3 + shift) % n_types];
      for (int hd : {32, 64, 128, 256, 512})
        for (int n_head : {1, 4}) {
          if (!fits(kt, hd) || !fits(vt, hd)) continue;
          if (!run({kt, vt, hd, hd, n_head}, seed0 + uint32_t(cases), 37)) return;
          if (!run({vt, kt, hd, hd, n_head}, seed0 + uint32_t(cases), 37)) return;
        }
    }
    // One row (a decode step), and different K and V head sizes.
    if (!run({kt, kt, 128, 128, 4}, seed0 + uint32_t(cases), 1)) return;
    if (!run({kt, KvType::Turbo3, 128, 64, 4}, seed0 + uint32_t(cases), 37)) return;
  }
  EXPECT_GT(cases, 400);
  std::printf("%d cases, %d failed\n", cases, failed);
}

TEST(CudaKvStore, CapturedInAGraphGivesTheSameBytes) {
  POLYKV_REQUIRE_GPU();
  KvShape shape;
  shape.n_layer = 1;
  shape.n_head_kv = 2;
  shape.head_dim = 128;
  shape.head_dim_v = 128;
  DeviceKvMemory devmem;
  KvBlockStore a(shape, KvType::Q8_0, KvType::Turbo3T, 4, 16, devmem);
  KvBlockStore b(shape, KvType::Q8_0, KvType::Turbo3T, 4, 16, devmem);
  const size_t bytes = a.block_bytes() * 4;
  POLYKV_CUDA_CHECK(cudaMemset(const_cast<uint8_t*>(a.data()), 0, bytes));
  POLYKV_CUDA_CHECK(cudaMemset(const_cast<uint8_t*>(b.data()), 0, bytes));
  std::mt19937 rng(1);
  const std::vector<int32_t> slots = {3, 17, 40, 63, 5};
  const std::vector<float> k = make_rows(5, 2, 128, rng), v = make_rows(5, 2, 128, rng);
  DeviceArray<int32_t> d_slots(slots);
  DeviceArray<float> d_k(k), d_v(v);
  cudaStream_t stream;
  POLYKV_CUDA_CHECK(cudaStreamCreate(&stream));
  kv_store(layer_of(a, 0), d_slots.p, 5, d_k.p, d_v.p, stream);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  POLYKV_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  kv_store(layer_of(b, 0), d_slots.p, 5, d_k.p, d_v.p, stream);
  POLYKV_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  POLYKV_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  POLYKV_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  POLYKV_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<uint8_t> ha(bytes), hb(bytes);
  POLYKV_CUDA_CHECK(cudaMemcpy(ha.data(), a.data(), bytes, cudaMemcpyDeviceToHost));
  POLYKV_CUDA_CHECK(cudaMemcpy(hb.data(), b.data(), bytes, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(ha == hb);
  EXPECT_TRUE(std::any_of(ha.begin(), ha.end(), [](uint8_t x) { return x != 0; }));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// A prefill of 4096 rows x 8 KV heads x head_dim 128 per type (K and V of that type): GPU time per
// row against the CPU reference's (one thread). Prints a table; fails only if a row costs over 2 us.
TEST(CudaKvStore, PrefillSpeed) {
  POLYKV_REQUIRE_GPU();
  const int n = 4096, n_head = 8, hd = 128, block_tokens = 16;
  KvShape shape;
  shape.n_layer = 1;
  shape.n_head_kv = n_head;
  shape.head_dim = hd;
  shape.head_dim_v = hd;
  std::mt19937 rng(2);
  const std::vector<float> k = make_rows(n, n_head, hd, rng), v = make_rows(n, n_head, hd, rng);
  std::vector<int32_t> slots(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) slots[size_t(i)] = i;
  DeviceArray<int32_t> d_slots(slots);
  DeviceArray<float> d_k(k), d_v(v);
  cudaEvent_t e0, e1;
  POLYKV_CUDA_CHECK(cudaEventCreate(&e0));
  POLYKV_CUDA_CHECK(cudaEventCreate(&e1));
  std::printf("%-8s %14s %14s %14s\n", "type", "GPU ns/row", "GPU us/launch", "CPU ns/row");
  for (KvType t : kAllKvTypes) {
    DeviceKvMemory devmem;
    KvBlockStore s(shape, t, t, n / block_tokens, block_tokens, devmem);
    const KvLayerDevice L = layer_of(s, 0);
    kv_store(L, d_slots.p, n, d_k.p, d_v.p, nullptr);  // warm up
    const int reps = 5;
    POLYKV_CUDA_CHECK(cudaEventRecord(e0));
    for (int r = 0; r < reps; ++r) kv_store(L, d_slots.p, n, d_k.p, d_v.p, nullptr);
    POLYKV_CUDA_CHECK(cudaEventRecord(e1));
    POLYKV_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    POLYKV_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    const double gpu_ns_row = 1e6 * ms / reps / n;
    // CPU reference: K and V of 256 rows.
    const KvTypeOps& ops = kv_type_ops(t);
    std::vector<uint8_t> out(s.k_head_bytes());
    const int cpu_rows = 256;
    const auto c0 = std::chrono::steady_clock::now();
    for (int r = 0; r < cpu_rows; ++r)
      for (int g = 0; g < n_head; ++g) {
        ops.quantize_head(k.data() + (size_t(r) * n_head + size_t(g)) * hd, out.data(), hd);
        ops.quantize_head(v.data() + (size_t(r) * n_head + size_t(g)) * hd, out.data(), hd);
      }
    const double cpu_ns_row =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - c0).count() / cpu_rows;
    std::printf("%-8s %14.1f %14.1f %14.1f\n", kv_type_name(t), gpu_ns_row, 1e3 * ms / reps, cpu_ns_row);
    EXPECT_LT(gpu_ns_row, 2000.0) << kv_type_name(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

}  // namespace
}  // namespace polykv::cuda
