// The recurrent state of a hybrid model (qwen35) beside its KV: rollback of a speculative-verification
// step (truncate(n) inside the last step gives, bit for bit, the state and logits of a run that stopped
// at n), what cannot be rolled back, a reset by truncate(0), and a copied state continuing like the original.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/error.h"
#include "engine/sequence_kv.h"
#include "kv/recurrent_state.h"
#include "model/model.h"
#include "hybrid_test_util.h"
#include "test_util.h"

namespace polykv {
namespace {

constexpr int kVocab = 8000;

struct Fixture : test::Qwen35Fixture {
  KvCache cache() const { return KvCache(model->kv_shape(), KvType::F32, KvType::F32, 64, 16); }
  std::vector<float> step(KvCache& kv, int from, int to) {
    std::vector<float> logits(size_t(to - from) * kVocab);
    model->forward(std::span(ids).subspan(size_t(from), size_t(to - from)), kv, logits.data(), true);
    return logits;
  }
};

std::vector<float> state_bytes(KvCache& kv) {
  RecurrentState& r = *kv.recurrent_state();
  std::vector<float> out;
  for (int l = 0; l < r.shape().n_layer; ++l) {
    out.insert(out.end(), r.conv(l), r.conv(l) + r.shape().conv_floats());
    out.insert(out.end(), r.ssm(l), r.ssm(l) + r.shape().ssm_floats());
  }
  return out;
}

TEST(HybridState, KvShapeHasStateBesideAttentionLayers) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  const KvShape s = f.model->kv_shape();
  EXPECT_EQ(s.n_layer, 1);            // L L L F: one layer with KV
  EXPECT_EQ(s.recurrent.n_layer, 3);  // three with a recurrent state
  EXPECT_EQ(s.recurrent.conv_channels(), 256);
}

TEST(HybridState, TruncateInsideVerifyStepEqualsShorterRun) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  for (int keep : {0, 2, 5}) {  // of a 6-row step at 40: roll back to 40 + keep
    KvCache a = f.cache(), b = f.cache();
    f.step(a, 0, 40);
    f.step(a, 40, 46);
    a.truncate(40 + keep);
    f.step(b, 0, 40);
    if (keep > 0) f.step(b, 40, 40 + keep);
    EXPECT_EQ(state_bytes(a), state_bytes(b)) << "keep " << keep;
    EXPECT_EQ(f.step(a, 40 + keep, 48), f.step(b, 40 + keep, 48)) << "keep " << keep;
  }
}

TEST(HybridState, RepeatedTruncateWithinOneStep) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  KvCache a = f.cache(), b = f.cache();
  f.step(a, 0, 40);
  f.step(a, 40, 48);
  a.truncate(45);
  a.truncate(42);  // further back, still inside the step
  f.step(b, 0, 40);
  f.step(b, 40, 42);
  EXPECT_EQ(state_bytes(a), state_bytes(b));
}

TEST(HybridState, CannotRollBackPastTheLastStep) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  KvCache a = f.cache();
  f.step(a, 0, 40);  // a long step (a prompt): only undone whole
  EXPECT_THROW(a.truncate(39), Error);
  EXPECT_EQ(a.n_tokens(), 40);  // nothing changed
  f.step(a, 40, 44);
  EXPECT_THROW(a.truncate(39), Error);
  a.truncate(40);  // the step's start
  EXPECT_EQ(a.n_tokens(), 40);
}

TEST(HybridState, UndoWholePromptStepAndTruncateToZero) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  KvCache a = f.cache(), b = f.cache();
  f.step(a, 0, 20);
  f.step(a, 20, 40);  // 20 rows: not logged, but its start is kept
  a.truncate(20);
  f.step(b, 0, 20);
  EXPECT_EQ(state_bytes(a), state_bytes(b));
  a.truncate(0);  // a new sequence
  KvCache c = f.cache();
  EXPECT_EQ(f.step(a, 0, 8), f.step(c, 0, 8));
}

TEST(HybridState, CopiedStateContinuesLikeTheOriginal) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  KvCache a = f.cache();
  f.step(a, 0, 40);
  // b holds the same KV; its state is wiped, then given a's by copy: it continues identically.
  KvCache b = f.cache();
  f.step(b, 0, 40);
  b.recurrent_state()->reset();
  EXPECT_NE(state_bytes(a), state_bytes(b));
  b.recurrent_state()->copy_from(*a.recurrent_state());
  EXPECT_EQ(b.recurrent_state()->n_tokens(), 40);
  EXPECT_EQ(f.step(a, 40, 48), f.step(b, 40, 48));
}

// bench's repetitions at a depth: a mark keeps the state at the depth, so the KV comes back there after
// steps the state alone could not roll back (a prompt chunk, then single tokens), and the same tokens give
// the same logits again, bit for bit.
TEST(HybridState, SequenceMarkRewindsPastSeveralSteps) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  KvCache a = f.cache();
  f.step(a, 0, 24);
  const SequenceMark mark(a);
  EXPECT_EQ(mark.position(), 24);
  std::vector<float> first;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    std::vector<float> got = f.step(a, 24, 36);
    for (int p = 36; p < 40; ++p) {
      const std::vector<float> one = f.step(a, p, p + 1);
      got.insert(got.end(), one.begin(), one.end());
    }
    EXPECT_THROW(truncate_sequence_kv(a, 24), Error);  // the state alone cannot go back there
    if (round == 0) first = got;
    EXPECT_EQ(got, first);
    mark.rewind(a);
    EXPECT_EQ(a.n_tokens(), 24);
    EXPECT_EQ(a.recurrent_state()->n_tokens(), 24);
  }
  // `bench --depth` on the hybrid fixture: repetitions come back to the depth.
  const test::CliResult r = test::polykv("bench -m " + test::fixtures_dir() +
                                         "/models/random/qwen35.gguf -d 40 -p 8 -n 4 -r 2 -t 1 --json");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"depth\":40"), std::string::npos) << r.out;
}

// A device backend without the hybrid ops (Backend's defaults) loads the model (CUDA has them) but
// refuses the first Gated DeltaNet op with an Error naming it, instead of crashing.
TEST(HybridState, DeviceBackendWithoutHybridOpsRefusesClearly) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  test::CountingBackend dev(1, DeviceKind::Cuda);
  setenv("POLYKV_CUDA_HYBRID", "0", 1);  // the opt-out
  EXPECT_THROW(Model::load(test::fixtures_dir() + "/models/random/qwen35.gguf", dev), Error);
  unsetenv("POLYKV_CUDA_HYBRID");
  auto model = Model::load(test::fixtures_dir() + "/models/random/qwen35.gguf", dev);  // the default: runs
  KvCache kv(model->kv_shape(), KvType::F32, KvType::F32, 64, 16);
  const int32_t tok = 1;
  std::vector<float> logits(size_t(model->config().n_vocab));
  try {
    model->forward(std::span(&tok, 1), kv, logits.data(), false);
    FAIL() << "a hybrid model ran on a device backend without the hybrid ops";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not run hybrid (Gated DeltaNet) models yet (op ssm_conv)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace polykv
