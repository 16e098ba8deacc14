// The MTP path on the GPU against the CPU backend: Model::BatchSeq::hidden, MtpHead (its own KV in
// device memory, fed the same hidden states) and MtpDrafter, on the embedded model with a random MTP
// block (tests/mtp_test_model.h). Compared by relative L2 error per row and top-1 agreement (the GPU
// rounds differently; model_cuda_test.cpp says how), not bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "../mtp_test_model.h"
#include "../test_util.h"
#include "backend/backend.h"
#include "cuda_test_util.h"
#include "engine/spec/mtp_drafter.h"
#include "kv/owned_paged_kv.h"
#include "model/model.h"
#include "model/mtp_head.h"

namespace polykv {
namespace {

// max over rows of ||b - a|| / ||a||; top1: rows whose argmax agree.
double worst_rel(const std::vector<float>& a, const std::vector<float>& b, int cols, int* top1) {
  double w = 0;
  *top1 = 0;
  for (size_t r = 0; r * size_t(cols) < a.size(); ++r) {
    const float* x = a.data() + r * size_t(cols);
    const float* y = b.data() + r * size_t(cols);
    double e2 = 0, n2 = 0;
    for (int i = 0; i < cols; ++i) {
      EXPECT_TRUE(std::isfinite(y[i])) << "row " << r << " col " << i;
      e2 += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
      n2 += double(x[i]) * x[i];
    }
    w = std::max(w, std::sqrt(e2 / std::max(n2, 1e-30)));
    *top1 += (std::max_element(x, x + cols) - x) == (std::max_element(y, y + cols) - y);
  }
  return w;
}

TEST(MtpCuda, HiddenHeadAndDrafterMatchTheCpu) {
  POLYKV_REQUIRE_GPU();
  auto cpu_backend = make_backend({"cpu", 0});
  auto gpu_backend = make_backend({"cuda", 0});
  const std::string path = test::mtp_test_model();
  auto cpu = Model::load(path, *cpu_backend);
  auto gpu = Model::load(path, *gpu_backend);
  const int E = cpu->config().n_embd, V = cpu->config().n_vocab, n = 29;
  std::vector<int32_t> ids;
  for (int i = 0; i <= n; ++i) ids.push_back(int32_t(11 + (i * 389) % 7900));

  // Hidden states of the prompt (with the last row's logits, as a prefill asks for them).
  std::vector<float> h_cpu(size_t(n) * E), h_gpu(size_t(n) * E), l_cpu(static_cast<size_t>(V)), l_gpu(static_cast<size_t>(V));
  OwnedPagedKv tkv_cpu(cpu->kv_shape(), KvType::F16, KvType::F16, 128, 256, cpu_backend->kv_memory());
  OwnedPagedKv tkv_gpu(gpu->kv_shape(), KvType::F16, KvType::F16, 128, 256, gpu_backend->kv_memory());
  {
    const Model::BatchSeq a{std::span(ids).first(size_t(n)), &tkv_cpu, l_cpu.data(), false, h_cpu.data()};
    cpu->forward_batch(std::span(&a, 1));
    const Model::BatchSeq b{std::span(ids).first(size_t(n)), &tkv_gpu, l_gpu.data(), false, h_gpu.data()};
    gpu->forward_batch(std::span(&b, 1));
  }
  int top1 = 0;
  const double e_hidden = worst_rel(h_cpu, h_gpu, E, &top1);
  std::fprintf(stderr, "hidden: worst rel L2 %.3g\n", e_hidden);
  EXPECT_LT(e_hidden, 3e-2);

  // The head on both, fed the CPU's hidden states, in two chunks.
  auto head_cpu = MtpHead::load(*cpu);
  auto head_gpu = MtpHead::load(*gpu);
  ASSERT_NE(head_gpu, nullptr);
  OwnedPagedKv kc(head_cpu->kv_shape(), KvType::F16, KvType::F16, 64, 256, cpu_backend->kv_memory());
  OwnedPagedKv kg(head_gpu->kv_shape(), KvType::F16, KvType::F16, 64, 256, gpu_backend->kv_memory());
  std::vector<float> lc(size_t(n) * V), lg(size_t(n) * V), yc(size_t(n) * E), yg(size_t(n) * E);
  for (auto [r0, r1] : {std::pair{0, 20}, std::pair{20, n}}) {
    const auto next = std::span(ids).subspan(size_t(r0) + 1, size_t(r1 - r0));
    head_cpu->forward(next, h_cpu.data() + size_t(r0) * E, kc, lc.data() + size_t(r0) * V, yc.data() + size_t(r0) * E);
    head_gpu->forward(next, h_cpu.data() + size_t(r0) * E, kg, lg.data() + size_t(r0) * V, yg.data() + size_t(r0) * E);
  }
  const double e_logits = worst_rel(lc, lg, V, &top1);
  std::fprintf(stderr, "MTP logits: worst rel L2 %.3g, top-1 agreement %d/%d\n", e_logits, top1, n);
  EXPECT_LT(e_logits, 3e-2);
  EXPECT_GE(top1, n - 2);
  int top1_y = 0;
  EXPECT_LT(worst_rel(yc, yg, E, &top1_y), 3e-2);

  // The drafter on the GPU: prompt hidden states, then k chained drafts.
  auto drafter = make_mtp_drafter(*gpu, 128);
  drafter->target_hidden(h_gpu.data(), n, 0);
  std::vector<int32_t> ctx(ids.begin(), ids.begin() + n);
  ctx.push_back(int32_t(std::max_element(l_gpu.begin(), l_gpu.end()) - l_gpu.begin()));
  std::vector<int32_t> d;
  drafter->draft(ctx, 4, d, nullptr);
  EXPECT_EQ(d.size(), 4u);
}

// 2026-12-01g on the GPU: several drafters drafting in one head pass (MtpDrafter::draft_many over
// MtpHead::forward_batch: gather_rows of each sequence's last row) against each drafting alone, and a
// pool's head KV copied in device memory (OwnedPagedKv::copy_prefix_from: KvMemory::copy) against an
// own catch-up. The same kernels run either way, so drafts are expected equal; a mismatch costs speed
// only (the target verifies every draft), but says the GPU's rows depend on their batch companions.
TEST(MtpCuda, BatchedDraftsAndPoolCopyMatchEachSequenceAlone) {
  POLYKV_REQUIRE_GPU();
  auto gpu_backend = make_backend({"cuda", 0});
  auto gpu = Model::load(test::mtp_test_model(), *gpu_backend);
  const int E = gpu->config().n_embd, P = 40, n_seq = 3;
  std::shared_ptr<MtpHead> head = load_mtp_head(*gpu);
  std::vector<std::vector<int32_t>> ctx(n_seq);
  std::vector<std::vector<float>> hid(n_seq);
  for (int s = 0; s < n_seq; ++s) {
    for (int i = 0; i < P + 5 + 3 * s; ++i) ctx[size_t(s)].push_back(int32_t(11 + ((i < P ? i : i * (s + 2)) * 389) % 7900));
    const int n = int(ctx[size_t(s)].size()) - 1;  // rows 0 .. n - 1; the last token was "sampled"
    hid[size_t(s)].resize(size_t(n) * E);
    OwnedPagedKv tkv(gpu->kv_shape(), KvType::F16, KvType::F16, 128, 256, gpu_backend->kv_memory());
    const Model::BatchSeq b{std::span(ctx[size_t(s)]).first(size_t(n)), &tkv, nullptr, false, hid[size_t(s)].data()};
    gpu->forward_batch(std::span(&b, 1));
  }
  // The pool: the first P tokens (shared by all three contexts), its rows from sequence 0's hidden states.
  MtpDrafter shared(head, P);
  shared.target_hidden(hid[0].data(), P, 0);
  shared.fill(std::span(ctx[0]).first(size_t(P)));
  std::vector<std::unique_ptr<MtpDrafter>> alone, together;
  for (int s = 0; s < n_seq; ++s) {
    alone.push_back(std::make_unique<MtpDrafter>(head, 128));
    together.push_back(std::make_unique<MtpDrafter>(head, 128));
    for (MtpDrafter* d : {alone.back().get(), together.back().get()}) {
      // Pool rows from sequence 0 (as the engine hands every agent its pool's), then the sequence's own.
      d->target_hidden(hid[0].data(), P, 0);
      const int n = int(ctx[size_t(s)].size()) - 1;
      d->target_hidden(hid[size_t(s)].data() + size_t(P) * E, n - P, P);
    }
    EXPECT_EQ(together.back()->copy_prefix_from(shared, ctx[size_t(s)]), P - 1);
  }
  std::vector<std::vector<int32_t>> a(n_seq), b(n_seq);
  std::vector<MtpJob> jobs;
  for (int s = 0; s < n_seq; ++s) {
    alone[size_t(s)]->draft(ctx[size_t(s)], 2 + s, a[size_t(s)], nullptr);
    jobs.push_back({together[size_t(s)].get(), ctx[size_t(s)], 2 + s, &b[size_t(s)]});
  }
  MtpDrafter::draft_many(jobs);
  for (int s = 0; s < n_seq; ++s) {
    EXPECT_EQ(a[size_t(s)].size(), size_t(2 + s));
    EXPECT_EQ(a[size_t(s)], b[size_t(s)]) << "sequence " << s;
  }
}

}  // namespace
}  // namespace polykv
