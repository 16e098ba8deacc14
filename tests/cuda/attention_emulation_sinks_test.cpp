// Attention sinks and sliding windows (issue #11) in the CPU emulation of the CUDA attention kernels
// (attention_emulation.h).
#include "attention_emulation.h"

namespace polykv {
namespace {

// ---- Attention sinks (gpt-oss) and sliding windows (issue #11) ------------------------------------
// A sink joins a row's softmax denominator exactly once, wherever the row is finalized: the decode
// kernels' one-split end, the f32 tiled and tensor-core kernels without splits, merge_kernel after key
// splits and after a prefix pass (attention_cuda_kernels.cuh row_norm). gpt-oss's shape: GQA 8 (two
// head parts of 4 rows in decode), head sizes 64 (gpt-oss) and 128, windows 128 and 7 (smaller than a
// pool block) with contexts beyond them. make_sinks gives one head a sink far above every score.
void expect_sinks_ok(Case c) {
  c.sinks = true;
  c.seqs = {{0, 1}, {299, 1}};  // decode at depth 1 and 300: key splits
  expect_ok(c, attn::Kernel::Decode, true);
  c.seqs = {{0, 1}, {100, 1}}, c.seed += 1000;  // bound <= 256: one split, no merge
  expect_ok(c, attn::Kernel::Decode, true);
  c.seqs = {{150, 20}}, c.seed += 1000;  // prefill, two key splits merged
  expect_ok(c, attn::Kernel::Tiled, true);
  c.seqs = {{0, 37}}, c.seed += 1000;  // prefill without splits: the kernel writes the rows
  expect_ok(c, attn::Kernel::Tiled, false);
  c.seqs = {{150, 2}, {3, 2}}, c.seed += 1000;  // the small tiled shape, split
  expect_ok(c, attn::Kernel::Tiled, true);
  c.seqs = {{40, 2}, {3, 2}}, c.seed += 1000;  // the small tiled shape, one split
  expect_ok(c, attn::Kernel::Tiled, false);
}

TEST(CudaAttentionEmulation, SinksEveryPath) {
  uint32_t seed = 1300;
  const std::pair<KvType, KvType> pairs[] = {{KvType::Q8_0, KvType::Turbo3T}, {KvType::F16, KvType::F16}};
  for (int hd : {64, 128})
    for (const auto& [kt, vt] : pairs) {
      if (hd == 128 && kt == KvType::F16) continue;  // (time: the emulation is slow)
      Case c;
      c.kt = kt, c.vt = vt, c.head_dim = hd, c.n_head_kv = 2, c.group = 8, c.block_tokens = 16, c.seed = seed++;
      expect_sinks_ok(c);
    }
}

TEST(CudaAttentionEmulation, SinksWithSlidingWindows) {
  uint32_t seed = 1400;
  for (int window : {128, 7})
    for (int hd : {64, 128}) {
      Case c;
      c.kt = KvType::Q8_0, c.vt = KvType::Q8_0, c.head_dim = hd, c.n_head_kv = 1, c.group = 8, c.block_tokens = 16;
      c.window = window, c.seed = seed++;
      expect_sinks_ok(c);
    }
  // Windows without sinks too (the model's other layers): a window of 7 inside blocks of 64.
  Case c;
  c.kt = KvType::F16, c.vt = KvType::Turbo3T, c.head_dim = 64, c.group = 8, c.n_head_kv = 1, c.block_tokens = 64;
  c.window = 7, c.seed = seed++;
  c.seqs = {{0, 1}, {299, 1}, {40, 1}};
  expect_ok(c, attn::Kernel::Decode, true);
  c.seqs = {{150, 20}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
}

// Sinks over shared prefixes: the prefix pass's partials and the sequences' own are merged, the sink
// added once after both (decode and multi-token steps, each prefix kernel, a window over the prefix).
TEST(CudaAttentionEmulation, SinksSharedPrefix) {
  uint32_t seed = 1500;
  Case c;
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = 64, c.group = 8, c.sinks = true, c.seed = seed++;
  c.seqs = {{229, 1}, {200, 1, 0, 12}, {192, 1, 0, 12}, {40, 1}, {60, 1, 3, 2}, {33, 1, 3, 2}};
  c.prefix = {{0, 3, 12}, {3, 3, 2}};
  expect_ok(c, attn::Kernel::Decode, true);
  c.seqs = {{220, 6}, {200, 5, 0, 12}, {192, 7, 0, 12}, {40, 2}, {60, 3, 3, 2}, {33, 1, 3, 2}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  c.window = 128, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  Case p = prefix_case(KvType::Q8_0, KvType::Turbo3T, 64, 20, 19, 1, seed++);  // 80 rows: wide with Wide
  p.sinks = true;
  expect_prefix_ok(p);
  p = prefix_case(KvType::F16, KvType::F16, 128, 5, 20, 3, seed++);  // 60 rows: the 64-row kernel
  p.sinks = true;
  p.window = 7;
  expect_prefix_ok(p);
}

}  // namespace
}  // namespace polykv
