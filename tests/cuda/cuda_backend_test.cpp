// CudaBackend (backend/cuda/cuda_backend.cpp) through the Backend interface, against CPU references
// called directly (backend/cpu ops, matmul_ref, dequantize_row_ref, attention_ref; not CpuBackend).
//
// CudaStepPlan.*: the host half of begin_step (cuda_backend_plan.h), run without a GPU (CI too).
// CudaBackend.*: on the GPU (skipped without one). Bounds:
//   memory round trips, add, add_bias, gather_rows, KV codes of f16/bf16/q8_0/q4_0: exact bits;
//   rmsnorm: 1 ulp; rope, activations, softcap: as tests/cuda/ops_cuda_test.cpp;
//   embed: 1e-6 relative (dequantize then scale, as the CPU);
//   matmul vs matmul_ref (double): NMSE <= 1e-5 and |err| <= 1e-3 * sum_i |w_i x_i| (prefill may run
//   on reduced-precision tensor cores; what this test guards is the plumbing: a wrong row, type or
//   stride gives NMSE ~ 1);
//   attention vs attention_ref (double, exact query): NMSE <= 1e-6 for f16/bf16/f32 K, <= 1e-4
//   for quantized K (the kernel may quantize the query as the CPU does); a wrong block, layer,
//   slot or row gives NMSE ~ 1.
// CudaBench.DISABLED_CopyBandwidth: the GPU's device-to-device copy bandwidth (scripts/gpu-test.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_plan.h"
#include "backend/cuda/matmul_cuda_split.h"
#include "core/error.h"
#include "kv/kv_block_store.h"
#include "kv/kv_cache.h"
#include "kv/paged_kv.h"
#include "quant/quant.h"
#include "cuda_test_util.h"
#include "ops_cuda_test.h"

namespace polykv {
namespace {

using test::close_to;
using test::gpu_randn;
using test::same_bits;
using test::within_ulps;

// ---- the step plan, on the CPU ------------------------------------------------------------------

// Host bytes that claim to be a device's (host_accessible false), for the plan's checks.
class FakeDeviceMemory final : public KvMemory {
 public:
  void* allocate(size_t bytes) override { return ::operator new(bytes); }
  void release(void* p) override { ::operator delete(p); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  bool host_accessible() const override { return false; }
  const char* name() const override { return "fake:0"; }
};

// A KvSequence with a hand-made table (ids the PagedKv would refuse) and, optionally, K equalization.
class FakeSeq final : public KvSequence {
 public:
  FakeSeq(const KvBlockStore* store, std::vector<BlockId> table, int max_tokens, bool equalize = false)
      : store_(store), table_(std::move(table)), max_tokens_(max_tokens) {
    if (equalize) eq_ = KEqualizer(KEqualizationParams{0.5f, 8.0f, 16}, 1, 1, 64, 64, RopeStyle::Neox);
  }
  int n_tokens() const override { return 0; }
  int max_tokens() const override { return max_tokens_; }
  void store(int, int, int, const float*, const float*, ThreadPool*) override { fail("FakeSeq::store"); }
  void commit(int) override {}
  KvLayerView view(int) const override { fail("FakeSeq::view"); }
  KEqualizer& k_equalizer() override { return eq_; }
  const KvBlockStore* block_store() const override { return store_; }
  std::span<const BlockId> block_table() const override { return table_; }

 private:
  const KvBlockStore* store_;
  std::vector<BlockId> table_;
  int max_tokens_;
  KEqualizer eq_;
};

const KvShape kPlanShape{2, 1, 64, 64, {}};

TEST(CudaStepPlan, SlotsAndTablesLayout) {
  FakeDeviceMemory mem;
  KvBlockStore store(kPlanShape, KvType::F16, KvType::F16, 10, 4, mem);
  // A: positions 0..5 stored, 3 new rows (6, 7, 8) -> blocks 7, 2, 9. B: nothing yet, 2 rows. C: no rows.
  FakeSeq a(&store, {7, 2, 9, 4}, 100), b(&store, {5}, 100), c(&store, {}, 100);
  const StepSeq seqs[] = {{&a, 6, 3, 0}, {&c, 0, 0, 3}, {&b, 0, 2, 3}};
  const cuda::StepPlan plan = cuda::plan_step(seqs, mem);
  EXPECT_EQ(plan.store, &store);
  EXPECT_EQ(plan.n_seq, 2);  // C has no rows
  EXPECT_EQ(plan.total_rows, 5);
  EXPECT_EQ(plan.max_n_q, 3);
  EXPECT_EQ(plan.max_kv, 9);
  // Row r -> block * block_tokens + offset: A's 6, 7 in block 2 (offsets 2, 3), 8 in block 9 (offset 0).
  EXPECT_EQ(plan.slots, (std::vector<int32_t>{2 * 4 + 2, 2 * 4 + 3, 9 * 4 + 0, 5 * 4 + 0, 5 * 4 + 1}));
  // Only the blocks a sequence reads: A needs 3 (9 positions), B 1.
  ASSERT_EQ(plan.tables_len, 4u);
  EXPECT_EQ(plan.tables, (std::vector<int32_t>{/*start*/ 0, 3, /*pos0*/ 6, 0, /*n_q*/ 3, 2, /*row0*/ 0, 3,
                                               /*prefix groups: none*/ 0, 0, 0, 0, 0, 0,
                                               /*tables*/ 7, 2, 9, 5}));
  EXPECT_EQ(plan.table_start_at(), 0u);
  EXPECT_EQ(plan.pos0_at(), 2u);
  EXPECT_EQ(plan.n_q_at(), 4u);
  EXPECT_EQ(plan.row0_at(), 6u);
  EXPECT_EQ(plan.tables_at(), 14u);
  EXPECT_EQ(plan.n_prefix, 0);
}

TEST(CudaStepPlan, SharedPrefixGroups) {
  FakeDeviceMemory mem;
  KvBlockStore store(kPlanShape, KvType::F16, KvType::F16, 20, 4, mem);
  // A, B, C share blocks 3, 8 (then their own); D shares 3 only and its query sits in block 1 (pos0 5),
  // so at most 1 block of it is wholly before its query; E shares nothing; F, G share block 11.
  FakeSeq a(&store, {3, 8, 1}, 100), b(&store, {3, 8, 2}, 100), c(&store, {3, 8, 4, 6}, 100), d(&store, {3, 8}, 100),
      e(&store, {0, 5}, 100), f(&store, {11, 12}, 100), g(&store, {11, 13}, 100);
  const StepSeq seqs[] = {{&a, 9, 1, 0}, {&b, 10, 1, 1}, {&c, 13, 2, 2}, {&e, 6, 1, 4},
                          {&f, 5, 1, 5}, {&g, 4, 1, 6}, {&d, 5, 1, 7}};
  const cuda::StepPlan plan = cuda::plan_step(seqs, mem);
  ASSERT_EQ(plan.n_prefix, 2);
  const auto at = [&](size_t off, int i) { return plan.tables[off + size_t(i)]; };
  // Group 0: A, B, C over 2 blocks; group 1: F, G over block 11.
  EXPECT_EQ(at(plan.prefix_seq0_at(), 0), 0);
  EXPECT_EQ(at(plan.prefix_n_seq_at(), 0), 3);
  EXPECT_EQ(at(plan.prefix_blocks_at(), 0), 2);
  EXPECT_EQ(at(plan.prefix_seq0_at(), 1), 4);
  EXPECT_EQ(at(plan.prefix_n_seq_at(), 1), 2);
  EXPECT_EQ(at(plan.prefix_blocks_at(), 1), 1);
  EXPECT_EQ(plan.max_prefix_q, 4);   // A 1 + B 1 + C 2
  EXPECT_EQ(plan.max_prefix_kv, 8);  // 2 blocks of 4
}

TEST(CudaStepPlan, EmptyStep) {
  FakeDeviceMemory mem;
  const cuda::StepPlan plan = cuda::plan_step({}, mem);
  EXPECT_EQ(plan.total_rows, 0);
  EXPECT_EQ(plan.n_seq, 0);
  EXPECT_EQ(plan.store, nullptr);
}

// The Error's message, or "" if none was thrown.
std::string error_of(std::span<const StepSeq> seqs, const KvMemory& mem) {
  try {
    (void)cuda::plan_step(seqs, mem);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CudaStepPlan, RefusesWhatTheKernelsCannotAddress) {
  FakeDeviceMemory mem, other_mem;
  KvBlockStore store(kPlanShape, KvType::F16, KvType::F16, 10, 4, mem);
  KvBlockStore other(kPlanShape, KvType::F16, KvType::F16, 10, 4, mem);
  KvBlockStore host(kPlanShape, KvType::F16, KvType::F16, 10, 4);  // host memory
  FakeSeq ok(&store, {1, 2}, 100);

  KvCache private_kv(kPlanShape, KvType::F16, KvType::F16, 64);
  const StepSeq priv[] = {{&private_kv, 0, 1, 0}};
  EXPECT_NE(error_of(priv, mem).find("needs a KV pool in GPU memory"), std::string::npos) << error_of(priv, mem);
  EXPECT_NE(error_of(priv, mem).find("a private cache"), std::string::npos);

  PagedKv in_host(host, 100);
  const StepSeq host_seq[] = {{&in_host, 0, 1, 0}};
  EXPECT_NE(error_of(host_seq, mem).find("needs a KV pool in GPU memory (fake:0); its KV is a pool in host memory"),
            std::string::npos)
      << error_of(host_seq, mem);
  const StepSeq wrong_mem[] = {{&ok, 0, 1, 0}};
  EXPECT_NE(error_of(wrong_mem, other_mem).find("needs a KV pool in GPU memory"), std::string::npos);

  FakeSeq eq(&store, {1, 2}, 100, /*equalize=*/true);
  const StepSeq eq_seq[] = {{&eq, 0, 1, 0}};
  EXPECT_NE(error_of(eq_seq, mem).find("K equalization"), std::string::npos) << error_of(eq_seq, mem);

  FakeSeq in_other(&other, {1}, 100);
  const StepSeq two_pools[] = {{&ok, 0, 1, 0}, {&in_other, 0, 1, 1}};
  EXPECT_NE(error_of(two_pools, mem).find("another KV pool"), std::string::npos) << error_of(two_pools, mem);

  const StepSeq gap[] = {{&ok, 0, 1, 0}, {&ok, 0, 1, 2}};
  EXPECT_NE(error_of(gap, mem).find("starts at row 2, expected 1"), std::string::npos) << error_of(gap, mem);

  const StepSeq short_table[] = {{&ok, 6, 3, 0}};  // 9 positions need 3 blocks of 4; the table has 2
  EXPECT_NE(error_of(short_table, mem).find("has 2 blocks for 9 positions"), std::string::npos)
      << error_of(short_table, mem);

  FakeSeq bad_id(&store, {1, 10}, 100);  // the store has blocks 0..9
  const StepSeq bad[] = {{&bad_id, 4, 1, 0}};
  EXPECT_NE(error_of(bad, mem).find("block id 10 out of range"), std::string::npos) << error_of(bad, mem);

  FakeSeq small(&store, {1, 2}, 5);
  const StepSeq full[] = {{&small, 4, 2, 0}};
  EXPECT_NE(error_of(full, mem).find("context full"), std::string::npos) << error_of(full, mem);

  const StepSeq negative[] = {{&ok, -1, 1, 0}};
  EXPECT_NE(error_of(negative, mem), "");
  const StepSeq no_kv[] = {{nullptr, 0, 1, 0}};
  EXPECT_NE(error_of(no_kv, mem).find("has no KV"), std::string::npos);
}

// ---- the backend on the GPU ---------------------------------------------------------------------

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU visible";
    be = make_cuda_backend(0);
  }

  // Device copy of host values (freed at the end of the test).
  template <typename T>
  T* dev(const std::vector<T>& host) {
    void* p = be->allocate(std::max<size_t>(1, host.size()) * sizeof(T));
    held.push_back(p);
    be->upload(p, host.data(), host.size() * sizeof(T));
    return static_cast<T*>(p);
  }
  // n poisoned floats (NaN) in device memory.
  float* dev_poisoned(size_t n) { return dev(std::vector<float>(n, std::nanf(""))); }
  template <typename T>
  std::vector<T> host(const T* p, size_t n) {
    std::vector<T> v(n);
    be->download(v.data(), p, n * sizeof(T));
    return v;
  }
  void TearDown() override {
    if (be)
      for (void* p : held) be->release(p);
  }

  std::unique_ptr<Backend> be;
  std::vector<void*> held;
};

TEST_F(CudaBackendTest, DescribesItself) {
  EXPECT_EQ(be->kind(), DeviceKind::Cuda);
  const std::string d = be->describe();
  EXPECT_EQ(d.rfind("cuda:0 ", 0), 0u) << d;
  EXPECT_NE(d.find("(sm_"), std::string::npos) << d;
  EXPECT_NE(d.find(" GiB)"), std::string::npos) << d;
  std::printf("describe(): %s\n", d.c_str());
  EXPECT_STREQ(be->kv_memory().name(), "cuda:0");
  EXPECT_FALSE(be->kv_memory().host_accessible());
  EXPECT_GE(cuda_device_count(), 1);
  EXPECT_THROW(make_cuda_backend(cuda_device_count()), Error);
  EXPECT_THROW(make_cuda_backend(-1), Error);
}

// bench's floors divide by this when no --bandwidth is given: a device-to-device copy's bytes read + written per
// second, which for any GPU polykv builds for lies between 100 GB/s and 100 TB/s (0 would mean the probe failed).
TEST_F(CudaBackendTest, MeasuresItsCopyBandwidth) {
  const double bw = be->measure_bandwidth();
  std::printf("measure_bandwidth(): %.1f GB/s\n", bw * 1e-9);
  EXPECT_GT(bw, 1e11);
  EXPECT_LT(bw, 1e14);
}

TEST_F(CudaBackendTest, MemoryRoundTrips) {
  const auto x = gpu_randn(1000003, 1);
  float* d = dev(x);
  EXPECT_TRUE(same_bits(host(d, x.size()), x, "upload then download"));
  EXPECT_EQ(be->allocate(0), nullptr);
  be->release(nullptr);
  // More than any GPU has: an Error naming the size, not a crash; the backend stays usable.
  EXPECT_THROW(be->allocate(size_t(1) << 52), Error);
  EXPECT_TRUE(same_bits(host(d, x.size()), x, "after a refused allocation"));
  // The KV memory: allocate, device-to-device copy (a copy-on-write block copy), release.
  KvMemory& m = be->kv_memory();
  void* a = m.allocate(4096);
  void* b = m.allocate(4096);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  be->upload(a, x.data(), 4096);
  m.copy(b, a, 4096);
  std::vector<float> back(1024);
  be->download(back.data(), b, 4096);
  EXPECT_TRUE(same_bits(back, std::vector<float>(x.begin(), x.begin() + 1024), "kv_memory copy"));
  EXPECT_EQ(m.allocate(size_t(1) << 52), nullptr);
  m.release(a);
  m.release(b);
  // upload_floats: a device copy the backend owns.
  const float* f = be->upload_floats(std::span(x).subspan(0, 77));
  EXPECT_TRUE(same_bits(host(f, 77), std::vector<float>(x.begin(), x.begin() + 77), "upload_floats"));
}

TEST_F(CudaBackendTest, ElementwiseOpsMatchCpu) {
  const int rows = 19, cols = 4101;
  const size_t n = size_t(rows) * cols;
  const auto x = gpu_randn(n, 2, 2.0f), y = gpu_randn(n, 3, 2.0f), w = gpu_randn(size_t(cols), 4);
  const float* dw = be->upload_floats(w);

  {  // rmsnorm, out of place then in place
    std::vector<float> want(n);
    rmsnorm(x.data(), w.data(), want.data(), rows, cols, 1e-5f);
    float* dx = dev(x);
    float* out = dev_poisoned(n);
    be->rmsnorm(dx, dw, out, rows, cols, 1e-5f);
    EXPECT_TRUE(within_ulps(host(out, n), want, 1, "Backend::rmsnorm"));
    be->rmsnorm(dx, dw, dx, rows, cols, 1e-5f);
    EXPECT_TRUE(same_bits(host(dx, n), host(out, n), "Backend::rmsnorm in place"));
  }
  {  // add, add_bias
    auto want = x;
    add_inplace(want.data(), y.data(), int64_t(n));
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) want[size_t(r) * cols + c] += w[size_t(c)];
    float* dx = dev(x);
    be->add(dx, dev(y), int64_t(n));
    be->add_bias(dx, dw, rows, cols);
    EXPECT_TRUE(same_bits(host(dx, n), want, "Backend::add then add_bias"));
  }
  {  // gated activations, softcap
    for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
      auto want = x;
      gated_activation(want.data(), y.data(), int64_t(n), act);
      std::vector<float> tol(n);
      for (size_t i = 0; i < n; ++i) tol[i] = 3e-7f * std::fabs(x[i] * y[i]);
      float* dg = dev(x);
      be->gated_activation(dg, dev(y), int64_t(n), act);
      EXPECT_TRUE(close_to(host(dg, n), want, 0.0, 1e-6, "Backend::gated_activation", &tol));
    }
    auto want = x;
    softcap(want.data(), int64_t(n), 3.0f);
    float* dx = dev(x);
    be->softcap(dx, int64_t(n), 3.0f);
    EXPECT_TRUE(close_to(host(dx, n), want, 1e-37, 1e-6, "Backend::softcap"));
  }
  {  // gather_rows
    const std::vector<int32_t> idx = {18, 0, 7, 7, 3};
    std::vector<float> want;
    for (int32_t r : idx) want.insert(want.end(), x.begin() + size_t(r) * cols, x.begin() + size_t(r + 1) * cols);
    float* dst = dev_poisoned(want.size());
    be->gather_rows(dev(x), dev(idx), int(idx.size()), cols, dst);
    EXPECT_TRUE(same_bits(host(dst, want.size()), want, "Backend::gather_rows"));
  }
}

TEST_F(CudaBackendTest, RopeMatchesCpu) {
  const int rows = 6, n_heads = 4, head_dim = 128, n_rot = 64;
  const std::vector<int32_t> pos = {0, 5, 4096, 32767, 131071, 6};
  std::vector<float> inv_freq(size_t(n_rot / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = 1.0f / std::pow(10000.0f, float(2 * i) / float(n_rot));
  const float* df = be->upload_floats(inv_freq);
  const int32_t* dpos = dev(pos);
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox}) {
    const auto x = gpu_randn(size_t(rows) * n_heads * head_dim, 5);
    auto want = x;
    for (int r = 0; r < rows; ++r)
      rope(want.data() + size_t(r) * n_heads * head_dim, n_heads, head_dim, n_rot, pos[size_t(r)], inv_freq.data(),
           4.0f, style);
    float* dx = dev(x);
    be->rope(dx, rows, n_heads, head_dim, n_rot, dpos, df, 4.0f, style);
    // The error is ~3e-7 (|x_a| + |x_b|) of a pair (ops_cuda_test.cpp bounds it per pair by 1e-6 (...));
    // with x ~ N(0, 1), 4e-6 absolute is that bound for pairs up to 4 and the error's for pairs up to 13.
    EXPECT_TRUE(close_to(host(dx, x.size()), want, 4e-6, 0.0,
                         std::string("Backend::rope ") + (style == RopeStyle::Norm ? "norm" : "neox")));
  }
}

// A random matrix of `type` (quantize_row_ref of normal values) with rows `pad` bytes apart beyond
// their size, so that a kernel that assumed row_stride == row_bytes reads the wrong rows.
struct HostMatrix {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
};
HostMatrix random_matrix(DType type, int64_t n_out, int64_t n_in, size_t pad, uint32_t seed) {
  HostMatrix m;
  const size_t rb = row_bytes(type, n_in);
  m.bytes.assign(size_t(n_out) * (rb + pad), 0xAB);
  for (int64_t o = 0; o < n_out; ++o) {
    const auto row = gpu_randn(size_t(n_in), seed + uint32_t(o), 0.5f);
    quantize_row_ref(type, row.data(), m.bytes.data() + size_t(o) * (rb + pad), n_in);
  }
  m.w.type = type;
  m.w.data = m.bytes.data();
  m.w.n_in = n_in;
  m.w.n_out = n_out;
  m.w.row_stride = rb + pad;
  return m;
}

TEST_F(CudaBackendTest, EmbedMatchesDequantizeTimesScale) {
  for (DType type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
    const int64_t vocab = 301, dim = 4096 + 64;
    const HostMatrix table = random_matrix(type, vocab, dim, 0, 7);
    const WeightMatrix dt = be->upload_matrix(table.w);
    EXPECT_EQ(dt.type, type);
    EXPECT_EQ(dt.n_in, dim);
    EXPECT_EQ(dt.n_out, vocab);
    // q8_0 / q4_0 rows go to the split layout (16-byte-aligned rows: matmul_cuda_split.h) unless
    // POLYKV_CUDA_MATVEC=old; other types keep the rows as uploaded.
    if (dt.layout == WeightLayout::CudaSplit)
      EXPECT_EQ(dt.row_stride, cuda::split_row_stride(type, dim)) << dtype_name(type);
    else
      EXPECT_EQ(dt.row_stride, table.w.row_stride) << dtype_name(type);
    const std::vector<int32_t> toks = {300, 0, 17, 17, 150};
    std::vector<float> want(toks.size() * size_t(dim));
    const float scale = std::sqrt(float(dim));
    for (size_t t = 0; t < toks.size(); ++t) {
      dequantize_row_ref(type, table.bytes.data() + size_t(toks[t]) * table.w.row_stride, want.data() + t * dim, dim);
      for (int64_t j = 0; j < dim; ++j) want[t * dim + size_t(j)] *= scale;
    }
    float* x = dev_poisoned(want.size());
    be->embed(dt, dev(toks), int(toks.size()), scale, x);
    EXPECT_TRUE(close_to(host(x, want.size()), want, 0.0, 1e-6, std::string("Backend::embed ") + dtype_name(type)));
  }
}

TEST_F(CudaBackendTest, MatmulMatchesReference) {
  for (DType type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0})
    for (int n : {1, 3, 8, 9, 67}) {
      const int64_t n_out = 517, n_in = 2048 + 96;
      const HostMatrix m = random_matrix(type, n_out, n_in, /*pad=*/type == DType::F32 ? 0 : 16, 100 + n);
      const WeightMatrix dw = be->upload_matrix(m.w);
      const auto x = gpu_randn(size_t(n) * n_in, 200 + n);
      std::vector<float> want(size_t(n) * n_out);
      matmul_ref(m.w, x.data(), want.data(), n);
      // Per output: 1e-3 of sum_i |w_i x_i| (the dot's condition).
      std::vector<float> tol(want.size());
      std::vector<float> row(static_cast<size_t>(n_in));
      for (int64_t o = 0; o < n_out; ++o) {
        dequantize_row_ref(type, m.bytes.data() + size_t(o) * m.w.row_stride, row.data(), n_in);
        for (int t = 0; t < n; ++t) {
          double s = 0;
          for (int64_t i = 0; i < n_in; ++i) s += std::fabs(double(row[size_t(i)]) * x[size_t(t) * n_in + size_t(i)]);
          tol[size_t(t) * n_out + size_t(o)] = float(1e-3 * s);
        }
      }
      float* y = dev_poisoned(want.size());
      be->matmul(dw, dev(x), y, n);
      const auto got = host(y, want.size());
      const std::string what = std::string("Backend::matmul ") + dtype_name(type) + " n " + std::to_string(n);
      EXPECT_TRUE(close_to(got, want, 0.0, 0.0, what, &tol));
      double e2 = 0, r2 = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        e2 += double(got[i] - want[i]) * (got[i] - want[i]);
        r2 += double(want[i]) * want[i];
      }
      // NMSE: float weights only round in f32 (or f16 on the tensor-core path, ~1e-7). Quantized
      // weights multiply x rounded to 8 bits per block of 32 (d = amax / 127, error uniform in ±d/2):
      // NMSE ≈ E[amax²] / (12 · 127² · σ²) ≈ 4.4 / 193548 ≈ 2e-5 on normal x (1.1e-5..1.9e-5 on the
      // H200), so 1e-4 for them.
      const double nmse_bound = (type == DType::F32 || type == DType::F16) ? 1e-5 : 1e-4;
      EXPECT_LE(e2 / r2, nmse_bound) << what << ": NMSE";
    }
}

TEST_F(CudaBackendTest, BeginStepRefusesKvOutsideTheGpu) {
  const KvShape shape{1, 2, 64, 64, {}};
  KvCache private_kv(shape, KvType::F16, KvType::F16, 64);
  const StepSeq a[] = {{&private_kv, 0, 1, 0}};
  try {
    be->begin_step(a);
    FAIL() << "begin_step accepted a private KvCache";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a KV pool in GPU memory (cuda:0)"), std::string::npos) << e.what();
  }
  KvBlockStore host_store(shape, KvType::F16, KvType::F16, 4, 16);
  PagedKv in_host(host_store, 64);
  in_host.set_blocks(std::vector<BlockId>{0});
  const StepSeq b[] = {{&in_host, 0, 1, 0}};
  EXPECT_THROW(be->begin_step(b), Error);
}

// ---- store_kv + attention through a pool in GPU memory ------------------------------------------

struct KvCase {
  KvType k, v;
};

class CudaBackendKv : public CudaBackendTest, public ::testing::WithParamInterface<KvCase> {};

// Types whose GPU codes must equal the CPU's bit for bit (kv_cuda.h).
bool exact_codes(KvType t) {
  return t == KvType::F32 || t == KvType::F16 || t == KvType::BF16 || t == KvType::Q8_0 || t == KvType::Q4_0;
}
bool float_type(KvType t) { return t == KvType::F32 || t == KvType::F16 || t == KvType::BF16; }

// Two sequences over shuffled blocks of one pool (in the GPU's kv_memory and, as the reference, in
// host memory), three steps each (prefill, decode, a chunk crossing blocks), two layers with
// different params. After each layer's store_kv + attention: the outputs vs attention_ref over the
// host pool; after each step: the stored codes vs the host's (exact types).
TEST_P(CudaBackendKv, StoreAndAttentionRoundTrip) {
  const KvCase kc = GetParam();
  const int n_layer = 2, n_head_kv = 2, hd = 128, n_head = 8, bt = 16, n_blocks = 12;
  const KvShape shape{n_layer, n_head_kv, hd, hd, {}};
  KvBlockStore dstore(shape, kc.k, kc.v, n_blocks, bt, be->kv_memory());
  KvBlockStore hstore(shape, kc.k, kc.v, n_blocks, bt);
  const std::vector<std::vector<BlockId>> tables = {{7, 2, 9, 0}, {3, 11, 5}};
  std::vector<PagedKv> dkv, hkv;
  dkv.reserve(2);
  hkv.reserve(2);
  for (size_t s = 0; s < 2; ++s) {
    dkv.emplace_back(dstore, int(tables[s].size()) * bt);
    hkv.emplace_back(hstore, int(tables[s].size()) * bt);
    dkv[s].set_blocks(tables[s]);
    hkv[s].set_blocks(tables[s]);
  }
  AttentionParams params[n_layer];
  params[0] = {n_head, 1.0f / std::sqrt(float(hd)), 0.0f, 0};
  params[1] = {n_head, 1.0f / std::sqrt(float(hd)), 30.0f, 20};  // softcap and a sliding window
  const int steps[][2] = {{37, 20}, {1, 3}, {17, 1}};  // rows of each sequence per step
  const std::string types = std::string(kv_type_name(kc.k)) + "/" + kv_type_name(kc.v);
  const double nmse_bound = float_type(kc.k) ? 1e-6 : 1e-4;
  int pos[2] = {0, 0};
  uint32_t seed = 1000;
  for (int step = 0; step < 3; ++step) {
    const int n[2] = {steps[step][0], steps[step][1]};
    const int rows = n[0] + n[1];
    const StepSeq seqs[] = {{&dkv[0], pos[0], n[0], 0}, {&dkv[1], pos[1], n[1], n[0]}};
    be->begin_step(seqs);
    for (int layer = 0; layer < n_layer; ++layer) {
      const auto k = gpu_randn(size_t(rows) * n_head_kv * hd, seed++);
      const auto v = gpu_randn(size_t(rows) * n_head_kv * hd, seed++);
      const auto q = gpu_randn(size_t(rows) * n_head * hd, seed++);
      be->store_kv(layer, dev(k), dev(v));
      float* out = dev_poisoned(size_t(rows) * n_head * hd);
      be->attention(layer, params[layer], dev(q), out);
      const auto got = host(out, size_t(rows) * n_head * hd);

      std::vector<float> want(got.size());
      for (int s = 0, row0 = 0; s < 2; row0 += n[s], ++s) {
        hkv[size_t(s)].store(layer, pos[s], n[s], k.data() + size_t(row0) * n_head_kv * hd,
                             v.data() + size_t(row0) * n_head_kv * hd, nullptr);
        attention_ref(params[layer], hkv[size_t(s)].view(layer), pos[s], n[s], q.data() + size_t(row0) * n_head * hd,
                      want.data() + size_t(row0) * n_head * hd);
      }
      const std::string what = "attention " + types + " step " + std::to_string(step) + " layer " +
                               std::to_string(layer) + " (rows " + std::to_string(n[0]) + "+" + std::to_string(n[1]) +
                               " at positions " + std::to_string(pos[0]) + ", " + std::to_string(pos[1]) + ")";
      double e2 = 0, r2 = 0;
      size_t first_nan = got.size();
      for (size_t i = 0; i < got.size(); ++i) {
        if (!std::isfinite(got[i]) && first_nan == got.size()) first_nan = i;
        e2 += double(got[i] - want[i]) * (got[i] - want[i]);
        r2 += double(want[i]) * want[i];
      }
      EXPECT_EQ(first_nan, got.size()) << what << ": a non-finite (unwritten?) output, first at " << first_nan
                                       << " (row " << first_nan / (size_t(n_head) * hd) << ")";
      EXPECT_LE(e2 / r2, nmse_bound) << what << ": NMSE";
      EXPECT_TRUE(close_to(got, want, 0.05, 0.05, what)) << "(loose elementwise view of the same comparison)";
    }
    for (int s = 0; s < 2; ++s) {
      pos[s] += n[s];
      dkv[size_t(s)].commit(pos[s]);
      hkv[size_t(s)].commit(pos[s]);
    }
    if (!exact_codes(kc.k) || !exact_codes(kc.v)) continue;
    // The codes of every stored row, K and V, every layer: the same bytes as the CPU's.
    std::vector<uint8_t> dbytes(dstore.block_bytes() * size_t(n_blocks));
    be->download(dbytes.data(), dstore.data(), dbytes.size());
    for (int s = 0; s < 2; ++s)
      for (int p = 0; p < pos[s]; ++p)
        for (int layer = 0; layer < n_layer; ++layer)
          for (int g = 0; g < n_head_kv; ++g) {
            const BlockId b = tables[size_t(s)][size_t(p / bt)];
            const size_t slot = size_t(g) * bt + size_t(p % bt);
            const uint8_t* hk = hstore.k_part(b, layer) + slot * hstore.k_head_bytes();
            const uint8_t* hv = hstore.v_part(b, layer) + slot * hstore.v_head_bytes();
            const size_t base = (size_t(b) * n_layer + size_t(layer)) * dstore.layer_bytes();
            const uint8_t* dk = dbytes.data() + base + slot * dstore.k_head_bytes();
            const uint8_t* dv = dbytes.data() + base + dstore.k_part_bytes() + slot * dstore.v_head_bytes();
            ASSERT_EQ(0, std::memcmp(dk, hk, hstore.k_head_bytes()))
                << types << " K codes differ: seq " << s << " pos " << p << " layer " << layer << " head " << g
                << " (block " << b << ")";
            ASSERT_EQ(0, std::memcmp(dv, hv, hstore.v_head_bytes()))
                << types << " V codes differ: seq " << s << " pos " << p << " layer " << layer << " head " << g
                << " (block " << b << ")";
          }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaBackendKv,
                         ::testing::Values(KvCase{KvType::F16, KvType::F16}, KvCase{KvType::Q8_0, KvType::Q8_0},
                                           KvCase{KvType::Q4_0, KvType::BF16}, KvCase{KvType::Q8_0, KvType::Turbo3T}),
                         [](const auto& info) {
                           return std::string(kv_type_name(info.param.k)) + "_" + kv_type_name(info.param.v);
                         });

// ---- benchmark ------------------------------------------------------------------------------------

// Device-to-device copy of 4 GiB, median of 10 (after 2 warm-ups), timed with CUDA events. Prints
// the rate counting bytes read + written (the memory bandwidth a memory-bound kernel can reach) and
// a line scripts/gpu-test.sh parses.
TEST(CudaBench, DISABLED_CopyBandwidth) {
  POLYKV_REQUIRE_GPU();
  const size_t bytes = size_t(4) << 30;
  void *src = nullptr, *dst = nullptr;
  POLYKV_CUDA_CHECK(cudaMalloc(&src, bytes));
  POLYKV_CUDA_CHECK(cudaMalloc(&dst, bytes));
  POLYKV_CUDA_CHECK(cudaMemset(src, 1, bytes));
  cudaEvent_t t0, t1;
  POLYKV_CUDA_CHECK(cudaEventCreate(&t0));
  POLYKV_CUDA_CHECK(cudaEventCreate(&t1));
  std::vector<float> ms;
  for (int i = 0; i < 12; ++i) {
    POLYKV_CUDA_CHECK(cudaEventRecord(t0));
    POLYKV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
    POLYKV_CUDA_CHECK(cudaEventRecord(t1));
    POLYKV_CUDA_CHECK(cudaEventSynchronize(t1));
    float t = 0;
    POLYKV_CUDA_CHECK(cudaEventElapsedTime(&t, t0, t1));
    if (i >= 2) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double med = (ms[4] + ms[5]) / 2;
  const double rw_gbs = 2.0 * double(bytes) / (med * 1e-3) / 1e9;
  std::printf("device-to-device copy of 4 GiB: median %.3f ms (min %.3f, max %.3f) over 10; %.1f GB/s read + written, "
              "%.1f GB/s copied\n",
              med, ms.front(), ms.back(), rw_gbs, rw_gbs / 2);
  std::printf("POLYKV_COPY_BW_GBS=%.1f\n", rw_gbs);
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  cudaFree(src);
  cudaFree(dst);
}

}  // namespace
}  // namespace polykv
