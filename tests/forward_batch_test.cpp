// Model::forward_batch over paged sequences in the shared block store: each sequence's logits equal
// those of the same tokens run alone through a private KvCache, whatever the batch and the chunks.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "kv/kv_block_store.h"
#include "kv/paged_kv.h"
#include "model/model.h"
#include "forward_batch_check.h"
#include "test_util.h"

namespace polykv {
namespace {

class ForwardBatch : public testing::TestWithParam<std::pair<KvType, KvType>> {};

TEST_P(ForwardBatch, EachSequenceMatchesItsRunAlone) {
  CpuBackend backend(2);
  auto model = Model::load(test::embedded_model(), backend);
  const auto [kt, vt] = GetParam();
  test::expect_batched_equals_alone(*model, kt, vt);
}

TEST(ForwardBatchArgmax, ArgmaxRowsMatchTheLogits) {
  CpuBackend backend(2);
  auto model = Model::load(test::embedded_model(), backend);
  test::expect_argmax_rows(*model, KvType::Q8_0, KvType::Turbo3T, /*exact_alone=*/true);
}

INSTANTIATE_TEST_SUITE_P(KvTypes, ForwardBatch,
                         testing::Values(std::pair{KvType::F32, KvType::F32}, std::pair{KvType::Q8_0, KvType::Turbo3T},
                                         std::pair{KvType::F16, KvType::F16}));

}  // namespace
}  // namespace polykv
