// The MoE fixtures (qwen3moe, gpt-oss) through Model::forward_batch: each sequence's logits are
// bit-identical to the same tokens run alone through a private KvCache, whatever the batch and the
// chunks (the experts group rows of all sequences of a step, model/moe_ffn.h). And gpt-oss's attention
// is refused at load on a device backend; a backend without the MoE ops fails clearly in them.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/error.h"
#include "kv/kv_block_store.h"
#include "kv/paged_kv.h"
#include "model/model.h"
#include "forward_batch_check.h"
#include "test_util.h"

namespace polykv {
namespace {

std::string fixture(const std::string& name) { return test::fixtures_dir() + "/models/random/" + name + ".gguf"; }

class MoeForwardBatch : public testing::TestWithParam<std::string> {};

TEST_P(MoeForwardBatch, EachSequenceMatchesItsRunAlone) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  CpuBackend backend(2);
  auto model = Model::load(fixture(GetParam()), backend);
  test::expect_batched_equals_alone(*model, KvType::Q8_0, KvType::Turbo3T);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MoeForwardBatch, testing::Values("qwen3moe", "gptoss"));

// gpt-oss's attention (sinks, YaRN, output bias) runs on every backend now: GptOssBackendCheck
// (gptoss_backend_check_test.cpp) checks that a device backend loads it.

// MoE FFNs are no longer refused at load on a device backend (CUDA has the MoE ops); a backend
// without them fails in the first MoE op with a clear error instead (Backend's defaults).
TEST(MoeBackend, BackendWithoutMoeOpsFailsClearly) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  test::CountingBackend be(1, DeviceKind::Cuda);
  auto model = Model::load(fixture("qwen3moe"), be);
  KvCache kv(model->kv_shape(), KvType::F16, KvType::F16, 16);
  const int32_t tok = 5;
  std::vector<float> logits(static_cast<size_t>(model->config().n_vocab));
  try {
    model->forward(std::span(&tok, 1), kv, logits.data(), false);
    ADD_FAILURE() << "qwen3moe ran on a backend without the MoE ops";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mixture-of-experts"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace polykv
