// OwnedPagedKv (a sequence's own block store and identity table) against KvCache: the same forward
// results bit for bit on the CPU, for every KV type pair without KvCache-only features, sliding-window
// models included (KvCache releases blocks there, OwnedPagedKv keeps them); and make_sequence_kv's
// choice between them.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/error.h"
#include "engine/sequence_kv.h"
#include "kv/kv_cache.h"
#include "kv/owned_paged_kv.h"
#include "model/model.h"
#include "test_util.h"

namespace polykv {
namespace {

std::vector<int32_t> ids(int n, int seed, int n_vocab) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = 3 + (seed * 71 + i * 53 + (i * i) % 13) % (n_vocab - 3);
  return v;
}

// All logits of `tokens` through kv: a prompt in chunks of 11, then one token at a time.
std::vector<float> run(Model& m, KvSequence& kv, const std::vector<int32_t>& tokens, size_t prompt) {
  const size_t V = size_t(m.config().n_vocab);
  std::vector<float> out(tokens.size() * V);
  for (size_t p = 0; p < prompt; p += 11) {
    const size_t n = std::min<size_t>(11, prompt - p);
    m.forward(std::span(tokens).subspan(p, n), kv, out.data() + p * V, true);
  }
  for (size_t t = prompt; t < tokens.size(); ++t) m.forward(std::span(tokens).subspan(t, 1), kv, out.data() + t * V, false);
  return out;
}

void expect_same(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, double(std::fabs(got[i] - want[i])));
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << "max |diff| " << worst;
}

struct TypePair {
  KvType k, v;
};
const TypePair kTypes[] = {{KvType::F16, KvType::F16},     {KvType::Q8_0, KvType::Q8_0},
                           {KvType::Q8_0, KvType::Turbo3T}, {KvType::Q4_0, KvType::Turbo4},
                           {KvType::F32, KvType::BF16},    {KvType::Turbo4T, KvType::Turbo2}};

void compare_on(Model& m, int owned_block_tokens) {
  const std::vector<int32_t> toks = ids(70, 1, m.config().n_vocab);
  for (const TypePair& t : kTypes) {
    SCOPED_TRACE(testing::Message() << kv_type_name(t.k) << "/" << kv_type_name(t.v) << " blocks of "
                                    << owned_block_tokens);
    // KvCache in blocks of 16: sliding-window layers (window 16 in the gemma fixtures) release blocks.
    KvCache cache(m.kv_shape(), t.k, t.v, 80, 16);
    OwnedPagedKv owned(m.kv_shape(), t.k, t.v, 80, owned_block_tokens);
    expect_same(run(m, owned, toks, 40), run(m, cache, toks, 40));
  }
}

TEST(OwnedPagedKv, SameLogitsAsKvCacheEmbeddedModel) {
  CpuBackend cpu(2);
  auto m = Model::load(test::embedded_model(), cpu);
  compare_on(*m, 32);
}

TEST(OwnedPagedKv, SameLogitsAsKvCacheEveryFamily) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  CpuBackend cpu(2);
  for (const char* name : {"llama3_gqa", "qwen2", "qwen3", "gemma2", "gemma3"}) {
    SCOPED_TRACE(name);
    auto m = Model::load(test::fixtures_dir() + "/models/random/" + name + ".gguf", cpu);
    compare_on(*m, name[0] == 'g' ? 256 : 48);
  }
}

TEST(OwnedPagedKv, SizesAndTable) {
  const KvShape shape{2, 2, 64, 64, {}};
  OwnedPagedKv kv(shape, KvType::Q8_0, KvType::F16, 100, 32);  // 4 blocks of 32 >= 100 positions
  EXPECT_EQ(kv.max_tokens(), 100);
  EXPECT_EQ(kv.n_tokens(), 0);
  ASSERT_NE(kv.block_store(), nullptr);
  EXPECT_EQ(kv.block_store()->n_blocks(), 4);
  EXPECT_EQ(std::vector<BlockId>(kv.block_table().begin(), kv.block_table().end()), (std::vector<BlockId>{0, 1, 2, 3}));
  EXPECT_EQ(kv.bytes_per_token(), KvCache(shape, KvType::Q8_0, KvType::F16, 8).bytes_per_token());
  EXPECT_EQ(kv.allocated_bytes(), 4 * kv.block_store()->block_bytes());
  EXPECT_FALSE(kv.k_equalizer().enabled());
  const std::vector<float> k(2 * 64, 1.0f), v(2 * 64, 1.0f);
  EXPECT_THROW(kv.store(0, 100, 1, k.data(), v.data(), nullptr), Error);  // past max_tokens
  EXPECT_THROW(OwnedPagedKv(shape, KvType::F16, KvType::F16, 0), Error);
}

// A rollback: truncate, then other tokens from there, gives what a fresh sequence of those tokens gives.
TEST(OwnedPagedKv, TruncateThenContinueEqualsFresh) {
  CpuBackend cpu(2);
  auto m = Model::load(test::embedded_model(), cpu);
  const size_t V = size_t(m->config().n_vocab);
  std::vector<int32_t> a = ids(30, 2, int(V)), b = a;
  for (size_t i = 20; i < b.size(); ++i) b[i] = ids(10, 3, int(V))[i - 20];
  OwnedPagedKv kv(m->kv_shape(), KvType::Q8_0, KvType::Turbo3T, 64, 16);
  run(*m, kv, a, 30);
  kv.truncate(20);
  EXPECT_EQ(kv.n_tokens(), 20);
  std::vector<float> got(10 * V);
  m->forward(std::span(b).subspan(20), kv, got.data(), true);
  OwnedPagedKv fresh(m->kv_shape(), KvType::Q8_0, KvType::Turbo3T, 64, 16);
  const std::vector<float> want = run(*m, fresh, b, 30);
  expect_same(got, std::vector<float>(want.begin() + 20 * ptrdiff_t(V), want.end()));
}

TEST(OwnedPagedKv, HostStoreRefusesDeviceMemory) {
  test::FakeDeviceKvMemory device;
  const KvShape shape{1, 1, 32, 32, {}};
  OwnedPagedKv kv(shape, KvType::F16, KvType::F16, 8, 8, device);
  EXPECT_EQ(&kv.block_store()->memory(), &device);
  const std::vector<float> k(32, 1.0f), v(32, 1.0f);
  try {
    kv.store(0, 0, 1, k.data(), v.data(), nullptr);
    FAIL() << "stored into memory the host must not touch";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fake-device"), std::string::npos) << e.what();
  }
}

TEST(SequenceKv, HostMemoryGivesAKvCacheWithItsFeatures) {
  CpuBackend cpu(1);
  auto m = Model::load(test::embedded_model(), cpu);
  SequenceKvOptions o;
  o.k_type = "q8_0";
  o.v_type = "turbo3w";
  o.max_tokens = 64;
  o.k_eq = 0.5f;
  const std::unique_ptr<KvSequence> kv = make_sequence_kv(*m, o);
  const auto* cache = dynamic_cast<const KvCache*>(kv.get());
  ASSERT_NE(cache, nullptr);
  EXPECT_TRUE(cache->v_window().enabled());
  EXPECT_TRUE(cache->k_equalizer().enabled());
  EXPECT_EQ(cache->max_tokens(), 64);
}

TEST(SequenceKv, DeviceMemoryGivesAnOwnedPagedKv) {
  test::FakeDeviceKvMemory device;
  test::CountingBackend be(1, DeviceKind::Cpu, &device);
  auto m = Model::load(test::embedded_model(), be);
  SequenceKvOptions o;
  o.k_type = "q8_0";
  o.v_type = "turbo3t";
  o.max_tokens = 100;
  o.block_tokens = 64;
  const std::unique_ptr<KvSequence> kv = make_sequence_kv(*m, o);
  ASSERT_NE(dynamic_cast<OwnedPagedKv*>(kv.get()), nullptr);
  EXPECT_EQ(&kv->block_store()->memory(), &device);
  EXPECT_EQ(kv->block_store()->n_blocks(), 2);
  EXPECT_EQ(kv->block_store()->v_type(), KvType::Turbo3T);
  EXPECT_EQ(kv->max_tokens(), 100);

  o.v_type = "turbo3w";
  EXPECT_THROW(make_sequence_kv(*m, o), Error);
  o.v_type = "turbo3t";
  o.k_eq = 0.5f;
  EXPECT_THROW(make_sequence_kv(*m, o), Error);
  o.k_eq = 0;
  o.k_type = "q9_9";
  EXPECT_THROW(make_sequence_kv(*m, o), Error);
}

}  // namespace
}  // namespace polykv
