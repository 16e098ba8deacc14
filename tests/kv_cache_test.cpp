// KV types (names, exact sizes, head-size checks) and the paged KvCache (quantizing store, views,
// release of blocks outside a sliding window, rollback rules).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "backend/cpu/kv_row_ops.h"
#include "kv/kv_cache.h"
#include "test_util.h"

namespace polykv {
namespace {

TEST(KvType, NamesRoundTrip) {
  for (KvType t : kAllKvTypes) EXPECT_EQ(parse_kv_type(kv_type_name(t)), t);
  EXPECT_EQ(parse_kv_type("Q8_0"), KvType::Q8_0);
  EXPECT_EQ(parse_kv_type("TURBO3"), KvType::Turbo3);
}

TEST(KvType, UnknownNameListsValidOnes) {
  try {
    parse_kv_type("q5_k");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("q5_k"), std::string::npos) << msg;
    for (KvType t : kAllKvTypes) EXPECT_NE(msg.find(kv_type_name(t)), std::string::npos) << msg;
  }
}

// kv_type_f32_query(t): the prepared query is head_dim f32 values in the rows' basis, so the f32 dot
// of a row decoded in that basis (the row kernels' decode) with it equals the type's own dot.
TEST(KvType, F32QueriesAreInTheRowsBasis) {
  const int hd = 128;
  const auto x = test::random_floats(hd, 5, 2.0f), q = test::random_floats(hd, 6);
  for (KvType t : kAllKvTypes) {
    const KvTypeOps& ops = kv_type_ops(t);
    const bool f32 = kv_type_f32_query(t);
    EXPECT_EQ(f32, ops.query_bytes(hd) == hd * sizeof(float)) << kv_type_name(t);
    if (!f32) continue;
    std::vector<uint8_t> row(kv_head_bytes(t, hd));
    ops.quantize_head(x.data(), row.data(), hd);
    std::vector<float> qp(static_cast<size_t>(hd)), dec(static_cast<size_t>(hd));
    ops.prepare_query(q.data(), reinterpret_cast<uint8_t*>(qp.data()), hd);
    kv_row_kernels_scalar(t).decode(row.data(), dec.data(), hd);
    double d = 0;
    for (int i = 0; i < hd; ++i) d += double(dec[size_t(i)]) * qp[size_t(i)];
    const float want = ops.dot(row.data(), reinterpret_cast<const uint8_t*>(qp.data()), hd);
    EXPECT_NEAR(d, want, 1e-4 * (1 + std::abs(want))) << kv_type_name(t);
  }
}

TEST(KvType, BytesPerHeadAreExact) {
  EXPECT_EQ(kv_head_bytes(KvType::F32, 128), 512u);
  EXPECT_EQ(kv_head_bytes(KvType::F16, 128), 256u);
  EXPECT_EQ(kv_head_bytes(KvType::BF16, 64), 128u);
  EXPECT_EQ(kv_head_bytes(KvType::Q8_0, 128), 4u * 34u);
  EXPECT_EQ(kv_head_bytes(KvType::Q4_0, 128), 4u * 18u);
  EXPECT_EQ(kv_head_bytes(KvType::Q8_0, 64), 2u * 34u);
  EXPECT_EQ(kv_head_bytes(KvType::Turbo4, 128), 2u + 64u);
  EXPECT_EQ(kv_head_bytes(KvType::Turbo3, 128), 2u + 48u);
  EXPECT_EQ(kv_head_bytes(KvType::Turbo2, 128), 2u + 32u);
  EXPECT_EQ(kv_head_bytes(KvType::Turbo3, 64), 2u + 24u);
  EXPECT_EQ(kv_head_bytes(KvType::Turbo3, 256), 2u * 50u);
}

TEST(KvType, RefusesUnsupportedHeadSizes) {
  EXPECT_THROW(check_kv_head_dim(KvType::Q8_0, 48), Error);
  EXPECT_THROW(check_kv_head_dim(KvType::Q4_0, 80), Error);
  EXPECT_THROW(check_kv_head_dim(KvType::Turbo3, 96), Error);
  EXPECT_NO_THROW(check_kv_head_dim(KvType::F16, 80));
  EXPECT_NO_THROW(check_kv_head_dim(KvType::Turbo4, 512));
  EXPECT_THROW(KvCache(KvShape{2, 2, 48, 48, {}}, KvType::Q8_0, KvType::F16, 16), Error);
}

// store() quantizes in place: a view's rows decode to what the type's reference makes of the input.
TEST(KvCache, StoreQuantizesEachHeadRow) {
  const int H = 3, hd = 64, n = 37;
  KvShape shape{2, H, hd, hd, {}};
  for (KvType kt : {KvType::Q8_0, KvType::Turbo3, KvType::BF16}) {
    KvCache kv(shape, kt, KvType::Q4_0, 64, 16);
    const auto k = test::random_floats(size_t(n) * H * hd, 1), v = test::random_floats(size_t(n) * H * hd, 2);
    kv.store(1, 0, n, k.data(), v.data());
    kv.commit(n);
    EXPECT_EQ(kv.bytes_per_token(), 2 * H * (kv_head_bytes(kt, hd) + kv_head_bytes(KvType::Q4_0, hd)));
    const KvLayerView view = kv.view(1);
    std::vector<uint8_t> want(kv_head_bytes(kt, hd));
    for (int p : {0, 15, 16, 36})
      for (int g = 0; g < H; ++g) {
        kv_type_ops(kt).quantize_head(k.data() + (size_t(p) * H + g) * hd, want.data(), hd);
        EXPECT_EQ(std::memcmp(view.k_row(p, g), want.data(), want.size()), 0) << kv_type_name(kt) << " " << p;
      }
  }
}

// The parallel store writes the same bytes as the serial one (every row has one writer).
TEST(KvCache, ParallelStoreMatchesSerial) {
  const int H = 3, hd = 128, n = 77;
  KvShape shape{1, H, hd, hd, {}};
  ThreadPool pool(3);
  for (KvType vt : {KvType::Turbo3T, KvType::Turbo3, KvType::Q8_0}) {
    KvCache serial(shape, KvType::Q8_0, vt, 128, 16), parallel(shape, KvType::Q8_0, vt, 128, 16);
    const auto k = test::random_floats(size_t(n) * H * hd, 3), v = test::random_floats(size_t(n) * H * hd, 4);
    serial.store(0, 0, n, k.data(), v.data());
    parallel.store(0, 0, n, k.data(), v.data(), &pool);
    const KvLayerView a = serial.view(0), b = parallel.view(0);
    for (int p = 0; p < n; ++p)
      for (int g = 0; g < H; ++g) {
        ASSERT_EQ(std::memcmp(a.k_row(p, g), b.k_row(p, g), a.k_head_bytes), 0) << p;
        ASSERT_EQ(std::memcmp(a.v_row(p, g), b.v_row(p, g), a.v_head_bytes), 0) << kv_type_name(vt) << " " << p;
      }
  }
}

TEST(KvCache, SlidingLayersReleaseOldBlocks) {
  const int H = 2, hd = 64, W = 40, bt = 16, n = 1000;
  KvShape shape{2, H, hd, hd, {W, 0}};  // layer 0 sliding, layer 1 full
  KvCache kv(shape, KvType::Q8_0, KvType::Turbo3, n, bt);
  const auto k = test::random_floats(size_t(H) * hd, 1);
  for (int p = 0; p < n; ++p) {
    for (int il = 0; il < 2; ++il) kv.store(il, p, 1, k.data(), k.data());
    kv.commit(p + 1);
  }
  const size_t block_bytes = size_t(bt) * (kv.k_head_bytes() + kv.v_head_bytes()) * H;
  const size_t full_blocks = (n + bt - 1) / bt;
  // The full layer holds every block, the sliding one at most W / bt + 2.
  EXPECT_LE(kv.allocated_bytes(), (full_blocks + W / bt + 2) * block_bytes);
  EXPECT_GE(kv.allocated_bytes(), (full_blocks + W / bt) * block_bytes);
  const KvLayerView v0 = kv.view(0);
  EXPECT_EQ(v0.k_blocks[0], nullptr);
  EXPECT_NE(v0.k_blocks[(n - W) / bt], nullptr);
  // Rolling back past the released window is refused; a short rollback is fine.
  EXPECT_THROW(kv.truncate(n - 100), Error);
  EXPECT_NO_THROW(kv.truncate(n - 1));
}

TEST(KvCache, RollbackTokensKeepWhatARollbackNeeds) {
  const int H = 1, hd = 32, W = 16, bt = 8;
  KvShape shape{1, H, hd, hd, {W}};
  KvCache kv(shape, KvType::F16, KvType::F16, 256, bt, 64);
  const auto k = test::random_floats(size_t(64) * H * hd, 1);
  kv.store(0, 0, 64, k.data(), k.data());
  kv.commit(64);
  kv.store(0, 64, 64, k.data(), k.data());
  kv.commit(128);
  EXPECT_NO_THROW(kv.truncate(64));
  kv.store(0, 64, 64, k.data(), k.data());
  kv.commit(128);
}

}  // namespace
}  // namespace polykv
