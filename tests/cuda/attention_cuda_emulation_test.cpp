// The CUDA attention kernels (attention_cuda_kernels.cuh, attention_cuda_decode*.cuh, the tensor-core
// prefill kernels) compiled as plain C++ and run on the CPU, against attention_ref on the cases of
// attention_cuda_cases.h. No GPU needed: this checks the kernels' logic (work decomposition, indexing,
// masking, online softmax, split-K merge, rotation, head parts, device-side lengths) wherever the CUDA
// build is compiled; the GPU test checks the same cases on the device.
//
// Emulation (attention_emulation.h, attention_emulation_fibers.h): a block is 128 fibers on the test's
// thread; __syncthreads is a barrier of the block, __shfl_xor_sync a per-warp exchange between two warp
// barriers; __shared__ variables are function statics (blocks run one after another); dynamic shared
// memory is one buffer filled with NaN before each kernel. Grid and launch shape come from the
// launcher's own plan (attention_cuda_plan.h); only the <<<>>> launches are re-spelled. Not covered:
// device-only behaviour (alignment faults, memory-model races between barriers, register spills, the
// CUDA half conversion intrinsic).
//
// This file: every type as K and V, head sizes, small steps, GQA and head parts, windows, softcap,
// odd blocks, loose bounds, lanes8 splits, shared-prefix cascades, the embedded model's shape, one split
// at small depths. attention_emulation_prefix_test.cpp: the prefix pass's kernels;
// attention_emulation_decode8_test.cpp: the specialized lanes8 kernels; attention_emulation_sinks_test.cpp:
// attention sinks and sliding windows.
#include "attention_emulation.h"

namespace polykv {
namespace {

TEST(CudaAttentionEmulation, EveryTypeAsKAndAsVDecode) {
  uint32_t seed = 1;
  const int n = int(std::size(kAllKvTypes));
  for (int i = 0; i < n; ++i) {
    Case c;
    c.kt = kAllKvTypes[i], c.vt = kAllKvTypes[(i + 3) % n], c.head_dim = 64, c.seed = seed++;
    c.seqs = {{0, 1}, {36, 1}, {299, 1}};
    expect_ok(c, attn::Kernel::Decode, true);
  }
}

TEST(CudaAttentionEmulation, EveryTypeAsKAndAsVPrefill) {
  uint32_t seed = 50;
  const int n = int(std::size(kAllKvTypes));
  for (int i = 0; i < n; ++i) {
    Case c;
    c.kt = kAllKvTypes[i], c.vt = kAllKvTypes[(i + 5) % n], c.head_dim = 64, c.seed = seed++;
    c.seqs = {{20, 37}, {0, 5}};
    expect_ok(c, attn::Kernel::Tiled, false);
  }
}

TEST(CudaAttentionEmulation, HeadSizes) {
  uint32_t seed = 100;
  for (int hd : {128, 256, 512}) {
    Case c;
    c.kt = KvType::Turbo3T, c.vt = KvType::Turbo3, c.head_dim = hd, c.n_head_kv = 1, c.seed = seed++;
    c.seqs = {{0, 1}, {200, 1}};
    expect_ok(c, attn::Kernel::Decode, true);
    c.kt = KvType::Q8_0, c.vt = KvType::Turbo4T, c.seed = seed++;
    c.seqs = {{180, 20}};
    expect_ok(c, attn::Kernel::Tiled, true);
  }
}

TEST(CudaAttentionEmulation, SmallStepsGqaAndHeadParts) {
  uint32_t seed = 200;
  Case c;
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3, c.head_dim = 64, c.seed = seed++;
  c.seqs = {{150, 3}, {0, 2}};  // 4 heads x 3 tokens: the small tiled shape
  expect_ok(c, attn::Kernel::Tiled, true);
  c.head_dim = 128, c.seed = seed++;  // the small shape with two rows per thread in the accumulation
  expect_ok(c, attn::Kernel::Tiled, true);
  c.head_dim = 64;
  c.group = 1, c.n_head_kv = 3, c.seqs = {{150, 3}, {9, 4}}, c.seed = seed++;  // 4 tokens of 1 head: decode
  expect_ok(c, attn::Kernel::Decode, true);
  c.window = 3, c.seed = seed++;  // each of the 4 tokens of a block sees a different window
  expect_ok(c, attn::Kernel::Decode, true);
  c.window = 0;
  c.group = 8, c.n_head_kv = 1, c.seqs = {{170, 1}, {3, 1}}, c.seed = seed++;  // two head parts of 4
  expect_ok(c, attn::Kernel::Decode, true);
  c.group = 6, c.seed = seed++;  // a partial second head part
  expect_ok(c, attn::Kernel::Decode, true);
  c.head_dim = 512, c.group = 32, c.seqs = {{40, 2}}, c.seed = seed++;  // tiled, 16 rows: two head parts
  expect_ok(c, attn::Kernel::Tiled, false);
}

TEST(CudaAttentionEmulation, WindowSoftcapAndSplitPrefill) {
  uint32_t seed = 300;
  for (int window : {0, 1, 50})
    for (float softcap : {0.0f, 20.0f}) {
      Case c;
      c.kt = KvType::F16, c.vt = KvType::Q4_0, c.head_dim = 64, c.window = window, c.softcap = softcap, c.seed = seed++;
      c.seqs = {{0, 1}, {250, 1}};
      expect_ok(c, attn::Kernel::Decode, true);
      c.seqs = {{150, 40}}, c.seed = seed++;
      expect_ok(c, attn::Kernel::Tiled, true);
    }
}

TEST(CudaAttentionEmulation, SharedBlocksOddBlockSizesAndLooseBounds) {
  uint32_t seed = 400;
  Case c;
  c.kt = KvType::BF16, c.vt = KvType::Turbo2T, c.head_dim = 64, c.block_tokens = 7, c.seed = seed++;
  c.seqs = {{210, 1}, {180, 1, 0, 20}, {150, 1, 0, 20}, {30, 1}};
  expect_ok(c, attn::Kernel::Decode, true);
  c.seqs = {{100, 1}, {140, 9, 0, 10}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  // Host bounds far above the real batch: lengths come from the (device) arrays.
  c.block_tokens = 16, c.seqs = {{0, 1}, {260, 1}}, c.extra_kv_bound = 3000, c.seed = seed++;
  expect_ok(c, attn::Kernel::Decode, true);
  c.n_head_kv = 1, c.seqs = {{0, 3}, {90, 20}}, c.extra_nq_bound = 40, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
}

// The lanes8 decode plans size their key splits to one wave at the kernel's occupancy (a second,
// mostly idle wave costs up to a third at 131072 keys): Llama-3.1-8B's attention on an H200
// (132 multiprocessors, 8 KV heads).
TEST(CudaAttentionEmulation, Lanes8SplitsFillOneWave) {
  constexpr int kSms = 132, kHeadKv = 8;
  for (int n_kv : {4096, 32768, 131072}) {
    const cuda::KvLayerDevice L{KvType::Q8_0, KvType::Turbo3T, 64, kHeadKv, 128, 128,
                                kv_head_bytes(KvType::Q8_0, 128), kv_head_bytes(KvType::Turbo3T, 128),
                                nullptr, 0, 0};
    AttentionParams p;
    p.n_head = 32;
    p.scale = 0.088f;
    const cuda::AttentionBatchDevice b{1, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, n_kv};
    for (attn::DecodeVariant v : {attn::DecodeVariant::Lanes8, attn::DecodeVariant::Lanes8x4}) {
      const VariantScope scope(v);
      const attn::Plan P = attn::plan_attention(L, p, b, kSms);
      const int slots = attn::decode8_plan_blocks(v, 128, L.k_type, L.v_type) * kSms, blocks = P.n_splits * kHeadKv;
      EXPECT_LE(blocks, slots) << n_kv << " keys: " << plan_name(P);
      if (n_kv == 131072) EXPECT_GE(blocks, slots * 9 / 10) << plan_name(P);
      EXPECT_GE(int64_t(P.chunk) * P.n_splits, n_kv) << plan_name(P);
    }
  }
}

// Shared prefixes read once for a group's queries (the prefix pass) and merged with each sequence's
// own keys: decode and multi-token steps, a group next to unshared sequences, a sequence of a group
// whose prefix is its whole context but the queries, empty groups (a graph sized for more), windows
// and softcap.
TEST(CudaAttentionEmulation, SharedPrefixCascade) {
  uint32_t seed = 500;
  Case c;
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3, c.head_dim = 64, c.seed = seed++;
  // 0 owns 230 keys; 1, 2 share its first 12 blocks (192 keys); 3 shares nothing; 4 and 5 share 2
  // blocks of 3 (another group).
  c.seqs = {{229, 1}, {200, 1, 0, 12}, {192, 1, 0, 12}, {40, 1}, {60, 1, 3, 2}, {33, 1, 3, 2}};
  c.prefix = {{0, 3, 12}, {3, 3, 2}};
  expect_ok(c, attn::Kernel::Decode, true);
  c.extra_prefix_groups = 2, c.seed = seed++;
  expect_ok(c, attn::Kernel::Decode, true);
  c.extra_prefix_groups = 0;
  c.seqs = {{220, 6}, {200, 5, 0, 12}, {192, 7, 0, 12}, {40, 2}, {60, 3, 3, 2}, {33, 1, 3, 2}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  c.window = 100, c.softcap = 25.0f, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  c.seqs = {{229, 1}, {200, 1, 0, 12}, {192, 1, 0, 12}, {40, 1}, {60, 1, 3, 2}, {33, 1, 3, 2}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Decode, true);
  c.window = 0, c.softcap = 0.0f;
  c.kt = KvType::Turbo4T, c.vt = KvType::F16, c.head_dim = 128, c.group = 8, c.n_head_kv = 1;  // head parts
  c.seqs = {{150, 1}, {170, 1, 0, 9}, {144, 1, 0, 9}}, c.prefix = {{0, 3, 9}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Decode, true);
}

// The embedded model's shape (head_dim 128, 2 KV heads, GQA 2, 256-token blocks) as the model runs it
// on the GPU: a 38-token prompt, then single-token decode steps, with the launch bound bucketed to 256
// keys (CudaBackend::kv_bucket). Its q8_0/q8_0 run hung on the H200 (2026-11-30).
void embedded_model_steps_with(KvType kt, KvType vt) {
  Case c;
  c.kt = kt, c.vt = vt, c.head_dim = 128, c.n_head_kv = 2, c.group = 2, c.block_tokens = 256, c.seed = 900;
  c.seqs = {{0, 38}};
  c.extra_kv_bound = 256 - 38;
  {
    const Ran r = run_case(c);
    EXPECT_LE(r.result.worst, attn_test::kBound) << attn_test::describe(c) << "\n  plan: " << plan_name(r.plan);
  }
  for (int p = 38; p < 42; ++p) {
    c.seqs = {{p, 1}};
    c.extra_kv_bound = 256 - (p + 1);
    const Ran r = run_case(c);
    EXPECT_LE(r.result.worst, attn_test::kBound) << attn_test::describe(c) << "\n  plan: " << plan_name(r.plan);
  }
}

void embedded_model_steps(KvType kt, KvType vt) {
  for (attn::DecodeVariant v : kVariants) {
    const VariantScope scope(v);
    embedded_model_steps_with(kt, vt);
  }
}

// Single-token decode at small depths with the launch bound the CUDA backend uses (its kv_bucket:
// 256, then powers of two): bounds up to attn::one_split_keys() (256 by default) make ONE key split
// whose block writes the normalized rows (no partials, no merge); larger ones split as before. Also
// with the one-split plan switched off (the old plan) and forced up to 1024 keys.
int backend_bucket(int keys) {
  int b = 256;
  while (b < keys) b *= 2;
  return b;
}

struct OneSplitScope {
  int saved = attn::one_split_keys();
  explicit OneSplitScope(int keys) { attn::one_split_keys() = keys; }
  ~OneSplitScope() { attn::one_split_keys() = saved; }
};

TEST(CudaAttentionEmulation, OneSplitAtSmallDepths) {
  const std::pair<KvType, KvType> pairs[] = {{KvType::Q8_0, KvType::Turbo3T}, {KvType::F16, KvType::F16},
                                             {KvType::Turbo3T, KvType::Turbo3T}};
  uint32_t seed = 1200;
  for (int one_split : {256, 0, 1024}) {
    const OneSplitScope scope(one_split);
    for (const auto& [kt, vt] : pairs)
      for (int depth : {1, 7, 255, 256, 257, 1000}) {
        Case c;
        c.kt = kt, c.vt = vt, c.head_dim = 128, c.n_head_kv = 2, c.group = 4, c.block_tokens = 64, c.seed = seed++;
        c.seqs = {{depth - 1, 1}};
        c.extra_kv_bound = backend_bucket(depth) - depth;
        const bool one = backend_bucket(depth) <= one_split;
        for (attn::DecodeVariant v : kVariants) {
          const VariantScope vs(v);
          const Ran r = run_case(c);
          const std::string what = attn_test::describe(c) + " one_split_keys " + std::to_string(one_split) +
                                   "\n  plan: " + plan_name(r.plan);
          EXPECT_LE(r.result.worst, attn_test::kBound) << what << "\n  worst row: " << r.result.where;
          EXPECT_EQ(r.plan.n_splits == 1, one) << what;  // bounds of >= 256 keys split otherwise
          if (one) EXPECT_EQ(r.plan.partial_o_floats, 0u) << what;
        }
      }
  }
}

TEST(CudaAttentionEmulation, EmbeddedModelShapeQ8) { embedded_model_steps(KvType::Q8_0, KvType::Q8_0); }
TEST(CudaAttentionEmulation, EmbeddedModelShapeF16) { embedded_model_steps(KvType::F16, KvType::F16); }
TEST(CudaAttentionEmulation, EmbeddedModelShapeTurbo) { embedded_model_steps(KvType::Turbo3T, KvType::Turbo3T); }

}  // namespace
}  // namespace polykv
