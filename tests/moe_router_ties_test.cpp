// Why MoeModelCuda.Qwen3MoeMatchesTransformers failed with f16 KV (max |d log-prob| 0.73 at row 35, H200
// 2026-12-01d) while f32 KV passed, and the rule that test now applies (tests/moe_router_probe.h).
//
// The qwen3moe random fixture has one near-tie in its routing: row 35, layer 1, experts 0 and 6 for the
// second slot, 1.1e-3 apart in the CPU's f16-KV run (7e-4 with f32 KV); every other row is at least
// 1.4e-2 apart in every layer. The CUDA prefill rounds the inputs of its f16-weight matmuls to f16
// (matmul_cuda_prefill.cu: tensor cores), which moves router logits by up to 2.1e-3. Emulated here on the
// CPU (RouterProbeBackend::round_prefill_x16), that rounding flips row 35's choice with f16 KV and moves
// it by 0.730 against transformers, what the GPU measured (0.7302); with f32 KV it does not flip. So
// the failure is the fixture's near-tie meeting the GPU's documented f16 rounding, not a GPU bug.
//
// This test checks, with the emulation, that the CUDA test's rule holds for a GPU whose only difference
// from the CPU is that rounding: router logits move by less than kRouterTieGap / 4 on rows no flip can
// reach (so a gap moves by less than kRouterTieGap / 2 and rows with larger gaps cannot flip), rows before the first near-tie stay within the tight
// bound, later rows within kAfterTieBound, top-1 at all rows but one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "moe_router_probe.h"
#include "test_util.h"

namespace polykv {
namespace {

using test::log_softmax;

TEST(MoeRouterTies, GpuPrefillRoundingStaysWithinTheCudaTestsRule) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::string dir = test::fixtures_dir() + "/models/random";
  const std::vector<int32_t> ids = test::fixture_ref_ids(dir + "/qwen3moe.ref.json");
  const int T = int(ids.size());
  const std::vector<float> ref = test::read_f32(dir + "/qwen3moe.logits_full.f32");
  for (const char* kv : {"f16", "f32"}) {
    SCOPED_TRACE(kv);
    const test::ProbeRun cpu = test::probe_run(dir + "/qwen3moe.gguf", ids, kv, false);
    const test::ProbeRun emu = test::probe_run(dir + "/qwen3moe.gguf", ids, kv, true);
    ASSERT_EQ(cpu.calls.size(), emu.calls.size());
    ASSERT_FALSE(cpu.calls.empty());
    const std::vector<float> gap = test::min_router_gap(cpu.calls, T);
    int first_tie = T, n_tied = 0;
    for (int t = 0; t < T; ++t)
      if (gap[size_t(t)] < test::kRouterTieGap) {
        first_tie = std::min(first_tie, t);
        ++n_tied;
        std::printf("  %s KV: row %d near-tied (min top-k gap %.2e)\n", kv, t, gap[size_t(t)]);
      }
    {
      std::vector<float> g2 = gap;
      std::sort(g2.begin(), g2.end());
      std::printf("  %s KV: smallest min top-k gaps of the rows: %.2e %.2e %.2e\n", kv, g2[0], g2[1], g2[2]);
    }
    EXPECT_LE(n_tied, 2) << "the fixture's routing has more near-ties than the CUDA test can leave unbounded";
    // How far the GPU's rounding moves router logits where no flip can have happened.
    double moved = 0;
    for (size_t l = 0; l < cpu.calls.size(); ++l)
      for (int t = 0; t < first_tie; ++t)
        for (int e = 0; e < cpu.calls[l].n_expert; ++e) {
          const size_t i = size_t(t) * size_t(cpu.calls[l].n_expert) + size_t(e);
          moved = std::max(moved, double(std::abs(emu.calls[l].logits[i] - cpu.calls[l].logits[i])));
        }
    std::printf("  %s KV: emulated GPU rounding moves router logits by up to %.2e (tie gap %.1e)\n", kv, moved,
                double(test::kRouterTieGap));
    EXPECT_GT(moved, 0.0) << "the emulation changed nothing";
    // A gap moves by at most twice that: below kRouterTieGap / 2, so no row outside the near-tied ones
    // can flip, with a margin of 2.
    EXPECT_LT(moved, test::kRouterTieGap / 4);
    // The CUDA test's per-row bounds, applied to the emulated GPU against transformers.
    const std::vector<double> bound = test::row_bounds(gap, 2e-2);
    const int V = emu.n_vocab;
    int agree = 0;
    double worst_tied = 0;
    for (int t = 0; t < T; ++t) {
      const float* g = emu.logits.data() + size_t(t) * V;
      const float* r = ref.data() + size_t(t) * V;
      agree += std::max_element(g, g + V) - g == std::max_element(r, r + V) - r;
      const auto lg = log_softmax(g, V), lr = log_softmax(r, V);
      double d = 0;
      for (int i = 0; i < V; ++i) d = std::max(d, std::abs(lg[size_t(i)] - lr[size_t(i)]));
      if (bound[size_t(t)] < 0) worst_tied = std::max(worst_tied, d);
      else EXPECT_LE(d, bound[size_t(t)]) << "row " << t;
    }
    std::printf("  %s KV: emulated GPU vs transformers: near-tied rows up to %.3f, top-1 %d/%d\n", kv, worst_tied,
                agree, T);
    EXPECT_GE(agree, T - 1);
  }
}

}  // namespace
}  // namespace polykv
