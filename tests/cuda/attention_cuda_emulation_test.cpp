// The CUDA attention kernels run on the CPU (the emulation of attention_cuda_emulation.h) against attention_ref on
// the cases of attention_cuda_cases.h: every K/V type, head size and plan shape, the specialized and tensor-core
// decode kernels, shared-prefix passes, sinks and sliding windows. No GPU needed; the GPU tests run the same
// cases on the device.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attention_cuda_emulation.h"

namespace polykv {
namespace {

using attn_test::Case;
using attn_test::SeqSpec;
namespace attn = cuda::attn;

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

// Head size 32 (qwen2's fixture; small models): the slots decode kernel (2 lanes per key), the f32 tiled
// kernel with its 64-row shape only (no 16-row one: plan_tiled_rows), and the merge, every type as K and V.
TEST(CudaAttentionEmulation, HeadSize32EveryTypeAsKAndAsV) {
  uint32_t seed = 70;
  const int n = int(std::size(kAllKvTypes));
  for (int i = 0; i < n; ++i) {
    Case c;
    c.kt = kAllKvTypes[i], c.vt = kAllKvTypes[(i + 3) % n], c.head_dim = 32, c.seed = seed++;
    c.seqs = {{0, 1}, {36, 1}, {299, 1}};
    expect_ok(c, attn::Kernel::Decode, true);
    c.seqs = {{20, 37}, {0, 5}};
    c.seed = seed++;
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

// The tiled tensor-core kernel at head size 256 (attention_mma_kernel<256>, 64 rows: Qwen3.5's and Gemma's
// prefill), against the f32 kernel's bound: Qwen3.5's attention shape (GQA 4, q8_0 K / turbo3t V, two prompt
// chunks of uneven length, one past a 64-row block), Gemma's (softcap, sliding window, f16) and turbo K, each
// with key splits and without.
TEST(CudaAttentionEmulation, TiledMmaHeadSize256) {
  uint32_t seed = 170;
  struct Shape {
    KvType kt, vt;
    int window;
    float softcap;
  };
  for (const Shape& sh : {Shape{KvType::Q8_0, KvType::Turbo3T, 0, 0.0f}, Shape{KvType::F16, KvType::F16, 50, 30.0f},
                          Shape{KvType::Turbo3T, KvType::Q4_0, 0, 0.0f}}) {
    for (auto seqs : {std::vector<SeqSpec>{{0, 70}, {33, 17}}, std::vector<SeqSpec>{{400, 24}}}) {
      Case c;
      c.kt = sh.kt, c.vt = sh.vt, c.head_dim = 256, c.n_head_kv = 2, c.group = 4, c.window = sh.window,
      c.softcap = sh.softcap, c.seqs = seqs, c.seed = seed++;
      for (attn::DecodeVariant v : kVariants) {
        const VariantScope scope(v);
        const Ran r = run_case(c);
        EXPECT_LE(r.result.worst, attn_test::kBound)
            << attn_test::describe(c) << "\n  plan: " << plan_name(r.plan) << "\n  worst row: " << r.result.where;
        EXPECT_EQ(r.plan.kernel, attn::Kernel::Tiled) << plan_name(r.plan);
        EXPECT_EQ(r.plan.mma, v != attn::DecodeVariant::Slots) << plan_name(r.plan);
        EXPECT_EQ(r.plan.rows, r.plan.mma ? attn::kMmaTiledRows : attn::large_rows(256)) << plan_name(r.plan);
      }
    }
  }
}

// Long prompt passes (at least attn::kPrefill256MinRows rows a KV head) on the 256-row kernel with its
// partials merged (attn::prefill256): scaled-product types (q8_0 / turbo3t, f16), split ones (bf16 K,
// q4_0 V), a sliding window with softcap, attention sinks, GQA 4 and 8, head sizes 64 and 128, a second
// shorter sequence and a sequence starting past a pool block boundary; against the reference's bound. With
// prefill256 off the same cases take the 64-row tiled kernel.
TEST(CudaAttentionEmulation, LongPrefillOn256RowKernel) {
  uint32_t seed = 1300;
  struct Shape {
    KvType kt, vt;
    int hd, group, window;
    float softcap;
    bool sinks;
  };
  for (const Shape& sh : {Shape{KvType::Q8_0, KvType::Turbo3T, 128, 4, 0, 0.0f, false},
                          Shape{KvType::F16, KvType::F16, 64, 8, 100, 30.0f, false},
                          Shape{KvType::BF16, KvType::Q4_0, 64, 4, 0, 0.0f, true}}) {
    Case c;
    c.kt = sh.kt, c.vt = sh.vt, c.head_dim = sh.hd, c.n_head_kv = 1, c.group = sh.group, c.window = sh.window,
    c.softcap = sh.softcap, c.sinks = sh.sinks, c.seed = seed++;
    c.seqs = {{37, 256}, {0, 90}};
    for (const bool wide : {true, false}) {
      const bool saved = attn::prefill256();
      attn::prefill256() = wide;
      const Ran r = run_case(c);
      attn::prefill256() = saved;
      EXPECT_LE(r.result.worst, attn_test::kBound)
          << attn_test::describe(c) << "\n  plan: " << plan_name(r.plan) << "\n  worst row: " << r.result.where;
      EXPECT_EQ(r.plan.kernel, attn::Kernel::Tiled) << plan_name(r.plan);
      EXPECT_EQ(r.plan.rows, wide ? attn::kPrefix256Rows : attn::kMmaTiledRows) << plan_name(r.plan);
    }
  }
  // Below the threshold (255 queries x GQA 4 = 1020 rows) the 64-row kernel.
  Case c;
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = 64, c.n_head_kv = 1, c.seqs = {{0, 255}}, c.seed = seed++;
  const Ran r = run_case(c);
  EXPECT_EQ(r.plan.rows, attn::kMmaTiledRows) << plan_name(r.plan);
  EXPECT_LE(r.result.worst, attn_test::kBound);
}

// The merge's serial O loop (POLYKV_CUDA_MERGE=serial, kept for A/B) on split decode and prefill rows of
// every head size; the other tests run the default grouped loop.
TEST(CudaAttentionEmulation, SerialMergeHeadSizes) {
  struct Restore {
    ~Restore() { attn::merge_grouped() = true; }
  } restore;
  attn::merge_grouped() = false;
  uint32_t seed = 150;
  for (int hd : {32, 64, 128, 256, 512}) {
    Case c;
    c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = hd, c.n_head_kv = 1, c.seed = seed++;
    c.seqs = {{0, 1}, {700, 1}};
    expect_ok(c, attn::Kernel::Decode, true);
    c.seqs = {{600, 20}};
    expect_ok(c, attn::Kernel::Tiled, true);
  }
}

// The tiled kernel's small shape (the plan before 2026-12-02; expect_ok runs both plans).
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

// More small multi-token steps (verify steps, short prompts), which the default plan runs on the decode
// kernel in query tiles of its 4 rows (expect_ok names the old plan's kernel and runs both): GQA groups
// of 2-32 (head parts), 2-9 rows, windows, softcaps, one split and key splits, head sizes 64-512.
TEST(CudaAttentionEmulation, SmallStepsOnTheDecodeKernel) {
  uint32_t seed = 250;
  Case c;
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = 128, c.seqs = {{299, 8}, {40, 5}, {7, 1}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  c.group = 2, c.n_head_kv = 2, c.seqs = {{600, 8}, {3, 2}}, c.seed = seed++;  // 2 rows of 2 heads per tile
  expect_ok(c, attn::Kernel::Tiled, true);
  c.group = 8, c.n_head_kv = 1, c.seqs = {{90, 4}}, c.seed = seed++;  // two head parts x 4 query tiles
  expect_ok(c, attn::Kernel::Tiled, false);
  c.group = 4, c.window = 5, c.seqs = {{200, 6}, {12, 8}}, c.seed = seed++;  // each row its own window
  expect_ok(c, attn::Kernel::Tiled, true);
  c.window = 0, c.softcap = 30.0f, c.kt = KvType::F16, c.vt = KvType::F16, c.seqs = {{1000, 7}}, c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  c.softcap = 0.0f, c.head_dim = 256, c.kt = KvType::Q8_0, c.vt = KvType::Q8_0, c.seqs = {{130, 2}, {0, 3}},
  c.seed = seed++;
  expect_ok(c, attn::Kernel::Tiled, true);
  c.head_dim = 512, c.group = 32, c.seqs = {{40, 2}}, c.seed = seed++;  // 8 head parts x 2 query tiles
  expect_ok(c, attn::Kernel::Tiled, false);
  c.head_dim = 64, c.group = 4, c.seqs = {{20, 9}}, c.seed = seed++;  // 9 rows: the tiled kernel in both plans
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

// The prefix pass's kernels (attention_cuda_plan.h PrefixKernel): many sequences sharing a prefix of
// awkward length (block size 7) with private suffixes, with each prefix kernel; the wide 128-row
// tensor-core kernel must be planned whenever a KV head has more than 64 sharing rows.
struct PrefixScope {
  attn::PrefixKernel saved = attn::prefix_kernel();
  explicit PrefixScope(attn::PrefixKernel k) { attn::prefix_kernel() = k; }
  ~PrefixScope() { attn::prefix_kernel() = saved; }
};
const char* prefix_kernel_name(attn::PrefixKernel k) {
  return k == attn::PrefixKernel::F32 ? "f32" : k == attn::PrefixKernel::Mma ? "mma64" : k == attn::PrefixKernel::Wide ? "wide128" : "wide256";
}

// n sequences sharing the first `blocks` blocks of sequence 0 (one group), n_q queries each, private
// suffixes of different lengths.
Case prefix_case(KvType kt, KvType vt, int hd, int n, int blocks, int n_q, uint32_t seed) {
  Case c;
  c.kt = kt, c.vt = vt, c.head_dim = hd, c.n_head_kv = 1, c.group = 4, c.block_tokens = 7, c.seed = seed;
  const int prefix = blocks * c.block_tokens;
  c.seqs.push_back({prefix + 9, n_q});
  for (int i = 1; i < n; ++i) c.seqs.push_back({prefix + (5 * i) % 23, n_q, 0, blocks});
  c.prefix = {{0, n, blocks}};
  return c;
}

constexpr attn::PrefixKernel kAllPrefixKernels[] = {attn::PrefixKernel::F32, attn::PrefixKernel::Mma,
                                                    attn::PrefixKernel::Wide, attn::PrefixKernel::Wide256};
void expect_prefix_ok(const Case& c, const std::vector<attn::PrefixKernel>& kernels = {std::begin(kAllPrefixKernels),
                                                                                       std::end(kAllPrefixKernels)}) {
  int rows = 0;  // rows sharing the prefix per KV head
  for (const SeqSpec& q : c.seqs) rows += q.n_q * c.group;
  for (attn::PrefixKernel k : kernels) {
    const PrefixScope scope(k);
    const Ran r = run_case(c);
    const std::string what = attn_test::describe(c) + "\n  prefix kernel " + prefix_kernel_name(k) +
                             ", prefix plan: " + plan_name(r.prefix_plan) + "\n  plan: " + plan_name(r.plan);
    EXPECT_LE(r.result.worst, attn_test::kBound) << what << "\n  worst row: " << r.result.where;
    // Wide256: beyond 128 rows the 256-row kernel, beyond 64 the 128-row one; Wide: beyond 64 the 128-row.
    const bool w256 = k == attn::PrefixKernel::Wide256 && rows > attn::kPrefixRows;
    const bool wide = !w256 && (k == attn::PrefixKernel::Wide || k == attn::PrefixKernel::Wide256) &&
                      rows > attn::large_rows(c.head_dim);
    EXPECT_EQ(r.prefix_plan.rows == attn::kPrefixRows, wide) << what;
    EXPECT_EQ(r.prefix_plan.rows == attn::kPrefix256Rows, w256) << what;
    if (k == attn::PrefixKernel::F32) EXPECT_FALSE(r.prefix_plan.mma) << what;
    if (k != attn::PrefixKernel::F32 && rows > attn::kSmallRows) EXPECT_TRUE(r.prefix_plan.mma) << what;
  }
}

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
// Each case runs both products (scaled: f16 values and f32 scales, two MMAs; split: hi / lo, three).
struct Products256Scope {
  attn::Prefix256Products saved = attn::prefix256_products();
  explicit Products256Scope(attn::Prefix256Products p) { attn::prefix256_products() = p; }
  ~Products256Scope() { attn::prefix256_products() = saved; }
};
TEST(CudaAttentionEmulation, PrefixPass256Rows) {
  const std::vector<attn::PrefixKernel> k256 = {attn::PrefixKernel::Wide256};
  for (attn::Prefix256Products products : {attn::Prefix256Products::Scaled, attn::Prefix256Products::Split}) {
    SCOPED_TRACE(products == attn::Prefix256Products::Scaled ? "scaled products" : "split products");
    const Products256Scope scope(products);
    expect_prefix_ok(prefix_case(KvType::F16, KvType::F16, 128, 40, 43, 1, 620), k256);
    Case c = prefix_case(KvType::Q8_0, KvType::Turbo3T, 128, 40, 43, 1, 621);
    c.window = 100, c.softcap = 30.0f;
    expect_prefix_ok(c, k256);
    expect_prefix_ok(prefix_case(KvType::Turbo3T, KvType::Q8_0, 128, 40, 20, 2, 622), k256);
  }
}

// The scaled products on every scaled-exact type as K and as V (per-32-value scales: q8_0, q4_0; per row:
// turbo, trellis, f16), and the split kernel that f32 / bf16 K or V take even with scaled products on.
TEST(CudaAttentionEmulation, PrefixPass256RowsScaledTypes) {
  const std::vector<attn::PrefixKernel> k256 = {attn::PrefixKernel::Wide256};
  const Products256Scope scope(attn::Prefix256Products::Scaled);
  EXPECT_TRUE(attn::prefix256_scaled(KvType::Q4_0, KvType::Turbo2T));
  EXPECT_FALSE(attn::prefix256_scaled(KvType::F32, KvType::Q8_0));
  EXPECT_FALSE(attn::prefix256_scaled(KvType::Q8_0, KvType::BF16));
  uint32_t seed = 630;
  for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Q8_0}, std::pair{KvType::Q4_0, KvType::Turbo3},
                               std::pair{KvType::Turbo4, KvType::Q4_0}, std::pair{KvType::Turbo2T, KvType::Turbo4T},
                               std::pair{KvType::F32, KvType::Q8_0}, std::pair{KvType::Q8_0, KvType::BF16}})
    expect_prefix_ok(prefix_case(kt, vt, 128, 40, 20, 1, seed++), k256);
  expect_prefix_ok(prefix_case(KvType::Q4_0, KvType::Turbo3T, 64, 40, 20, 1, seed++), k256);  // head size 64
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

// The lanes8 kernel specialized per (K, V) pair at head size 128 (attention_cuda_decode8_fixed.cuh) in each
// mode of attn::decode8_kernels(): generic (the runtime-dispatch kernel), fixed (specialized, decode8s) and
// packed (specialized, packed trellis decoder): every specialized pair plus one without a specialization,
// several sequences, splits, a window and softcap, odd block sizes; each mode must pick the kernel it names
// and stay within the bound. Plans of specialized kernels fill one wave at their 4 blocks per multiprocessor.
struct D8Scope {
  attn::Decode8Kernels saved = attn::decode8_kernels();
  explicit D8Scope(attn::Decode8Kernels k) { attn::decode8_kernels() = k; }
  ~D8Scope() { attn::decode8_kernels() = saved; }
};
struct SelfScope {
  attn::SelfEncode saved = attn::attention_self_encode();
  explicit SelfScope(attn::SelfEncode m) { attn::attention_self_encode() = m; }
  ~SelfScope() { attn::attention_self_encode() = saved; }
};

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

// The early start with self-encoded new rows (Args::self_kv): the pool's bytes of the query rows' own keys are junk
// while the kernel runs, so a row it did not encode itself (or encoded at the wrong place) shows in the outputs.
// Plain K and V (both encoded), turbo / trellis V (K encoded, V copied from the pool after the wait), turbo K (no
// self-encoding); new keys at a tile's start and end, across two tiles (blocks of 16 keys), 1-4 rows, two
// sequences; head sizes 64 and 128; the generic and the specialized kernels.
TEST(CudaAttentionEmulation, EarlyStartEncodesTheNewRowsItself) {
  const std::pair<KvType, KvType> pairs[] = {
      {KvType::F16, KvType::F16},     {KvType::Q8_0, KvType::Q8_0},    {KvType::Q4_0, KvType::Q4_0},
      {KvType::BF16, KvType::F16},    {KvType::BF16, KvType::Q4_0},    {KvType::Q8_0, KvType::Turbo3T},
      {KvType::Q8_0, KvType::Turbo3}, {KvType::Turbo3T, KvType::Turbo3T}};
  const std::vector<std::vector<attn_test::SeqSpec>> seqs = {{{0, 1}}, {{37, 1}}, {{47, 1}}, {{48, 1}}, {{62, 4}},
                                                             {{5, 1}, {40, 2}}};
  uint32_t seed = 5200;
  for (attn::Decode8Kernels mode : {attn::Decode8Kernels::Generic, attn::Decode8Kernels::Pairs}) {
    const D8Scope d8(mode);
    const VariantScope vs(attn::DecodeVariant::Lanes8);
    for (const auto& [kt, vt] : pairs)
      for (int hd : {64, 128})
        for (const auto& sq : seqs) {
          Case c;
          c.kt = kt, c.vt = vt, c.head_dim = hd, c.n_head_kv = 2, c.group = 4, c.seed = seed++;
          c.block_tokens = 16;
          c.seqs = sq;
          g_emu_early = 1;
          g_emu_self = true;
          const Ran r = run_case(c);
          g_emu_early = 0;
          g_emu_self = false;
          const std::string what = attn_test::describe(c) + " mode " + std::to_string(int(mode)) +
                                   "\n  plan: " + plan_name(r.plan);
          EXPECT_EQ(r.plan.variant, attn::DecodeVariant::Lanes8) << what;
          EXPECT_LE(r.result.worst, attn_test::kBound) << what << "\n  worst row: " << r.result.where;
        }
  }
}

// A Llama-3.1-8B attention layer with q8_0/turbo3t rows in pool blocks of 64 keys (no pool memory: for plans),
// and its parameters (32 query heads).
cuda::KvLayerDevice llama8b_layer() {
  return {KvType::Q8_0, KvType::Turbo3T, 64, 8, 128, 128, kv_head_bytes(KvType::Q8_0, 128),
          kv_head_bytes(KvType::Turbo3T, 128), nullptr, 0, 0};
}
AttentionParams llama8b_params() {
  AttentionParams p;
  p.n_head = 32;
  p.scale = 0.088f;
  return p;
}

// The tensor-core decode kernel (attention_cuda_decode_tc.cuh, mode Mma) on every pair it takes, and one it
// does not (bf16/bf16: the lanes8 or slots kernel): sequences at depths 0 .. 700 in pool blocks of 64 (full 64-key tiles,
// splits, short last tiles) and 128 with a window and softcap; the early-start path; a group of 2 (two tokens'
// rows in one block); a group of 8 (two head parts). Pool blocks of 16 or 24 keys keep the pairs kernel (its
// 64-key tiles never cross a pool block). Each must pick the kernel it names and stay within the bound, with
// both tile pipelines (bulk copies and the cp.async ring), at head sizes 128, 64 (2026-12-07g) and 256 (2026-12-07h:
// turbo rows of two groups). f16/f16 (2026-12-08: padded stage rows) runs one stage at head sizes 128 and 256 on the
// bulk pipeline; the ring needs two, which do not fit there, so those plans keep the lanes8 / slots kernel. With
// decode_tc_f16 off (the default until it has run on a GPU) f16/f16 keeps the kernels before everywhere.
TEST(CudaAttentionEmulation, DecodeTcEveryPair) {
  std::vector<std::pair<KvType, KvType>> pairs;
  for (const attn::Decode8Pair& p : attn::kDecodeTcPairs) pairs.push_back({p.k, p.v});
  pairs.push_back({KvType::BF16, KvType::BF16});
  const D8Scope d8(attn::Decode8Kernels::Mma);
  const VariantScope vs(attn::DecodeVariant::Lanes8);
  for (const int hd : {128, 64, 256})
  for (const int pipe_f16 : {0, 1, 2}) {  // both tile pipelines (the same seeds); 2: bulk with f16/f16 off
    const bool bulk = pipe_f16 != 1, f16_on = pipe_f16 != 2;
    const std::vector<std::pair<KvType, KvType>> run_pairs =
        f16_on ? pairs : std::vector<std::pair<KvType, KvType>>{{KvType::F16, KvType::F16}};
    const attn_test::TcPipeScope pipe(bulk);
    const attn_test::TcF16Scope f16(f16_on);
    uint32_t seed = hd == 128 ? 4100 : hd == 64 ? 4600 : 5100;
    for (const auto& [kt, vt] : run_pairs)
      for (int shape = 0; shape < 5; ++shape) {
        g_emu_early = shape == 2 ? 1 : 0;
        Case c;
        c.kt = kt, c.vt = vt, c.head_dim = hd, c.n_head_kv = 2, c.group = 4, c.seed = seed++;
        if (shape == 0) {
          c.block_tokens = 64;
          c.seqs = {{0, 1}, {37, 1}, {290, 1}};
        } else if (shape == 1) {
          c.block_tokens = 128;
          c.seqs = {{420, 1}};
          c.window = 300;  // past one split (window splits: 363 keys)
          c.softcap = 30.0f;
        } else if (shape == 2) {
          c.block_tokens = 64;
          c.seqs = {{700, 1}, {5, 1}};
        } else if (shape == 3) {
          c.block_tokens = 64;
          c.group = 2;
          c.seqs = {{300, 2}, {64, 2}};
        } else {
          c.block_tokens = 64;
          c.group = 8;
          c.seqs = {{513, 1}};
        }
        const Ran r = run_case(c);
        g_emu_early = 0;
        const bool supported = attn::decode_tc(hd, kt, vt, attn::Decode8Kernels::Mma);
        const bool picked = hd == 128  ? attn::decode_tc_pick<128>(kt, vt, [](auto) {})
                            : hd == 64 ? attn::decode_tc_pick<64>(kt, vt, [](auto) {})
                                       : attn::decode_tc_pick<256>(kt, vt, [](auto) {});
        // Every shape's bound exceeds one split (256 keys), so a supported pair runs the tensor-core kernel (f16/f16
        // at head sizes 128 and 256 on the bulk pipeline only).
        const bool want_tc = supported && (kt != KvType::F16 || (f16_on && (bulk || hd == 64)));
        const bool tc = r.plan.tc;
        EXPECT_EQ(r.plan.tc, want_tc) << attn_test::describe(c);
        const std::string what =
            attn_test::describe(c) + " shape " + std::to_string(shape) + (bulk ? " bulk" : " sync") +
            (f16_on ? "" : " f16 off") + "\n  plan: " +
            plan_name(r.plan);
        EXPECT_EQ(picked, supported) << what;
        if (tc && kt == KvType::F16) EXPECT_EQ(r.plan.stages, hd == 64 ? 2 : 1) << what;
        EXPECT_EQ(r.plan.kernel, attn::Kernel::Decode) << what;
        EXPECT_EQ(r.plan.tile_keys, tc          ? attn::kDecodeTcTileKeys
                                    : hd == 256 ? attn::decode_tile_keys(256)
                                                : attn::decode8_tile_keys())
            << what;
        EXPECT_LE(r.result.worst, attn_test::kBound) << what << "\n  worst row: " << r.result.where;
      }
  }
}

// At one split (launch bound <= attn::one_split_keys(), 256) the plan keeps the pairs kernel even in mode Mma
// (a 64-key tile would leave three of four warps idle), and so it does with pool blocks of 16 or 24 keys; the
// batch-invariant decode plan takes the tensor-core kernel at every depth (its kernel may not depend on the
// depth). Every case still meets the bound.
// The address of a specialized lanes8 kernel (macro arguments may not hold its template's commas).
template <int K, int V, int DEC, int SELF>
const void* kernel_ptr() {
  return (const void*)&attn::decode8_kernel<128, 4, K, V, DEC, SELF>;
}

// The lean lanes8 kernels (decode8_kernel<..., SELF = 0>, no self-encoded rows): decode8_pick takes one exactly when the
// launch does not self-encode, the mode is pairs / mma and the pair has one (K not encodable, or V encodable); a
// launch that self-encodes, and mode Off's launches, keep the full kernel. Every emulation case of these pairs runs
// the kernel the pick returns, so the lean kernels are what the other tests check in the default mode.
TEST(CudaAttentionEmulation, LeanKernelsWhereNothingIsSelfEncoded) {
  const auto picked = [](KvType k, KvType v, attn::Decode8Kernels mode, bool lean) {
    const void* got = nullptr;
    attn::decode8_pick<128>(k, v, mode, attn::decode8_generic_kernel<128, 4>(lean),
                            [&](auto kernel) { got = (const void*)kernel; }, lean);
    return got;
  };
  constexpr int f16 = int(KvType::F16), q8 = int(KvType::Q8_0), q4 = int(KvType::Q4_0), t3t = int(KvType::Turbo3T);
  using attn::Decode8Kernels;
  EXPECT_EQ(picked(KvType::Q8_0, KvType::Q8_0, Decode8Kernels::Pairs, true),
            (kernel_ptr<q8, q8, attn::kDec8Pairs, 0>()));
  // Mode Mma with a tensor-core pair (f16/f16 since 2026-12-08) picks decode_tc_kernel; the plans pass Pairs for the
  // shallow ones (decode_tc_mode).
  EXPECT_EQ(picked(KvType::F16, KvType::F16, Decode8Kernels::Pairs, true),
            (kernel_ptr<f16, f16, attn::kDec8Pairs, 0>()));
  EXPECT_EQ(picked(KvType::F16, KvType::F16, Decode8Kernels::Mma, true),
            (const void*)(attn::decode_tc_kernel_of<attn::kDecodeTcCount - 1, -1, 128>()));
  EXPECT_EQ(picked(KvType::Q4_0, KvType::Q4_0, Decode8Kernels::Pairs, true),
            (kernel_ptr<q4, q4, attn::kDec8Pairs, 0>()));
  EXPECT_EQ(picked(KvType::Turbo3T, KvType::Turbo3T, Decode8Kernels::Pairs, true),
            (kernel_ptr<t3t, t3t, attn::kDec8Pairs, 0>()));
  EXPECT_EQ(picked(KvType::Q8_0, KvType::Q8_0, Decode8Kernels::Pairs, false),
            (kernel_ptr<q8, q8, attn::kDec8Pairs, 1>()));
  EXPECT_EQ(picked(KvType::Q8_0, KvType::Q8_0, Decode8Kernels::Packed, true),
            (kernel_ptr<q8, q8, attn::kDec8Packed, 1>()));
  // q8_0/turbo3t self-encodes K by default: no lean kernel.
  EXPECT_FALSE(attn::decode8_lean_pair(KvType::Q8_0, KvType::Turbo3T));
  EXPECT_EQ(picked(KvType::Q8_0, KvType::Turbo3T, Decode8Kernels::Pairs, true),
            (kernel_ptr<q8, t3t, attn::kDec8Pairs, 1>()));
  // Pairs without a specialization, and mode Generic, take the generic kernel: lean too when asked.
  EXPECT_EQ(picked(KvType::Q8_0, KvType::Turbo4, Decode8Kernels::Pairs, true),
            (kernel_ptr<-1, -1, attn::kDec8Plain, 0>()));
  EXPECT_EQ(picked(KvType::Q8_0, KvType::Turbo4, Decode8Kernels::Pairs, false),
            (kernel_ptr<-1, -1, attn::kDec8Plain, 1>()));
  EXPECT_EQ(picked(KvType::Q8_0, KvType::Q8_0, Decode8Kernels::Generic, true),
            (kernel_ptr<-1, -1, attn::kDec8Plain, 0>()));
  EXPECT_NE((attn::decode8_generic_kernel<64, 4>(true)), (attn::decode8_generic_kernel<64, 4>(false)));
  // Which launches ask for it: nothing self-encoded and a mode other than Off.
  {
    const SelfScope self(attn::SelfEncode::TurboV);
    EXPECT_TRUE(attn::decode8_lean(0));
    EXPECT_FALSE(attn::decode8_lean(1));
  }
  {
    const SelfScope self(attn::SelfEncode::Off);
    EXPECT_FALSE(attn::decode8_lean(0));
  }
}

TEST(CudaAttentionEmulation, DecodeTcOnlyPastOneSplit) {
  const D8Scope d8(attn::Decode8Kernels::Mma);
  const VariantScope vs(attn::DecodeVariant::Lanes8);
  Case c;
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = 128, c.n_head_kv = 2, c.group = 4, c.seed = 4300;
  c.block_tokens = 64;
  c.seqs = {{100, 1}, {3, 1}};
  const Ran r = run_case(c);
  EXPECT_FALSE(r.plan.tc) << plan_name(r.plan);
  EXPECT_EQ(r.plan.tile_keys, attn::decode8_tile_keys()) << plan_name(r.plan);
  EXPECT_EQ(r.plan.n_splits, 1) << plan_name(r.plan);
  EXPECT_LE(r.result.worst, attn_test::kBound) << r.result.where;
  for (int bt : {16, 24, 64}) {  // past one split: pool blocks of a multiple of 64 keys only
    c.block_tokens = bt, c.seqs = {{600, 1}}, c.seed += 1;
    const Ran rb = run_case(c);
    EXPECT_EQ(rb.plan.tc, bt == 64) << bt << ": " << plan_name(rb.plan);
    EXPECT_LE(rb.result.worst, attn_test::kBound) << bt << ": " << rb.result.where;
  }
  const cuda::KvLayerDevice L = llama8b_layer();
  const AttentionParams p = llama8b_params();
  const cuda::AttentionBatchDevice b{1, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, 200};
  attn::Plan dec, tiled;
  attn::plan_invariant(L, p, b, 132, dec, tiled);
  EXPECT_TRUE(dec.tc) << plan_name(dec);
  EXPECT_FALSE(attn::plan_attention(L, p, b, 132).tc);
}

// One wave at the specialized kernels' occupancy: q8_0/turbo3t at 131072 keys on an H200 (132
// multiprocessors, 8 KV heads) plans 66 splits (528 blocks: 4 per multiprocessor), the generic kernel 49.
TEST(CudaAttentionEmulation, Decode8FixedSplitsFillOneWave) {
  const cuda::KvLayerDevice L = llama8b_layer();
  const AttentionParams p = llama8b_params();
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

// The tensor-core kernel's plans at head size 256 (Gemma 3's global layers: 8 query heads, 4 KV heads): 3 blocks a
// multiprocessor (attn::decode_tc_min_blocks), so at 131072 keys on an H200 (132 multiprocessors) one wave of splits
// fills at least 90% of 396 block slots and none past them; every pair's plan fits the 228 KB of a multiprocessor at 3
// blocks beside its static arrays (the GPU checks it with the occupancy calculator: decode_tc256_fits); f16/f16 on one
// stage (only where the device has the bulk pipeline); the slots kernel where the device cannot hold 3 blocks
// (the pair's bit of attn::decode_tc256_fit_pairs clear), under POLYKV_CUDA_ATTN_DECODE=slots, in modes other than
// mma, and at one split.
TEST(CudaAttentionEmulation, DecodeTcHeadSize256Plans) {
  const attn_test::TcF16Scope f16(true);
  const VariantScope vs(attn::DecodeVariant::Lanes8);
  const D8Scope d8(attn::Decode8Kernels::Mma);
  AttentionParams p;
  p.n_head = 8;
  p.scale = 0.0625f;
  constexpr int kSms = 132, kHeadKv = 4;
  for (const attn::Decode8Pair& pair : attn::kDecodeTcPairs) {
    const cuda::KvLayerDevice L{pair.k, pair.v, 64, kHeadKv, 256, 256, kv_head_bytes(pair.k, 256),
                                kv_head_bytes(pair.v, 256), nullptr, 0, 0};
    const cuda::AttentionBatchDevice b{1, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, 131072};
    const attn::Plan P = attn::plan_attention(L, p, b, kSms);
    const std::string what = std::string(kv_type_name(pair.k)) + "/" + kv_type_name(pair.v) + ": " + plan_name(P);
    EXPECT_TRUE(P.tc) << what;
    EXPECT_EQ(P.tile_keys, attn::kDecodeTcTileKeys) << what;
    // f16/f16: one stage of padded rows (66 KB); two where the device has no bulk pipeline do not fit, and the plan
    // keeps the slots kernel.
    EXPECT_EQ(P.stages >= 2, pair.k != KvType::F16) << what;
    if (pair.k == KvType::F16) {
      bool& bulk_device = attn::decode_tc_bulk_device();
      bulk_device = false;
      const attn::Plan R = attn::plan_attention(L, p, b, kSms);
      bulk_device = true;
      EXPECT_FALSE(R.tc) << what;
      EXPECT_EQ(R.variant, attn::DecodeVariant::Slots) << what;
    }
    // Static arrays (ptxas -v, sm_90): 5,536 bytes without pair tables, plus 4 bytes a pair-table entry.
    const size_t statics = 5632 + 4 * size_t(cuda::pair_lut_size(pair.v)) +
                           (pair.k != pair.v ? 4 * size_t(cuda::pair_lut_size(pair.k)) : 0);
    EXPECT_LE(attn::kDecodeTc256MinBlocks * (P.smem + statics + 1024), size_t(228) * 1024) << what;
    const int slots = attn::kDecodeTc256MinBlocks * kSms, blocks = P.n_splits * kHeadKv;
    EXPECT_LE(blocks, slots) << what;
    EXPECT_GE(blocks, slots * 9 / 10) << what;
    EXPECT_GE(int64_t(P.chunk) * P.n_splits, 131072) << what;
    uint32_t& fits = attn::decode_tc256_fit_pairs();
    fits = attn::kDecodeTcAllPairs & ~(1u << attn::decode_tc_index(pair.k, pair.v));
    const attn::Plan Q = attn::plan_attention(L, p, b, kSms);
    fits = attn::kDecodeTcAllPairs;
    EXPECT_FALSE(Q.tc) << what;
    EXPECT_EQ(Q.variant, attn::DecodeVariant::Slots) << what;
    {  // the other pairs' bits alone: this pair still takes the kernel
      fits = 1u << attn::decode_tc_index(pair.k, pair.v);
      EXPECT_TRUE(attn::plan_attention(L, p, b, kSms).tc) << what;
      fits = attn::kDecodeTcAllPairs;
    }
    {
      const VariantScope slots_only(attn::DecodeVariant::Slots);
      EXPECT_FALSE(attn::plan_attention(L, p, b, kSms).tc) << what;
    }
    {
      const D8Scope pairs_mode(attn::Decode8Kernels::Pairs);
      EXPECT_EQ(attn::plan_attention(L, p, b, kSms).variant, attn::DecodeVariant::Slots) << what;
    }
    const cuda::AttentionBatchDevice shallow{1, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, 200};
    EXPECT_FALSE(attn::plan_attention(L, p, shallow, kSms).tc) << what;
  }
}

// Sliding-window decode at depth (Plan::window_splits): the key splits start at each block's first visible key
// (aligned down to 64) and cover the window, not the whole context. Before, a local layer of Gemma 3 (window 1024 in
// a 32k context) planned one wave of splits over every key, so its window's two or three splits were each as long as
// a global layer's (call H49: gemma-3-4b's attention exposed ~62 us a layer on average at depth 32768). One-token and
// 4-token steps (the small-step decode plan), windows of 100 and 700 at depths 2500-4000, head sizes 64, 128 and
// 256, both decode variants and the pairs / tensor-core modes; a window wider than the context keeps the old splits.
TEST(CudaAttentionEmulation, WindowedDecodeSplitsCoverTheWindow) {
  uint32_t seed = 1500;
  struct Shape {
    KvType kt, vt;
    int hd, window;
  };
  const SmallQScope small(8);
  for (const Shape& sh : {Shape{KvType::Q8_0, KvType::Q8_0, 128, 700}, Shape{KvType::Q8_0, KvType::Turbo3T, 128, 700},
                          Shape{KvType::Q8_0, KvType::Turbo3T, 128, 100}, Shape{KvType::F16, KvType::F16, 256, 700},
                          Shape{KvType::F16, KvType::Q4_0, 64, 300}, Shape{KvType::Q8_0, KvType::Turbo3T, 64, 300},
                          Shape{KvType::Q8_0, KvType::Turbo3T, 256, 300}}) {
    for (const int nq : {1, 4}) {
      Case c;
      c.kt = sh.kt, c.vt = sh.vt, c.head_dim = sh.hd, c.n_head_kv = 2, c.group = 4, c.window = sh.window;
      c.block_tokens = 64, c.seqs = {{4000, nq}, {2500, nq}}, c.seed = seed++;
      const int64_t span = 63 + sh.window + nq - 1;  // what one block's splits must cover
      for (attn::DecodeVariant v : kVariants)
        for (attn::Decode8Kernels mode : {attn::Decode8Kernels::Pairs, attn::Decode8Kernels::Mma}) {
          const VariantScope vs(v);
          const D8Scope d8(mode);
          const Ran r = run_case(c);
          const std::string what = attn_test::describe(c) + "\n  plan: " + plan_name(r.plan);
          EXPECT_LE(r.result.worst, attn_test::kBound) << what << "\n  worst row: " << r.result.where;
          EXPECT_EQ(r.plan.kernel, attn::Kernel::Decode) << what;
          EXPECT_TRUE(r.plan.window_splits) << what;
          EXPECT_GE(int64_t(r.plan.n_splits) * r.plan.chunk, span) << what;
          if (r.plan.n_splits > 1) EXPECT_LT(int64_t(r.plan.n_splits - 1) * r.plan.chunk, span) << what;
        }
    }
  }
  Case c;  // the window holds every key: splits over the context as before
  c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.window = 5000, c.block_tokens = 64, c.seqs = {{3000, 1}}, c.seed = seed;
  const Ran r = run_case(c);
  EXPECT_LE(r.result.worst, attn_test::kBound) << r.result.where;
  EXPECT_FALSE(r.plan.window_splits) << plan_name(r.plan);
  EXPECT_GT(r.plan.n_splits, 1) << plan_name(r.plan);
  // POLYKV_CUDA_WINDOW_SPLITS=0: the plans before (splits over the context), still right.
  bool& on = attn::window_splits_on();
  const bool saved = on;
  on = false;
  c.window = 100, c.seed = seed + 1;
  const Ran off = run_case(c);
  on = saved;
  EXPECT_LE(off.result.worst, attn_test::kBound) << off.result.where;
  EXPECT_FALSE(off.plan.window_splits) << plan_name(off.plan);
  EXPECT_GT(off.plan.n_splits, 1) << plan_name(off.plan);
}

}  // namespace
}  // namespace polykv

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

// The early start's plan leaves the kv_store's block slots free (cuda::attention reserves (2 x rows x KV heads
// + 3) / 4 + 1 = 5 at one row and 8 KV heads): at 32768 and 131072 keys (and a bound where the rounding
// would fill every slot) the specialized kernels' one wave has room for them.
TEST(CudaAttentionEmulation, Decode8EarlyPlanLeavesRoomForTheStore) {
  const cuda::KvLayerDevice L = llama8b_layer();
  const AttentionParams p = llama8b_params();
  const VariantScope vs(attn::DecodeVariant::Lanes8);
  const D8Scope d8(attn::Decode8Kernels::Pairs);
  for (int kv : {32768, 131072, 66 * 2048, 66 * 512, 5000}) {
    const cuda::AttentionBatchDevice b{1, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, kv};
    const attn::Plan P = attn::plan_attention(L, p, b, 132, 5);
    EXPECT_LE(P.n_splits * 8, 4 * 132 - 5) << kv << ": " << plan_name(P);
    if (kv >= 32768) EXPECT_GE(P.n_splits * 8, (4 * 132 - 5) * 85 / 100) << kv << ": " << plan_name(P);
  }
}

// Batch invariance (attn::plan_invariant, --batch-invariant; docs/CUDA_SPEC.md): every row of a step of
// several sequences (a k-token verify step, a decode step, a 40-row prefill chunk) run with the
// invariant plans, as cuda::attention runs them, is within the usual bound of attention_ref, and each row
// of a sequence of up to kInvariantDecodeQ rows equals bit for bit (memcmp) what the same query gets
// alone (one row at its position, the step's bound its own), across chunk boundaries (depths 505, 1100),
// with a sliding window, GQA 1 / 2 / 4 (1 to 4 tokens per decode block) and the slots kernel (head
// size 256). The default plans are counted for comparison (printed, not asserted).
std::vector<float> run_plans(const attn_test::Fixture& f, const cuda::AttentionBatchDevice& b, const float* q,
                             int total_rows, bool invariant) {
  attn::Plan P[2];
  const int n = invariant ? attn::plan_invariant(f.L, f.p, b, kEmulatedSms, P[0], P[1]) : 1;
  if (!invariant) P[0] = attn::plan_attention(f.L, f.p, b, kEmulatedSms);
  std::vector<float> out(size_t(total_rows) * f.row_floats);
  attn_test::poison(out.data(), out.size());
  for (int i = 0; i < n; ++i) {
    std::vector<float> part(P[i].partial_o_floats + P[i].partial_ml_floats, NAN);
    const attn::Args a = attn::make_args(f.L, f.p, b, P[i], q, out.data(), part.empty() ? nullptr : part.data());
    switch (f.c.head_dim) {
      case 64: run_kernels<64>(a, P[i], a, attn::Plan{}); break;
      case 128: run_kernels<128>(a, P[i], a, attn::Plan{}); break;
      default: run_kernels<256>(a, P[i], a, attn::Plan{}); break;
    }
  }
  return out;
}

TEST(CudaAttentionEmulation, InvariantPlansGiveEachRowTheBitsOfItsOwnStep) {
  attn::g_tables = cuda::make_kv_decode_tables();
  struct Inv {
    KvType kt, vt;
    int hd, group, depth, k, window;
  };
  const Inv invs[] = {{KvType::F16, KvType::F16, 128, 2, 20, 8, 0},       {KvType::Q8_0, KvType::Turbo3T, 128, 4, 505, 8, 0},
                      {KvType::Q8_0, KvType::Q8_0, 64, 1, 1100, 6, 0},     {KvType::Q8_0, KvType::Turbo3T, 128, 2, 306, 8, 100},
                      {KvType::Turbo3T, KvType::Turbo3T, 256, 2, 40, 5, 0}};
  uint32_t seed = 700;
  int rows = 0, default_differs = 0;
  for (const Inv& v : invs) {
    Case c;
    c.kt = v.kt, c.vt = v.vt, c.head_dim = v.hd, c.group = v.group, c.n_head_kv = 1, c.window = v.window;
    c.seed = seed++;
    c.seqs = {{v.depth, v.k}, {50, 40}, {3, 1}};  // a verify step, a prefill chunk (the tiled launch), a decode row
    c.extra_kv_bound = 37;                        // a bound above the real one, as the backend's bucket
    const auto f = attn_test::build(c);
    const std::vector<float> got = run_plans(*f, f->b, f->q.data(), f->total_rows, true);
    std::vector<float> checked(f->out_floats());
    attn_test::poison(checked.data(), checked.size());
    std::copy(got.begin(), got.end(), checked.begin());
    const attn_test::Result r = attn_test::check_outputs(*f, checked);
    EXPECT_LE(r.worst, attn_test::kBound) << attn_test::describe(c) << "\n  worst row: " << r.where;
    const std::vector<float> plain = run_plans(*f, f->b, f->q.data(), f->total_rows, false);
    for (int s : {0, 2}) {
      const SeqSpec& sq = c.seqs[size_t(s)];
      for (int j = 0; j < sq.n_q; ++j) {
        const int row = f->row0[size_t(s)] + j;
        const int32_t start = f->table_start[size_t(s)], pos = sq.pos0 + j, one = 1, zero = 0;
        cuda::AttentionBatchDevice b1 = f->b;  // the same pool and tables, this one row alone
        b1.n_seq = 1, b1.table_start = &start, b1.pos0 = &pos, b1.n_q = &one, b1.row0 = &zero;
        b1.total_rows = 1, b1.max_n_q = 1, b1.max_kv = pos + 1;
        const float* qr = f->q.data() + size_t(row) * f->row_floats;
        const std::vector<float> alone = run_plans(*f, b1, qr, 1, true), alone_plain = run_plans(*f, b1, qr, 1, false);
        const float* g = got.data() + size_t(row) * f->row_floats;
        ++rows;
        default_differs +=
            std::memcmp(plain.data() + size_t(row) * f->row_floats, alone_plain.data(), f->row_floats * sizeof(float)) != 0;
        if (std::memcmp(g, alone.data(), f->row_floats * sizeof(float)) == 0) continue;
        size_t i = 0;
        while (g[i] == alone[i] && i + 1 < f->row_floats) ++i;
        ADD_FAILURE() << attn_test::describe(c) << "\n  seq " << s << " token " << j << " (pos " << pos
                      << "): differs from the row alone at value " << i << ": " << g[i] << " vs " << alone[i];
      }
    }
  }
  std::printf("invariant plans: %d rows checked; with the default plans %d of them differ from the row alone\n", rows,
              default_differs);
}

}  // namespace
}  // namespace polykv
