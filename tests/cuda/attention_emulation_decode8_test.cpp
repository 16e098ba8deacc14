// The lanes8 decode kernels specialized per (K, V) type pair (attention_cuda_decode8_fixed.cuh) in the
// CPU emulation of the CUDA attention kernels (attention_emulation.h).
#include "attention_emulation.h"

namespace polykv {
namespace {

// The lanes8 kernel specialized per (K, V) pair at head size 128 (attention_cuda_decode8_fixed.cuh) in each
// mode of attn::decode8_kernels(): generic (the runtime-dispatch kernel), fixed (specialized, decode8s) and
// packed (specialized, packed trellis decoder): every specialized pair plus one without a specialization,
// several sequences, splits, a window and softcap, odd block sizes; each mode must pick the kernel it names
// and stay within the bound. Plans of specialized kernels fill one wave at their 4 blocks per multiprocessor.
TEST(CudaAttentionEmulation, Decode8FixedPairsEveryMode) {
  std::vector<std::pair<KvType, KvType>> pairs;
  for (const attn::Decode8Pair& p : attn::kDecode8FixedPairs) pairs.push_back({p.k, p.v});
  pairs.push_back({KvType::Turbo4T, KvType::Turbo2T});  // no specialization: generic in every mode
  uint32_t seed = 3100;
  for (attn::Decode8Kernels mode : {attn::Decode8Kernels::Generic, attn::Decode8Kernels::Fixed,
                                    attn::Decode8Kernels::Packed, attn::Decode8Kernels::Pairs}) {
    const D8Scope d8(mode);
    const VariantScope vs(attn::DecodeVariant::Lanes8);
    for (const auto& [kt, vt] : pairs)
      for (int shape = 0; shape < 3; ++shape) {
        if (mode == attn::Decode8Kernels::Generic && shape == 1) continue;  // the generic kernel's own tests cover it
        g_emu_early = shape == 2 ? 1 : 0;  // shape 2: shape 0 with the early-start path
        Case c;
        c.kt = kt, c.vt = vt, c.head_dim = 128, c.n_head_kv = 2, c.group = 4, c.seed = seed++;
        if (shape == 0 || shape == 2) {
          c.block_tokens = 16;
          c.seqs = {{0, 1}, {37, 1}, {290, 1}};
        } else {
          c.block_tokens = 24;
          c.seqs = {{420, 1}};
          c.window = 150;
          c.softcap = 30.0f;
        }
        const Ran r = run_case(c);
        g_emu_early = 0;
        const bool fixed = attn::decode8_fixed(128, kt, vt, mode);
        const bool picked = attn::decode8_pick<128>(kt, vt, mode, &attn::decode8_kernel<128, 4>, [](auto) {});
        const std::string what = attn_test::describe(c) + " mode " + std::to_string(int(mode)) +
                                 "\n  plan: " + plan_name(r.plan);
        EXPECT_EQ(picked, fixed) << what;
        EXPECT_EQ(fixed, mode != attn::Decode8Kernels::Generic && kt != KvType::Turbo4T) << what;
        EXPECT_EQ(r.plan.variant, attn::DecodeVariant::Lanes8) << what;
        EXPECT_LE(r.result.worst, attn_test::kBound) << what << "\n  worst row: " << r.result.where;
      }
  }
}

// One wave at the specialized kernels' occupancy: q8_0/turbo3t at 131072 keys on an H200 (132
// multiprocessors, 8 KV heads) plans 66 splits (528 blocks: 4 per multiprocessor), the generic kernel 49.
TEST(CudaAttentionEmulation, Decode8FixedSplitsFillOneWave) {
  const cuda::KvLayerDevice L{KvType::Q8_0, KvType::Turbo3T, 64, 8, 128, 128, kv_head_bytes(KvType::Q8_0, 128),
                              kv_head_bytes(KvType::Turbo3T, 128), nullptr, 0, 0};
  AttentionParams p;
  p.n_head = 32;
  p.scale = 0.088f;
  const cuda::AttentionBatchDevice b{1, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, 131072};
  const VariantScope vs(attn::DecodeVariant::Lanes8);
  for (attn::Decode8Kernels mode :
       {attn::Decode8Kernels::Generic, attn::Decode8Kernels::Packed, attn::Decode8Kernels::Pairs}) {
    const D8Scope d8(mode);
    const attn::Plan P = attn::plan_attention(L, p, b, 132);
    const int per_sm = mode == attn::Decode8Kernels::Generic ? 3 : 4;
    EXPECT_LE(P.n_splits * 8, per_sm * 132) << plan_name(P);
    EXPECT_GE(P.n_splits * 8, per_sm * 132 * 9 / 10) << plan_name(P);
  }
}

// The early start's plan leaves the kv_store's block slots free (cuda::attention reserves (2 x rows x KV heads
// + 3) / 4 + 1 = 5 at one row and 8 KV heads): at 32768 and 131072 keys (and a bound where the rounding
// would fill every slot) the specialized kernels' one wave has room for them.
TEST(CudaAttentionEmulation, Decode8EarlyPlanLeavesRoomForTheStore) {
  const cuda::KvLayerDevice L{KvType::Q8_0, KvType::Turbo3T, 64, 8, 128, 128, kv_head_bytes(KvType::Q8_0, 128),
                              kv_head_bytes(KvType::Turbo3T, 128), nullptr, 0, 0};
  AttentionParams p;
  p.n_head = 32;
  p.scale = 0.088f;
  const VariantScope vs(attn::DecodeVariant::Lanes8);
  const D8Scope d8(attn::Decode8Kernels::Pairs);
  for (int kv : {32768, 131072, 66 * 2048, 66 * 512, 5000}) {
    const cuda::AttentionBatchDevice b{1, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, kv};
    const attn::Plan P = attn::plan_attention(L, p, b, 132, 5);
    EXPECT_LE(P.n_splits * 8, 4 * 132 - 5) << kv << ": " << plan_name(P);
    if (kv >= 32768) EXPECT_GE(P.n_splits * 8, (4 * 132 - 5) * 85 / 100) << kv << ": " << plan_name(P);
  }
}

}  // namespace
}  // namespace polykv
