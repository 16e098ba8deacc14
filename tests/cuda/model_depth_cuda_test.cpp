// Head size 256 at depth, the whole model on the GPU against the CPU backend (the reference): synth tiny-gemma3 (6
// layers of head size 256, 2 query heads on 1 KV head, 16-token sliding windows on the local layers, Gemma 3's
// pattern), a 700-token prompt, then 12 teacher-forced decode steps, per KV type pair of the tensor-core decode kernel.
// The global layer's decode steps see 700+ keys, past one split, in 256-token pool blocks, so they run
// decode_tc_kernel<..., 256> (attention_cuda_decode_tc.cuh, 2026-12-07h), whose kernel-level test
// (CudaAttentionDecode8.TcPairsHeadSize256) checks one layer; this checks a model's decode through it (the backend's
// plans, PDL early start, graphs). The model-level fixture goldens see 48 positions (one split) and never reach it.
// Bound as ModelCuda's (model_cuda_test.cpp): 3e-2 + sqrt(2) x the pair's own quantization noise on the CPU (its
// logits against the CPU's f16/f16 ones, worst prefill row), top-1 within the CPU's own changes plus two.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "backend/backend.h"
#include "attention_cuda_cases.h"
#include "backend/cuda/attention_cuda_plan.h"
#include "cuda_test_util.h"
#include "model_compare_cuda.h"
#include "engine/sequence_kv.h"
#include "model/model.h"
#include "model/shapes.h"
#include "model/synth.h"
#include "../test_util.h"

namespace polykv {
namespace {

using cuda_test::compare_rows;
using cuda_test::RowCompare;

struct TinyGemma3 {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("polykv_depth256_" + std::to_string(getpid()) + ".gguf")).string();
  TinyGemma3() {
    SynthOptions o;
    o.type = DType::Q8_0;
    o.seed = 31;
    o.n_threads = 2;
    o.weight_std = 0.05f;
    write_synth_model(path, find_model_shape("tiny-gemma3"), o);
  }
  ~TinyGemma3() { std::filesystem::remove(path); }
};

class ModelDepthCuda : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelDepthCuda, HeadSize256AtDepthMatchesTheCpu) {
  POLYKV_REQUIRE_GPU();
  const std::string kv_pair = GetParam();
  const std::string ctk = kv_pair.substr(0, kv_pair.find('/')), ctv = kv_pair.substr(kv_pair.find('/') + 1);
  const attn_test::TcF16Scope f16_on(true);  // f16/f16 on the tensor-core kernel (off by default until run on a GPU)
  const TinyGemma3 m;
  auto cpu_backend = make_backend({"cpu", 0});
  auto gpu_backend = make_backend({"cuda", 0});
  auto cpu = Model::load(m.path, *cpu_backend);
  auto gpu = Model::load(m.path, *gpu_backend);
  const ModelConfig& cfg = cpu->config();
  ASSERT_EQ(cfg.head_dim, 256);
  const int n_vocab = cfg.n_vocab;
  std::mt19937 rng(7);
  std::vector<int32_t> prompt(700);
  for (int32_t& t : prompt) t = int32_t(rng() % uint32_t(n_vocab));

  SequenceKvOptions o;
  o.k_type = ctk;
  o.v_type = ctv;
  o.max_tokens = 1024;
  // The tensor-core kernel's 64-key tiles never cross a pool block.
  ASSERT_EQ(o.block_tokens % cuda::attn::kDecodeTcTileKeys, 0);
  // The decode plan of the global layer at this depth takes the tensor-core kernel (the GPU's plans are these).
  {
    const KvType kt = parse_kv_type(ctk), vt = parse_kv_type(ctv);
    const cuda::KvLayerDevice L{kt, vt, o.block_tokens, cfg.n_head_kv, 256, 256, kv_head_bytes(kt, 256),
                                kv_head_bytes(vt, 256), nullptr, 0, 0};
    AttentionParams p;
    p.n_head = cfg.n_head;
    p.scale = 0.0625f;
    const cuda::AttentionBatchDevice b{1, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, int(prompt.size()) + 1};
    EXPECT_TRUE(cuda::attn::plan_attention(L, p, b, 132).tc) << kv_pair;
  }
  auto kv_cpu = make_sequence_kv(*cpu, o);
  auto kv_gpu = make_sequence_kv(*gpu, o);

  // The pair's quantization noise on the CPU: its prefill logits against f16/f16's.
  std::vector<float> lc(prompt.size() * size_t(n_vocab)), lg(lc.size(), NAN);
  double noise = 0;
  int noise_top1_diff = 0;
  {
    SequenceKvOptions of = o;
    of.k_type = of.v_type = "f16";
    auto kv_f16 = make_sequence_kv(*cpu, of);
    std::vector<float> lf(lc.size());
    cpu->forward(prompt, *kv_f16, lf.data(), true);
    cpu->forward(prompt, *kv_cpu, lc.data(), true);
    RowCompare nz;
    compare_rows(lf, lc, n_vocab, nz);
    noise = nz.worst_rel;
    noise_top1_diff = nz.rows - nz.top1_same;
  }
  const double bound = 3e-2 + std::sqrt(2.0) * noise;
  gpu->forward(prompt, *kv_gpu, lg.data(), true);
  RowCompare pre;
  compare_rows(lc, lg, n_vocab, pre);
  std::printf("%s prefill %zu rows: worst relative L2 %.3g (bound %.3g), top-1 same %d/%d\n", kv_pair.c_str(),
              prompt.size(), pre.worst_rel, bound, pre.top1_same, pre.rows);
  EXPECT_LT(pre.worst_rel, bound) << kv_pair;

  // Decode at depth 700+, teacher-forced with the CPU's greedy tokens.
  RowCompare dec;
  const int32_t first = int32_t(std::max_element(lc.end() - n_vocab, lc.end()) - (lc.end() - n_vocab));
  cuda_test::teacher_forced_decode(*cpu, *gpu, *kv_cpu, *kv_gpu, first, 12, dec);
  std::printf("%s decode 12 steps at depth %zu: worst relative L2 %.3g (bound %.3g), top-1 same %d/%d\n",
              kv_pair.c_str(), prompt.size(), dec.worst_rel, bound, dec.top1_same, dec.rows);
  EXPECT_LT(dec.worst_rel, bound) << kv_pair;
  EXPECT_GE(dec.top1_same, dec.rows - 2 - noise_top1_diff) << kv_pair;
  EXPECT_EQ(kv_gpu->n_tokens(), kv_cpu->n_tokens());
}

INSTANTIATE_TEST_SUITE_P(TcPairs, ModelDepthCuda, ::testing::Values("q8_0/q8_0", "q8_0/turbo3t", "turbo3t/turbo3t", "f16/f16"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '/', '_');
                           return s;
                         });

}  // namespace
}  // namespace polykv
