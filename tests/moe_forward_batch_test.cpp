// The MoE fixtures (qwen3moe, gpt-oss) through Model::forward_batch: each sequence's logits are
// bit-identical to the same tokens run alone through a private KvCache, whatever the batch and the
// chunks (the experts group rows of all sequences of a step, model/moe_ffn.h). And a backend without
// the MoE ops refuses such a model at load with a clear error.
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

TEST(MoeBackend, DeviceBackendRefusesAtLoad) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  for (const char* name : {"qwen3moe", "gptoss"}) {
    test::CountingBackend be(1, DeviceKind::Cuda);
    try {
      Model::load(fixture(name), be);
      ADD_FAILURE() << name << " loaded on a backend without the MoE ops";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("does not run"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace polykv
