// The prefix pass over shared prefixes in the CPU emulation of the CUDA attention kernels
// (attention_emulation.h): many sequences sharing a prefix of awkward length with private suffixes,
// each prefix kernel (f32, 64-row, 128-row and 256-row tensor-core kernels), windows and softcap, and
// the plans at the agents benchmark's shape.
#include "attention_emulation.h"

namespace polykv {
namespace {

TEST(CudaAttentionEmulation, PrefixPassManySequences) {
  // 40 sequences x GQA 4 = 160 rows: two wide blocks, the second partly empty; 301 shared keys.
  expect_prefix_ok(prefix_case(KvType::Q8_0, KvType::Turbo3T, 64, 40, 43, 1, 600));
  // Turbo K (the queries rotated in the prologue's two halves), 3 tokens each (multi-token steps).
  expect_prefix_ok(prefix_case(KvType::Turbo4T, KvType::F16, 64, 23, 30, 3, 601));
  // 5 and 16 sequences: the 64-row shapes (20 and 64 rows); 2: the small f32 shape.
  expect_prefix_ok(prefix_case(KvType::F16, KvType::F16, 64, 16, 20, 1, 602));
  expect_prefix_ok(prefix_case(KvType::Q8_0, KvType::Q8_0, 64, 5, 20, 1, 603));
  expect_prefix_ok(prefix_case(KvType::Q8_0, KvType::Q8_0, 64, 2, 20, 1, 604));
}

// The 256-row kernel at head size 128 (the others run these shapes in the tests above): 40 sequences
// x GQA 4 = 160 rows (warps 5..7 without rows), 301 shared keys in splits of 128 (4 tiles: both
// stages, the tile-ahead addresses, a partial last tile); f16 K and V (the 2-product path), then
// q8_0 / turbo3t with a window and softcap (the masked path), then 40 x 2 tokens = 320 rows (2 query
// tiles, the second partly empty) with turbo K (queries rotated in the prologue's parts).
TEST(CudaAttentionEmulation, PrefixPass256Rows) {
  const std::vector<attn::PrefixKernel> k256 = {attn::PrefixKernel::Wide256};
  expect_prefix_ok(prefix_case(KvType::F16, KvType::F16, 128, 40, 43, 1, 620), k256);
  Case c = prefix_case(KvType::Q8_0, KvType::Turbo3T, 128, 40, 43, 1, 621);
  c.window = 100, c.softcap = 30.0f;
  expect_prefix_ok(c, k256);
  expect_prefix_ok(prefix_case(KvType::Turbo3T, KvType::Q8_0, 128, 40, 20, 2, 622), k256);
}

TEST(CudaAttentionEmulation, PrefixPassWideHeadSize128WindowSoftcap) {
  Case c = prefix_case(KvType::Q8_0, KvType::Turbo3T, 128, 20, 19, 1, 610);  // 80 rows, 133 keys
  expect_prefix_ok(c);
  c.window = 60, c.softcap = 30.0f, c.seed = 611;  // rows whose window starts inside the prefix
  expect_prefix_ok(c);
}

// The prefix plans at the benchmark's shape (H200: 132 multiprocessors; Llama-3.1-8B: 8 KV heads, GQA
// 4, head_dim 128; one group over 32768 keys): 4 agents the small f32 shape, 16 the 64-row kernel,
// 64 the wide kernel in one wave at its 2 blocks per multiprocessor (8 x 2 query tiles x 16 splits).
TEST(CudaAttentionEmulation, PrefixPlansAtTheAgentsBenchShape) {
  constexpr int kSms = 132, kHeadKv = 8, kKeys = 32768;
  const cuda::KvLayerDevice L{KvType::Q8_0, KvType::Turbo3T, 64, kHeadKv, 128, 128,
                              kv_head_bytes(KvType::Q8_0, 128), kv_head_bytes(KvType::Turbo3T, 128),
                              nullptr, 0, 0};
  AttentionParams p;
  p.n_head = 32;
  p.scale = 0.088f;
  const PrefixScope scope(attn::PrefixKernel::Wide);
  for (int agents : {4, 16, 64}) {
    cuda::AttentionBatchDevice b{agents, nullptr, nullptr, nullptr, nullptr, nullptr, agents, 1, kKeys + 64};
    b.n_prefix = 1, b.max_prefix_q = agents, b.max_prefix_kv = kKeys;
    const attn::Plan P = attn::plan_prefix(L, p, b, kSms);
    EXPECT_EQ(P.rows, agents == 4 ? attn::kSmallRows : agents == 16 ? attn::large_rows(128) : attn::kPrefixRows)
        << agents << " agents: " << plan_name(P);
    EXPECT_EQ(P.mma, agents > 4) << plan_name(P);
    EXPECT_GE(int64_t(P.chunk) * P.n_splits, kKeys) << plan_name(P);
    if (agents == 64) {
      EXPECT_EQ(P.grid_y * P.grid_z, kHeadKv * 2) << plan_name(P);
      EXPECT_LE(P.n_splits * P.grid_y * P.grid_z, attn::kPrefixBlocksPerSm * kSms) << plan_name(P);
      EXPECT_GE(P.n_splits * P.grid_y * P.grid_z, attn::kPrefixBlocksPerSm * kSms * 9 / 10) << plan_name(P);
    }
  }
  // The default (Wide256): 64 agents take the 256-row kernel, one block per KV head and split, one
  // wave at one block per multiprocessor (8 x 16 splits of 2048 keys = 128 blocks); 16 agents as before.
  const PrefixScope scope256(attn::PrefixKernel::Wide256);
  for (int agents : {16, 64}) {
    cuda::AttentionBatchDevice b{agents, nullptr, nullptr, nullptr, nullptr, nullptr, agents, 1, kKeys + 64};
    b.n_prefix = 1, b.max_prefix_q = agents, b.max_prefix_kv = kKeys;
    const attn::Plan P = attn::plan_prefix(L, p, b, kSms);
    EXPECT_EQ(P.rows, agents == 16 ? attn::large_rows(128) : attn::kPrefix256Rows) << agents << " agents: " << plan_name(P);
    EXPECT_GE(int64_t(P.chunk) * P.n_splits, kKeys) << plan_name(P);
    if (agents == 64) {
      EXPECT_EQ(P.grid_y * P.grid_z, kHeadKv) << plan_name(P);
      EXPECT_LE(P.n_splits * P.grid_y * P.grid_z, kSms) << plan_name(P);
      EXPECT_GE(P.n_splits * P.grid_y * P.grid_z, kSms * 9 / 10) << plan_name(P);
    }
  }
}

}  // namespace
}  // namespace polykv
