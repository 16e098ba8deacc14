// With the ternary kernels off (POLYKV_CUDA_TERNARY=0) the CUDA backend must refuse a ternary matrix at upload
// with a clear Error naming the type and the way out (--device cpu), never fail later inside a step; on (the
// default since 2026-12-05) it takes them, and a model requantized to each ternary type gives the CPU's logits
// within the bounds below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <unistd.h>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/matmul_cuda.h"
#include "core/error.h"
#include "cuda_test_util.h"
#include "engine/sequence_kv.h"
#include "model/model.h"
#include "quant/quantize_model.h"
#include "../test_util.h"

namespace polykv {
namespace {

TEST(TernaryCuda, UploadIsRefusedClearlyWhenOff) {
  POLYKV_REQUIRE_GPU();
  cuda::set_ternary_weights_enabled(false);
  struct Restore {
    ~Restore() { cuda::set_ternary_weights_enabled(true); }
  } restore;
  auto be = make_backend({"cuda", 0});
  for (DType t : {DType::TQ1_0, DType::TQ2_0, DType::PTQ1_0}) {
    const int64_t n_in = 256, n_out = 4;
    std::vector<uint8_t> bytes(row_bytes(t, n_in) * size_t(n_out), 0);
    const WeightMatrix w{t, bytes.data(), n_in, n_out, row_bytes(t, n_in)};
    try {
      be->upload_matrix(w);
      ADD_FAILURE() << "no error for " << dtype_name(t);
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(dtype_name(t)), std::string::npos) << msg;
      EXPECT_NE(msg.find("--device cpu"), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace polykv

namespace polykv {
namespace {

// The embedded model requantized to each ternary type (polykv quantize's rules: token_embd and output in q4_K),
// on CUDA against the CPU backend, f32/f32 KV so that only the weights' kernels differ: the prefill's logits of
// every row and 4 decode steps (both fed the CPU's argmax), relative L2 per row and the top-1. The CPU's ternary
// kernels quantize activations to int8 per 256 values, the GPU's mat-vec per 32 and its prefill runs cuBLAS on f16
// tiles, so the two differ by rounding. First run (H100, 2026-12-05, call Y4): prefill 0.052 / 0.052 / 0.069
// (tq2_0 / tq1_0 / ptq1_0), decode 0.033 / 0.038 / 0.032, top-1 the same in 24 / 23 / 23 of 24 rows, against
// 0.016 for the embedded q8_0 model with f16/f16 KV (ModelCuda). Bounds 0.1 and 21 of 24 rows: set from that run
// (the gap to q8_0 weights is not explained); a wrong decoder gives errors of order 1.
TEST(TernaryCuda, ModelLogitsMatchTheCpu) {
  POLYKV_REQUIRE_GPU();
  for (DType t : {DType::TQ2_0, DType::TQ1_0, DType::PTQ1_0}) {
    SCOPED_TRACE(dtype_name(t));
    const std::string path = (std::filesystem::temp_directory_path() /
                              (std::string("polykv-ternary-cuda-") + dtype_name(t) + "-" + std::to_string(getpid()) + ".gguf"))
                                 .string();
    quantize_model(test::embedded_model(), path, t);
    auto cpu_backend = make_backend({"cpu", 0});
    auto gpu_backend = make_backend({"cuda", 0});
    auto cpu = Model::load(path, *cpu_backend);
    auto gpu = Model::load(path, *gpu_backend);
    const int n_vocab = cpu->config().n_vocab;
    SequenceKvOptions o;
    o.k_type = o.v_type = "f32";
    o.max_tokens = 128;
    auto kv_cpu = make_sequence_kv(*cpu, o);
    auto kv_gpu = make_sequence_kv(*gpu, o);
    const std::vector<int32_t> prompt = {1, 442, 2180, 7809, 1494, 7809, 7794, 285, 7809, 7794, 285, 858, 267,
                                         42, 7, 300, 5, 99, 12, 8};
    std::vector<float> lc(prompt.size() * size_t(n_vocab)), lg(lc.size(), NAN);
    cpu->forward(prompt, *kv_cpu, lc.data(), true);
    gpu->forward(prompt, *kv_gpu, lg.data(), true);
    cuda_test::RowCompare pre, dec;
    cuda_test::compare_rows(lc, lg, n_vocab, pre);
    const float* last = lc.data() + (prompt.size() - 1) * size_t(n_vocab);
    int32_t next = int32_t(std::max_element(last, last + n_vocab) - last);
    std::vector<float> dc(static_cast<size_t>(n_vocab)), dg(static_cast<size_t>(n_vocab), NAN);
    for (int step = 0; step < 4; ++step) {
      cpu->forward(std::span(&next, 1), *kv_cpu, dc.data(), false);
      gpu->forward(std::span(&next, 1), *kv_gpu, dg.data(), false);
      cuda_test::compare_rows(dc, dg, n_vocab, dec);
      next = int32_t(std::max_element(dc.begin(), dc.end()) - dc.begin());
    }
    const double worst_prefill = pre.worst_rel, worst_decode = dec.worst_rel;
    const int top1_same = pre.top1_same + dec.top1_same, rows = pre.rows + dec.rows;
    std::printf("  %s: worst relative L2 prefill rows %.3g, decode rows %.3g; top-1 the same in %d of %d rows\n",
                dtype_name(t), worst_prefill, worst_decode, top1_same, rows);
    EXPECT_LE(worst_prefill, 0.1);
    EXPECT_LE(worst_decode, 0.1);
    EXPECT_GE(top1_same, rows - 3);
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace polykv
