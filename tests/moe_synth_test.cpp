// synth and quantize for the mixture-of-experts families: the tiny qwen3moe / gpt-oss shapes in
// several weight types (3-D expert tensors quantized row by row, routers and biases kept f32) load and
// run; `quantize` of the MoE fixtures converts the expert stacks and keeps routers and biases; the
// real shapes (Qwen3-30B-A3B, gpt-oss-20b) have the published sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/synth.h"
#include "model/synth_layout.h"
#include "quant/quant.h"
#include "quant/quantize_model.h"
#include "synth_param_count.h"
#include "test_util.h"

namespace polykv {
namespace {

std::string temp_path(const std::string& tag) {
  return (std::filesystem::temp_directory_path() / ("polykv_moe_" + tag + "_" + std::to_string(getpid()) + ".gguf"))
      .string();
}


TEST(MoeSynth, TinyShapesLoadAndRunInEveryType) {
  for (const char* shape : {"tiny-qwen3moe", "tiny-gptoss"})
    for (DType type : {DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
      SCOPED_TRACE(std::string(shape) + " " + dtype_name(type));
      const std::string path = temp_path(shape);
      SynthOptions o;
      o.type = type;
      o.seed = 5;
      o.n_threads = 2;
      write_synth_model(path, find_model_shape(shape), o);
      {
        const GgufFile f = GgufFile::open(path);
        EXPECT_EQ(f.tensor("blk.1.ffn_gate_exps.weight").type, type);
        EXPECT_EQ(f.tensor("blk.1.ffn_down_exps.weight").ne.size(), 3u);
        EXPECT_EQ(f.tensor("blk.1.ffn_gate_inp.weight").type, DType::F32);
        const ModelConfig c = config_from_gguf(f);
        EXPECT_EQ(c.moe.n_expert, 8);
        EXPECT_EQ(c.moe.n_used, 2);
      }
      const auto logits = test::cpu_last_logits(path);
      for (float x : logits) ASSERT_TRUE(std::isfinite(x));
      std::filesystem::remove(path);
    }
}

TEST(MoeSynth, RealShapesHaveThePublishedSizes) {
  // Parameters counted from the layout; the totals of the Hugging Face model cards (Qwen3-30B-A3B:
  // 30.5B; gpt-oss-20b: 20.9B), to 0.1B.
  const std::pair<const char*, double> expected[] = {{"qwen3-30b-a3b", 30.5e9}, {"gpt-oss-20b", 20.9e9}};
  for (const auto& [name, count] : expected) {
    EXPECT_NEAR(test::synth_parameter_count(name), count, 0.05e9) << name;
  }
}

TEST(MoeQuantize, ExpertStacksQuantizedRoutersAndBiasesKept) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  for (const char* name : {"qwen3moe", "gptoss"}) {
    SCOPED_TRACE(name);
    const std::string in = test::fixtures_dir() + "/models/random/" + name + ".gguf", out = temp_path(name);
    quantize_model(in, out, DType::Q8_0, DType::Q8_0, 2);
    {
      const GgufFile f = GgufFile::open(out);
      // 24-value rows (expert_ff 24) do not fit q8_0's block of 32: ffn_down_exps falls back to f16.
      EXPECT_EQ(f.tensor("blk.0.ffn_gate_exps.weight").type, DType::Q8_0);
      EXPECT_EQ(f.tensor("blk.0.ffn_up_exps.weight").type, DType::Q8_0);
      EXPECT_EQ(f.tensor("blk.0.ffn_down_exps.weight").type, DType::F16);
      EXPECT_EQ(f.tensor("blk.0.ffn_gate_inp.weight").type, DType::F32);
      if (f.find_tensor("blk.0.ffn_down_exps.bias")) {
        EXPECT_EQ(f.tensor("blk.0.ffn_down_exps.bias").type, DType::F32);
        EXPECT_EQ(f.tensor("blk.0.ffn_gate_exps.bias").type, DType::F32);
      }
    }
    {  // every expert's rows dequantize to the original within q8_0's rounding: half a step (max/127/2) plus
       // the f16 rounding of the block scale (up to 127 steps times 2^-11 relative), relative to the block max
      const GgufFile fi = GgufFile::open(in), fo = GgufFile::open(out);
      const GgufTensor &a = fi.tensor("blk.1.ffn_up_exps.weight"), &b = fo.tensor("blk.1.ffn_up_exps.weight");
      ASSERT_EQ(a.ne, b.ne);
      const int64_t n = a.ne[0];
      std::vector<float> ra(static_cast<size_t>(n)), rb(static_cast<size_t>(n));
      double worst = 0;
      for (int64_t r = 0; r < a.rows(); ++r) {
        dequantize_row_ref(a.type, a.data + size_t(r) * row_bytes(a.type, n), ra.data(), n);
        dequantize_row_ref(b.type, b.data + size_t(r) * row_bytes(b.type, n), rb.data(), n);
        for (int64_t i = 0; i < n; i += 32) {
          float mx = 0;
          for (int64_t j = i; j < i + 32; ++j) mx = std::max(mx, std::abs(ra[size_t(j)]));
          for (int64_t j = i; j < i + 32; ++j)
            worst = std::max(worst, double(std::abs(ra[size_t(j)] - rb[size_t(j)])) / std::max(mx, 1e-20f));
        }
      }
      EXPECT_LE(worst, 0.5 / 127 + 1.0 / 2048) << "relative to the block max";
    }
    for (float x : test::cpu_last_logits(out)) ASSERT_TRUE(std::isfinite(x));
    std::filesystem::remove(out);
  }
}

}  // namespace
}  // namespace polykv
