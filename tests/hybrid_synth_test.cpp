// synth for the Qwen3.5 hybrids (model/synth_qwen35.h): the tiny qwen35 / qwen35moe shapes in several
// weight types load as hybrids (GDN and attention layers where full_attention_interval puts them,
// the ssm.* sizes of the shape) and run prompt + decode steps to finite logits; the real shapes
// (Qwen3.5-9B, Qwen3.5-35B-A3B) have the published sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/synth.h"
#include "model/synth_layout.h"
#include "synth_param_count.h"
#include "test_util.h"

namespace polykv {
namespace {

std::string temp_path(const std::string& tag) {
  return (std::filesystem::temp_directory_path() / ("polykv_hybrid_" + tag + "_" + std::to_string(getpid()) + ".gguf"))
      .string();
}

TEST(HybridSynth, TinyShapesLoadAndRunInEveryType) {
  for (const char* name : {"tiny-qwen35", "tiny-qwen35moe"})
    for (DType type : {DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::MXFP4}) {
      SCOPED_TRACE(std::string(name) + " " + dtype_name(type));
      const ModelShape& shape = find_model_shape(name);
      const std::string path = temp_path(name);
      SynthOptions o;
      o.type = type;
      o.seed = 3;
      o.n_threads = 2;
      write_synth_model(path, shape, o);
      {
        const GgufFile f = GgufFile::open(path);
        const ModelConfig c = config_from_gguf(f);
        ASSERT_EQ(c.n_layer, shape.n_layer);
        for (int il = 0; il < c.n_layer; ++il)
          EXPECT_EQ(c.layers[size_t(il)].kind, (il + 1) % shape.full_attention_interval != 0
                                                   ? LayerKind::GatedDeltaNet
                                                   : LayerKind::Attention)
              << il;
        EXPECT_EQ(c.gdn.n_k_heads, shape.gdn_k_heads);
        EXPECT_EQ(c.gdn.n_v_heads, shape.gdn_v_heads);
        EXPECT_EQ(c.gdn.head_dim, shape.gdn_head_dim);
        EXPECT_EQ(c.n_rot, shape.n_rot);
        EXPECT_EQ(c.moe.n_expert, shape.n_expert);
        EXPECT_EQ(c.moe.n_ff_shexp, shape.n_ff_shexp);
        const GgufTensor& a = f.tensor("blk.0.ssm_a");
        ASSERT_EQ(a.type, DType::F32);
        for (int64_t i = 0; i < a.n_elements; ++i)
          EXPECT_LT(reinterpret_cast<const float*>(a.data)[i], 0.0f) << "ssm_a is a decay rate";
      }
      CpuBackend be(2);
      auto m = Model::load(path, be);
      KvCache kv(m->kv_shape(), KvType::F32, KvType::F32, 64, 16);
      std::vector<float> logits(size_t(m->config().n_vocab));
      // A prompt longer than 16 rows (the chunked GDN rule) and then single decode steps.
      std::vector<int32_t> prompt;
      for (int i = 0; i < 40; ++i) prompt.push_back(int32_t(3 + (i * 37) % 300));
      m->forward(prompt, kv, logits.data(), false);
      for (int s = 0; s < 4; ++s) {
        for (float x : logits) ASSERT_TRUE(std::isfinite(x)) << "step " << s;
        const int32_t tok = int32_t(7 + s);
        m->forward(std::span(&tok, 1), kv, logits.data(), false);
      }
      for (float x : logits) ASSERT_TRUE(std::isfinite(x));
      std::filesystem::remove(path);
    }
}

TEST(HybridSynth, RealShapesHaveThePublishedSizes) {
  // Parameters counted from the layout against the model cards' totals (text only: Qwen3.5-9B 9B,
  // Qwen3.5-35B-A3B 35B); the counts are 9.0B and 34.7B.
  const std::pair<const char*, double> expected[] = {{"qwen3.5-9b", 9.0e9}, {"qwen3.5-35b-a3b", 35.0e9}};
  for (const auto& [name, count] : expected) {
    EXPECT_NEAR(test::synth_parameter_count(name), count, 0.4e9) << name;
  }
}

}  // namespace
}  // namespace polykv
