// `synth --type mxfp4` writes llama.cpp's MXFP4_MOE layout (as real gpt-oss GGUFs): expert stacks in
// mxfp4, every other matrix in q8_0, routers / biases / norms f32, general.file_type 38; the tiny
// gpt-oss and qwen3moe shapes load and run; the real gpt-oss-20b shape fits mxfp4's blocks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "backend/cpu/cpu_backend.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/shapes.h"
#include "model/synth.h"
#include "model/synth_layout.h"
#include "quant/mxfp4.h"
#include "test_util.h"

namespace polykv {
namespace {

TEST(Mxfp4Synth, TinyMoeShapesInMxfp4MoeLayout) {
  for (const char* shape : {"tiny-gptoss", "tiny-qwen3moe"}) {
    SCOPED_TRACE(shape);
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("polykv_mxfp4_synth_" + std::string(shape) + std::to_string(getpid()) + ".gguf"))
                                 .string();
    SynthOptions o;
    o.type = DType::MXFP4;
    o.seed = 3;
    o.n_threads = 2;
    write_synth_model(path, find_model_shape(shape), o);
    {
      const GgufFile f = GgufFile::open(path);
      EXPECT_EQ(f.get_u32("general.file_type"), 38u);
      int n_mx = 0;
      for (const GgufTensor& t : f.tensors()) {
        const bool matrix = t.ne.size() >= 2 && t.name.find("gate_inp") == std::string::npos &&
                            t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".weight") == 0;
        if (t.ne.size() == 3) {
          EXPECT_EQ(t.type, DType::MXFP4) << t.name;
          ++n_mx;
        } else if (matrix) {
          EXPECT_EQ(t.type, DType::Q8_0) << t.name;
        } else {
          EXPECT_EQ(t.type, DType::F32) << t.name;
        }
      }
      EXPECT_EQ(n_mx, 3 * find_model_shape(shape).n_layer);
    }
    for (float x : test::cpu_last_logits(path)) ASSERT_TRUE(std::isfinite(x));
    std::filesystem::remove(path);
  }
}

// Every matrix of the real gpt-oss-20b shape has rows that are whole mxfp4 / q8_0 blocks (2880 = 90 × 32).
TEST(Mxfp4Synth, GptOss20bShapeFits) {
  const ModelShape& s = find_model_shape("gpt-oss-20b");
  for (const SynthTensor& t : synth_tensor_layout(s, 2))
    if (t.init == SynthInit::Weight) EXPECT_EQ(t.ne[0] % 32, 0) << t.name;
}

}  // namespace
}  // namespace polykv
