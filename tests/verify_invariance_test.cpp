// Batch invariance of speculative verification (issue #10): the logits a drafted token gets in a
// k-token verify step (one forward over k tokens, all logits) are bit-identical (memcmp) to the
// logits it gets when the same tokens are decoded one at a time, for k = 1..8, at a short depth and
// at one past several 256-key attention chunks, for three K/V type pairs, in a private KvCache and
// in sequences of the engine's block pool forked from one shared prefix (prefix sharing on), with
// rollbacks (rejected drafts) in between. The embedded model (q8_0 weights: the packed q8_0 kernels)
// for every case; synth "tiny" models in other weight types for one case each.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "kv/kv_block_store.h"
#include "kv/kv_sequence_manager.h"
#include "kv/paged_kv.h"
#include "model/model.h"
#include "model/synth.h"
#include "test_util.h"

namespace polykv {
namespace {

constexpr int kMaxK = 8;

std::vector<int32_t> ids(int n, int seed, int n_vocab) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = 3 + (seed * 131 + i * 37 + (i * i) % 11) % (n_vocab - 3);
  return v;
}

struct Case {
  KvType k, v;
  int depth;
  DType synth = DType::F32;  // F32: the embedded model; else a synth "tiny" model with matrices of this type
};

std::string name(const Case& c) {
  std::string s = std::string(kv_type_name(c.k)) + "_" + kv_type_name(c.v) + "_d" + std::to_string(c.depth);
  if (c.synth != DType::F32) s += std::string("_synth_") + dtype_name(c.synth);
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// Removes the synth model files this process wrote, at exit.
struct TempFiles {
  std::vector<std::string> paths;
  ~TempFiles() {
    for (const auto& p : paths) std::filesystem::remove(p);
  }
};
TempFiles g_temp_files;

// The model file of a case (a synth one is written once per process and type).
std::string model_path(DType synth) {
  if (synth == DType::F32) return test::embedded_model();
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("polykv_verify_" + std::string(dtype_name(synth)) + "_" + std::to_string(getpid()) + ".gguf"))
                               .string();
  if (!std::filesystem::exists(path)) {
    SynthOptions o;
    o.type = synth;
    o.seed = 11;
    o.n_threads = 2;
    write_synth_model(path, find_model_shape("tiny"), o);
    g_temp_files.paths.push_back(path);
  }
  return path;
}

// Prefills `prompt` in chunks of 64 (the same way in every run).
void prefill(Model& m, KvSequence& kv, const std::vector<int32_t>& prompt) {
  for (size_t p = 0; p < prompt.size(); p += 64) {
    const size_t n = std::min<size_t>(64, prompt.size() - p);
    m.forward(std::span(prompt).subspan(p, n), kv, nullptr, false);
  }
}

// Expects rows [0, n) of got to equal rows [from, from + n) of ref, byte for byte.
void expect_rows(const std::vector<float>& got, const std::vector<float>& ref, int from, int n, int n_vocab,
                 const std::string& what) {
  for (int i = 0; i < n; ++i) {
    const float* g = got.data() + size_t(i) * size_t(n_vocab);
    const float* r = ref.data() + size_t(from + i) * size_t(n_vocab);
    if (std::memcmp(g, r, size_t(n_vocab) * sizeof(float)) == 0) continue;
    int j = 0;
    while (g[j] == r[j] && j + 1 < n_vocab) ++j;
    ADD_FAILURE() << what << ": drafted token " << from + i << " differs from one-at-a-time decoding, first at "
                  << "logit " << j << ": " << g[j] << " vs " << r[j];
  }
}

class VerifyInvariance : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    backend_ = std::make_unique<CpuBackend>(2);
    const Case& c = GetParam();
    model_ = Model::load(model_path(c.synth), *backend_);
    n_vocab_ = model_->config().n_vocab;
    prompt_ = ids(c.depth, 1, n_vocab_);
    draft_ = ids(2 * kMaxK, 2, n_vocab_);
    // Reference: the prompt, then every draft token decoded alone. ref_[i]: logits after draft_[i].
    KvCache kv(model_->kv_shape(), c.k, c.v, c.depth + 2 * kMaxK, 16);
    prefill(*model_, kv, prompt_);
    ref_.resize(draft_.size() * size_t(n_vocab_));
    for (size_t i = 0; i < draft_.size(); ++i)
      model_->forward(std::span(draft_).subspan(i, 1), kv, ref_.data() + i * size_t(n_vocab_), false);
  }

  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<Model> model_;
  int n_vocab_ = 0;
  std::vector<int32_t> prompt_, draft_;
  std::vector<float> ref_;  // [2 * kMaxK][n_vocab]
};

// A private KvCache: verify k tokens, reject all but one (rollback), verify k more from there, then
// roll back to the prompt for the next k.
TEST_P(VerifyInvariance, VerifyStepEqualsOneAtATime) {
  const Case& c = GetParam();
  KvCache kv(model_->kv_shape(), c.k, c.v, c.depth + 2 * kMaxK, 16);
  prefill(*model_, kv, prompt_);
  for (int k = 1; k <= kMaxK; ++k) {
    SCOPED_TRACE(name(c) + " k " + std::to_string(k));
    kv.truncate(c.depth);
    std::vector<float> got(size_t(k) * size_t(n_vocab_));
    model_->forward(std::span(draft_).subspan(0, size_t(k)), kv, got.data(), true);
    expect_rows(got, ref_, 0, k, n_vocab_, "first verify");
    kv.truncate(c.depth + 1);  // draft_[0] accepted, the rest rejected
    model_->forward(std::span(draft_).subspan(1, size_t(k)), kv, got.data(), true);
    expect_rows(got, ref_, 1, k, n_vocab_, "verify after a rollback");
  }
}

// The engine's block pool: the prompt is computed once in a parent sequence; one child per k = 1..8
// is forked from it (sharing its blocks, the partial last one included: the first write copies it)
// and all children verify their k drafted tokens in ONE forward_batch, the shared prefix blocks read
// once for all of them (cascade attention).
TEST_P(VerifyInvariance, ForkedFromSharedPrefix) {
  const Case& c = GetParam();
  if (c.synth != DType::F32) GTEST_SKIP() << "the synth models run the private-cache test only";
  SCOPED_TRACE(name(c));
  constexpr int bt = 16;
  const int n_blocks = (c.depth + bt - 1) / bt + kMaxK * ((2 * kMaxK) / bt + 2) + 4;
  KvBlockStore store(model_->kv_shape(), c.k, c.v, n_blocks, bt);
  KvSequenceManager mgr(n_blocks, bt);
  std::vector<KvSequenceManager::BlockCopy> copies;
  auto sync = [&](KvSequenceManager::SeqId sid, PagedKv& kv) {
    for (const auto& cp : copies) store.copy_block(cp.src, cp.dst);
    copies.clear();
    kv.set_blocks(mgr.block_table(sid));
  };

  const KvSequenceManager::SeqId parent = 100;
  mgr.add_sequence(parent, prompt_, 7);
  ASSERT_TRUE(mgr.reserve(parent, c.depth, copies));
  PagedKv parent_kv(store, c.depth + 2 * kMaxK);
  sync(parent, parent_kv);
  prefill(*model_, parent_kv, prompt_);
  mgr.mark_computed(parent, c.depth);

  std::vector<std::unique_ptr<PagedKv>> kvs;
  std::vector<std::vector<float>> got(kMaxK);
  std::vector<Model::BatchSeq> batch;
  for (int k = 1; k <= kMaxK; ++k) {
    mgr.fork(k, parent);
    mgr.append_tokens(k, std::span(draft_).subspan(0, size_t(k)));
    ASSERT_TRUE(mgr.reserve(k, k, copies));
    kvs.push_back(std::make_unique<PagedKv>(store, c.depth + 2 * kMaxK));
    sync(k, *kvs.back());
    kvs.back()->reset(c.depth);
    got[size_t(k - 1)].resize(size_t(k) * size_t(n_vocab_));
    batch.push_back({std::span(draft_).subspan(0, size_t(k)), kvs.back().get(), got[size_t(k - 1)].data(), true});
  }
  model_->forward_batch(batch);
  for (int k = 1; k <= kMaxK; ++k) {
    SCOPED_TRACE("k " + std::to_string(k));
    mgr.mark_computed(k, c.depth + k);
    expect_rows(got[size_t(k - 1)], ref_, 0, k, n_vocab_, "forked verify");
  }

  // Each child keeps its first drafted token and verifies k more (its rollback goes through the
  // manager: truncate, reserve again, rebind), again all in one batch.
  batch.clear();
  for (int k = 1; k <= kMaxK; ++k) {
    mgr.truncate(k, c.depth + 1);
    mgr.append_tokens(k, std::span(draft_).subspan(1, size_t(k)));
    ASSERT_TRUE(mgr.reserve(k, k, copies));
    PagedKv& kv = *kvs[size_t(k - 1)];
    sync(k, kv);
    kv.reset(c.depth + 1);
    batch.push_back({std::span(draft_).subspan(1, size_t(k)), &kv, got[size_t(k - 1)].data(), true});
  }
  model_->forward_batch(batch);
  for (int k = 1; k <= kMaxK; ++k) {
    SCOPED_TRACE("k " + std::to_string(k));
    expect_rows(got[size_t(k - 1)], ref_, 1, k, n_vocab_, "forked verify after a rollback");
  }
}

// Depth 20: one attention chunk; depth 300: queries past the first 256-key chunk (two chunks,
// folded by log-sum-exp), a prompt of 5 chunks of 64 and a partial block of 16. Synth models: the
// other weight-kernel families (k-quant rows, packed q4_0, float tiles).
INSTANTIATE_TEST_SUITE_P(
    KvPairs, VerifyInvariance,
    testing::Values(Case{KvType::F16, KvType::F16, 20}, Case{KvType::F16, KvType::F16, 300},
                    Case{KvType::Q8_0, KvType::Turbo3T, 20}, Case{KvType::Q8_0, KvType::Turbo3T, 300},
                    Case{KvType::Turbo3T, KvType::Turbo3T, 20}, Case{KvType::Turbo3T, KvType::Turbo3T, 300},
                    Case{KvType::Q4_0, KvType::Q4_0, 300},
                    // Depth 1100 (5 chunks, the split flash-decoding path), k up to 8: 18 rows per KV
                    // head, the transposed-tile score kernel (more than 8 rows per tile).
                    Case{KvType::Q8_0, KvType::Turbo3T, 1100},
                    Case{KvType::Q8_0, KvType::Turbo3T, 300, DType::Q4_K},
                    Case{KvType::Q8_0, KvType::Turbo3T, 300, DType::Q6_K},
                    Case{KvType::Q8_0, KvType::Turbo3T, 300, DType::Q4_0},
                    Case{KvType::F16, KvType::F16, 300, DType::F16},
                    Case{KvType::F16, KvType::F16, 300, DType::BF16}),
    [](const testing::TestParamInfo<Case>& i) { return name(i.param); });

}  // namespace
}  // namespace polykv
