// CUDA graphs of steps wider than a decode step (CudaBackend records steps of up to 128 rows,
// POLYKV_CUDA_GRAPH_ROWS): a sequence fed chunks of 16 and of 40 tokens (the shape of a many-agent
// decode step: the same key step after step, so the third step on is replayed) gives the same logits,
// bit for bit, with graphs on and off; the 40-row steps take the mmq path (split q8_0 weights). Skips
// without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "../test_util.h"
#include "backend/backend.h"
#include "cuda_test_util.h"
#include "engine/sequence_kv.h"
#include "model/model.h"

namespace polykv {
namespace {

TEST(CudaGraphRows, WideStepsReplayedEqualEager) {
  POLYKV_REQUIRE_GPU();
  for (const int chunk : {16, 40}) {
    SCOPED_TRACE(chunk);
    std::vector<std::vector<float>> runs[2];
    for (int graphs = 0; graphs < 2; ++graphs) {
      setenv("POLYKV_CUDA_GRAPHS", graphs ? "1" : "0", 1);
      auto backend = make_backend({"cuda", 0});
      unsetenv("POLYKV_CUDA_GRAPHS");
      auto model = Model::load(test::embedded_model(), *backend);
      const int n_vocab = model->config().n_vocab;
      SequenceKvOptions o;
      o.k_type = "q8_0";
      o.v_type = "q8_0";
      o.max_tokens = 256;  // one attention bucket: every step below has the same graph key
      auto kv = make_sequence_kv(*model, o);
      std::vector<int32_t> prompt = {1, 42, 7, 300, 5, 99, 12, 8};
      std::vector<float> first(prompt.size() * size_t(n_vocab));
      model->forward(prompt, *kv, first.data(), true);
      const int steps = (240 - int(prompt.size())) / chunk;
      for (int step = 0; step < steps; ++step) {
        std::vector<int32_t> toks(static_cast<size_t>(chunk));
        for (int i = 0; i < chunk; ++i) toks[size_t(i)] = int32_t((step * 131 + i * 37 + 11) % n_vocab);
        std::vector<float> l(size_t(chunk) * size_t(n_vocab));
        model->forward(toks, *kv, l.data(), true);
        runs[graphs].push_back(std::move(l));
      }
    }
    ASSERT_EQ(runs[0].size(), runs[1].size());
    for (size_t s = 0; s < runs[0].size(); ++s) {
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < runs[0][s].size(); ++i)
        if (std::memcmp(&runs[0][s][i], &runs[1][s][i], 4) != 0 && bad++ == 0) first = i;
      EXPECT_EQ(bad, 0u) << "step " << s << " of " << chunk << " rows: " << bad << " logits differ; first at "
                         << first << ": graphs " << runs[1][s][first] << ", eager " << runs[0][s][first];
    }
  }
}

}  // namespace
}  // namespace polykv
