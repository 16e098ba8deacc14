// make_backend's device names and the CPU backend's ops, each against the CPU kernel it wraps
// (backend/backend.h rule: an op computes a row from that row's inputs only).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/ops.h"
#include "core/error.h"
#include "quant/quant.h"
#include "test_util.h"

namespace polykv {
namespace {

std::string error_of(const std::string& device) {
  try {
    make_backend({device, 1});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MakeBackend, CpuWithThreads) {
  const std::unique_ptr<Backend> b = make_backend({"cpu", 2});
  EXPECT_EQ(b->kind(), DeviceKind::Cpu);
  EXPECT_NE(b->describe().find("cpu ("), std::string::npos) << b->describe();
  EXPECT_NE(b->describe().find("2 threads"), std::string::npos) << b->describe();
  EXPECT_TRUE(b->kv_memory().host_accessible());
}

TEST(MakeBackend, UnknownDevicesAreErrors) {
  for (const char* d : {"", "gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", "cuda0", "cuda:1:2", "cuda:123456789"}) {
    SCOPED_TRACE(d);
    EXPECT_NE(error_of(d).find("unknown device"), std::string::npos) << error_of(d);
  }
}

TEST(MakeBackend, CudaNamesWithoutCudaOrWithoutGpu) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is visible";
  for (const char* d : {"cuda", "cuda:0", "cuda:3"}) {
    SCOPED_TRACE(d);
    const std::string e = error_of(d);
#ifdef POLYKV_HAVE_CUDA
    EXPECT_NE(e.find("no CUDA GPU is visible"), std::string::npos) << e;
#else
    EXPECT_NE(e.find("this polykv was built without CUDA"), std::string::npos) << e;
#endif
  }
}

TEST(MakeBackend, AutoIsCpuWithoutGpu) {
  const std::unique_ptr<Backend> b = make_backend({"auto", 1});
  EXPECT_EQ(b->kind(), cuda_available() ? DeviceKind::Cuda : DeviceKind::Cpu);
}

TEST(CpuBackend, OwnsOrBorrowsItsPool) {
  ThreadPool pool(3);
  CpuBackend borrowed(pool);
  EXPECT_EQ(&borrowed.pool(), &pool);
  CpuBackend owned(2);
  EXPECT_EQ(owned.pool().size(), 2);
  owned.set_pool(pool);
  EXPECT_EQ(&owned.pool(), &pool);
}

TEST(CpuBackend, MemoryRoundTrip) {
  CpuBackend b(1);
  const std::vector<float> src = test::random_floats(1000, 1);
  float* dev = static_cast<float*>(b.allocate(src.size() * sizeof(float)));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(dev) % 64, 0u);
  b.upload(dev, src.data(), src.size() * sizeof(float));
  std::vector<float> back(src.size());
  b.download(back.data(), dev, back.size() * sizeof(float));
  b.release(dev);
  EXPECT_EQ(back, src);
}

// Rows at their own positions, as a step's rows are: each row as the one-token kernel rotates it.
TEST(CpuBackend, RopeTakesEachRowsPosition) {
  CpuBackend b(1);
  const int rows = 5, heads = 3, hd = 16, n_rot = 12;
  const std::vector<int32_t> pos = {0, 7, 3, 1000, 41};
  const std::vector<float> inv_freq = test::random_floats(size_t(n_rot / 2), 2, 0.5f);
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox}) {
    std::vector<float> x = test::random_floats(size_t(rows * heads * hd), 3), want = x;
    b.rope(x.data(), rows, heads, hd, n_rot, pos.data(), inv_freq.data(), 2.0f, style);
    for (int r = 0; r < rows; ++r)
      rope(want.data() + r * heads * hd, heads, hd, n_rot, pos[size_t(r)], inv_freq.data(), 2.0f, style);
    EXPECT_EQ(0, std::memcmp(x.data(), want.data(), x.size() * sizeof(float)));
  }
}

TEST(CpuBackend, BiasGatherAndEmbed) {
  CpuBackend b(1);
  const int rows = 4, cols = 37;
  std::vector<float> x = test::random_floats(size_t(rows * cols), 4);
  const std::vector<float> bias = test::random_floats(size_t(cols), 5), x0 = x;
  b.add_bias(x.data(), bias.data(), rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) ASSERT_EQ(x[size_t(r * cols + c)], x0[size_t(r * cols + c)] + bias[size_t(c)]);

  const std::vector<int32_t> pick = {3, 0, 3};
  std::vector<float> g(pick.size() * size_t(cols));
  b.gather_rows(x.data(), pick.data(), int(pick.size()), cols, g.data());
  for (size_t i = 0; i < pick.size(); ++i)
    EXPECT_EQ(0, std::memcmp(g.data() + i * cols, x.data() + size_t(pick[i]) * cols, cols * sizeof(float)));

  // Embedding rows of a q8_0 table, scaled.
  const int n_in = 64, n_vocab = 9;
  const std::vector<float> table_f = test::random_floats(size_t(n_in * n_vocab), 6);
  std::vector<uint8_t> table(row_bytes(DType::Q8_0, n_in) * n_vocab);
  for (int r = 0; r < n_vocab; ++r)
    quantize_row_ref(DType::Q8_0, table_f.data() + r * n_in, table.data() + r * row_bytes(DType::Q8_0, n_in), n_in);
  WeightMatrix w;
  w.type = DType::Q8_0;
  w.data = table.data();
  w.n_in = n_in;
  w.n_out = n_vocab;
  w.row_stride = row_bytes(DType::Q8_0, n_in);
  const std::vector<int32_t> tokens = {8, 2};
  std::vector<float> e(tokens.size() * n_in), want(n_in);
  b.embed(w, tokens.data(), int(tokens.size()), 3.0f, e.data());
  for (size_t t = 0; t < tokens.size(); ++t) {
    dequantize_row_ref(DType::Q8_0, table.data() + size_t(tokens[t]) * w.row_stride, want.data(), n_in);
    for (int i = 0; i < n_in; ++i) ASSERT_EQ(e[t * n_in + size_t(i)], want[size_t(i)] * 3.0f);
  }
}

}  // namespace
}  // namespace polykv
