// `polykv quantize` to each ternary type, then `polykv run` of the result: the model loads (its
// FFN and attention matrices ternary, the embeddings and output in q4_K as llama.cpp's quantizer
// keeps them) and generates tokens. Quality is not checked: a ternary copy of a model trained in
// higher precision is expected to be poor.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "gguf/gguf.h"
#include "test_util.h"

namespace polykv {
namespace {

TEST(TernaryModel, QuantizeAndRun) {
  for (const std::string type : {"tq1_0", "tq2_0", "ptq1_0"}) {
    SCOPED_TRACE(type);
    const std::string path = std::filesystem::temp_directory_path() / ("polykv_ternary_" + type + ".gguf");
    const auto q = test::polykv("quantize " + test::embedded_model() + " " + path + " " + type + " -t 2");
    ASSERT_EQ(q.code, 0) << q.out;
    {
      const GgufFile f = GgufFile::open(path);
      int n_ternary = 0;
      for (const GgufTensor& t : f.tensors()) {
        if (t.name == "token_embd.weight" || t.name == "output.weight")
          EXPECT_NE(dtype_name(t.type), type) << t.name;
        else if (dtype_name(t.type) == type)
          ++n_ternary;
      }
      EXPECT_GT(n_ternary, 0);
    }
    const auto r = test::polykv("run -m " + path + " -t 2 -n 8 --temp 0 -p 'def f('");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("8 tokens"), std::string::npos) << r.out;
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace polykv
