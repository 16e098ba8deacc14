// The L2 prefetch hint (backend/cuda/l2_prefetch.h, Backend::prefetch_weights): the kernel takes any range
// without faulting or writing, the side stream's fork and join work eagerly, and the embedded model's logits are
// the same bits with prefetches on and off through recorded and replayed decode graphs, while prefetches are
// actually launched in the "on" run (and none in the "off" run). Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/l2_prefetch.h"
#include "cuda_test_util.h"
#include "engine/sequence_kv.h"
#include "model/model.h"
#include "../test_util.h"

namespace polykv {
namespace {

TEST(L2PrefetchCuda, KernelTakesAnyRangeAndWritesNothing) {
  POLYKV_REQUIRE_GPU();
  const size_t n = (3u << 20) + 77;
  std::vector<uint8_t> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = uint8_t(i * 131u + 7u);
  auto dev = cuda_test::upload(host);
  const char* p = dev->as<const char>();
  const cuda::PrefetchRange ranges[] = {
      {p + 3, 1}, {p + 5, 15}, {p + 17, (16u << 10) + 5}, {p + 1, n - 1},  // unaligned starts, odd sizes, all of it
  };
  cudaStream_t s = nullptr;
  POLYKV_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const uint64_t before = cuda::prefetch_launches();
  cuda::launch_l2_prefetch(ranges, s);
  cuda::launch_l2_prefetch(std::span<const cuda::PrefetchRange>(ranges + 1, 1), s);
  const cuda::PrefetchRange empty[] = {{nullptr, 100}, {p, 0}};
  cuda::launch_l2_prefetch(empty, s);  // nothing to do: no launch
  EXPECT_EQ(cuda::prefetch_launches(), before + 2);
  {
    cuda::SideStreamPrefetch side(0);
    side.issue(s, ranges);
    side.join(s);
    side.join(s);  // nothing pending: no-op
    EXPECT_EQ(side.issued(), 1u);
  }
  POLYKV_CUDA_CHECK(cudaStreamSynchronize(s));
  POLYKV_CUDA_CHECK(cudaStreamDestroy(s));
  std::vector<uint8_t> back(n);
  POLYKV_CUDA_CHECK(cudaMemcpy(back.data(), dev->p, n, cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, host);
}

// The embedded model: a prompt, then decode steps (each step shape's second run is recorded, later ones replay
// the graph), with the given prefetch budget. Returns every step's logits.
std::vector<std::vector<float>> run_steps(size_t budget, const char* ctv) {
  cuda::set_prefetch_budget_bytes(budget);
  auto backend = make_backend({"cuda", 0});
  auto model = Model::load(test::embedded_model(), *backend);
  const int n_vocab = model->config().n_vocab;
  SequenceKvOptions o;
  o.k_type = "q8_0";
  o.v_type = ctv;
  o.max_tokens = 256;
  auto kv = make_sequence_kv(*model, o);
  std::vector<std::vector<float>> out;
  const std::vector<int32_t> prompt = {1, 42, 7, 300, 5, 99, 12, 8, 77, 3, 150, 2, 9, 31, 4, 60, 18};
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  model->forward(prompt, *kv, logits.data(), false);
  out.push_back(logits);
  for (int step = 0; step < 8; ++step) {
    const int32_t t = int32_t((step * 37 + 11) % n_vocab);
    model->forward(std::span(&t, 1), *kv, logits.data(), false);
    out.push_back(logits);
  }
  const std::vector<int32_t> three = {5, 6, 7};
  std::vector<float> l3(3 * size_t(n_vocab));
  for (int rep = 0; rep < 3; ++rep) {  // a verify-shaped step, recorded and replayed too
    model->forward(three, *kv, l3.data(), true);
    out.push_back(l3);
  }
  return out;
}

TEST(L2PrefetchCuda, SameLogitsWithPrefetchesOnAndOff) {
  POLYKV_REQUIRE_GPU();
  const size_t saved = cuda::prefetch_budget_bytes();
  struct Restore {
    size_t b;
    ~Restore() { cuda::set_prefetch_budget_bytes(b); }
  } restore{saved};
  for (const char* ctv : {"q8_0", "turbo3t"}) {
    const uint64_t l0 = cuda::prefetch_launches();
    const auto off = run_steps(0, ctv);
    const uint64_t l1 = cuda::prefetch_launches();
    const auto on = run_steps(size_t(32) << 20, ctv);
    const uint64_t l2 = cuda::prefetch_launches();
    EXPECT_EQ(l1, l0) << "prefetches launched with the budget at 0";
    EXPECT_GT(l2, l1) << "no prefetch launched while recording the decode graphs";
    ASSERT_EQ(off.size(), on.size());
    for (size_t s = 0; s < off.size(); ++s)
      EXPECT_TRUE(cuda_test::same_bits(on[s], off[s], std::string("v ") + ctv + " step " + std::to_string(s)));
  }
}

}  // namespace
}  // namespace polykv
