// Quality gate of the default compressed KV cache (K q8_0, V turbo3) on the trained fixture model,
// small enough for CI: the first 512 held-out tokens of 4 ppl_dev rows, against f32 KV.
//
// Bounds come from measurements: over all of ppl_dev (16 x 2048) q8_0/turbo3 gives mean KLD 0.0124
// and top-1 96.0% (docs/QUALITY.md), and on this 4 x 512 slice KLD 0.01276, top-1 95.8% and ppl
// +1.6% (measured when the test was written). The bounds leave ~50% headroom on KLD and ~2 points on
// top-1: a broken codebook, rotation or norm correction moves KLD by 5-50x (turbo2 alone is 4x turbo3).
#include <gtest/gtest.h>

#include <cstring>

#include "eval/kld.h"
#include "eval/token_rows.h"
#include "model/model.h"
#include "test_util.h"

namespace polykv {
namespace {

TEST(KvQualityGate, DefaultCompressedCacheStaysCloseToF32) {
  const std::string dir = test::fixtures_dir() + "/models/trained";
  auto model = Model::load(dir + "/trained_llama.gguf");
  const TokenRows all = read_token_rows(dir + "/ppl_dev_ids.i32", 2048);
  std::vector<int32_t> slice;
  for (int r = 0; r < 4; ++r) {
    const auto row = all.row(r);
    slice.insert(slice.end(), row.begin(), row.begin() + 512);
  }
  const TokenRows rows = split_into_rows(slice, 512);
  ThreadPool pool(2);
  KldOptions opts;
  opts.ref = {"f32", "f32"};
  opts.test = {"q8_0", "turbo3"};
  const KldResult r = evaluate_kld(*model, rows, pool, opts);
  std::printf("q8_0/turbo3 vs f32 on 4 x 512: mean KLD %.5f, top-1 %.4f, ppl %.4f (ref %.4f)\n", r.mean_kld,
              r.top1_agreement, r.ppl, r.ref_ppl);
  EXPECT_EQ(r.n_positions, 4 * 511);
  EXPECT_LT(r.mean_kld, 0.019);
  EXPECT_GT(r.top1_agreement, 0.94);
  EXPECT_LT(r.ppl / r.ref_ppl, 1.03);
}

}  // namespace
}  // namespace polykv
