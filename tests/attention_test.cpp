// The fast attention (backend/cpu/attention.h) against the scalar reference attention_ref for every
// K x V type pair, head sizes 64/128/256/512, GQA groups 1/2/4, lengths that are no multiple of the
// block size, sliding windows, softcap, prefill tiles and flash-decoding splits; and the SIMD row
// kernels against the scalar ones.
//
// Tolerance: both sides read the same stored rows. The fast path decodes every K and V row to f32 in
// its type's basis and dots it with the f32 query, except q8_0 K where the ISA scores it in integers
// (attention_q8.h: the query rounded to q8_0 blocks; the reference then rounds it the same way), so
// it differs from the reference only by f32 instead of double accumulation (~1e-6 relative). We
// require max |fast - ref| <= 1e-4 * max |ref| for every pair.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/kv_row_ops.h"
#include "kv/kv_cache.h"
#include "test_util.h"

namespace polykv {
namespace {

struct Case {
  int head_dim;
  int group;
  int n_past;  // tokens in the cache before the queries
  int n_q;
  int window;
  float softcap;
};

double tolerance(KvType) { return 1e-4; }

// Largest |fast - ref| relative to max |ref| for one case.
double run_case(KvType kt, KvType vt, const Case& c, ThreadPool& pool) {
  constexpr int kHeadKv = 2;
  const int n_head = kHeadKv * c.group, n = c.n_past + c.n_q;
  KvShape shape{1, kHeadKv, c.head_dim, c.head_dim, {}};
  KvCache kv(shape, kt, vt, n, 16);
  const auto k = test::random_floats(size_t(n) * kHeadKv * c.head_dim, 11);
  const auto v = test::random_floats(size_t(n) * kHeadKv * c.head_dim, 12);
  const auto q = test::random_floats(size_t(c.n_q) * n_head * c.head_dim, 13);
  kv.store(0, 0, n, k.data(), v.data());
  kv.commit(n);
  AttentionParams p;
  p.n_head = n_head;
  p.scale = 1.0f / std::sqrt(float(c.head_dim));
  p.softcap = c.softcap;
  p.window = c.window;
  std::vector<float> fast(size_t(c.n_q) * n_head * c.head_dim), ref(fast.size());
  attention(p, kv.view(0), c.n_past, c.n_q, q.data(), fast.data(), pool);
  attention_ref(p, kv.view(0), c.n_past, c.n_q, q.data(), ref.data(),
                attention_uses_q8_scores(attention_kernels(), kt, c.head_dim));
  double worst = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    worst = std::max(worst, double(std::abs(fast[i] - ref[i])));
    scale = std::max(scale, double(std::abs(ref[i])));
  }
  return worst / std::max(scale, 1e-30);
}

class AttentionPair : public ::testing::TestWithParam<std::tuple<KvType, KvType>> {};

TEST_P(AttentionPair, FastMatchesReference) {
  const auto [kt, vt] = GetParam();
  ThreadPool pool(2);
  const Case cases[] = {
      // decode, no split; GQA 1; awkward length
      {64, 1, 37, 1, 0, 0.0f},
      // prefill chunk over a cache (tiles of 8, partial last tile), GQA 4, softcap
      {128, 4, 21, 11, 0, 30.0f},
      // sliding window shorter than the range, GQA 2
      {256, 2, 50, 9, 20, 0.0f},
      // long decode: split into key chunks (flash-decoding), GQA 4, window longer than the cache
      {128, 4, 1500, 1, 4096, 0.0f},
      // long decode with a window that spans chunks, softcap
      {64, 2, 1300, 2, 1100, 50.0f},
      {512, 1, 45, 3, 0, 0.0f},
      // first prompt: queries start at position 0
      {64, 2, 0, 19, 7, 0.0f},
  };
  for (const Case& c : cases) {
    const double err = run_case(kt, vt, c, pool);
    EXPECT_LE(err, tolerance(kt)) << kv_type_name(kt) << "/" << kv_type_name(vt) << " hd " << c.head_dim << " group "
                                  << c.group << " past " << c.n_past << " n_q " << c.n_q << " window " << c.window
                                  << " softcap " << c.softcap;
  }
}

INSTANTIATE_TEST_SUITE_P(AllPairs, AttentionPair,
                         ::testing::Combine(::testing::ValuesIn(kAllKvTypes), ::testing::ValuesIn(kAllKvTypes)),
                         [](const auto& info) {
                           return std::string(kv_type_name(std::get<0>(info.param))) + "_" +
                                  kv_type_name(std::get<1>(info.param));
                         });

// Every row kernel of the best table for this CPU against the scalar table.
TEST(KvRowKernels, FastMatchScalar) {
  for (KvType t : kAllKvTypes)
    for (int hd : {32, 64, 128, 256, 512}) {
      const KvTypeOps& ops = kv_type_ops(t);
      const KvRowKernels& fast = kv_row_kernels(t);
      const KvRowKernels& ref = kv_row_kernels_scalar(t);
      const auto x = test::random_floats(size_t(hd), 21, 3.0f);
      const auto q = test::random_floats(size_t(hd), 22);
      std::vector<uint8_t> row(kv_head_bytes(t, hd));
      ops.quantize_head(x.data(), row.data(), hd);
      std::vector<float> qp_buf(ops.query_bytes(hd) / 4 + 1);
      auto* qp = reinterpret_cast<uint8_t*>(qp_buf.data());
      ops.prepare_query(q.data(), qp, hd);
      const std::string what = std::string(kv_type_name(t)) + " hd " + std::to_string(hd);

      const float d_fast = fast.dot(row.data(), qp, hd), d_ref = ref.dot(row.data(), qp, hd);
      EXPECT_NEAR(d_fast, d_ref, 1e-4 * (1 + std::abs(d_ref))) << what;

      // dot_n over 5 queries (a group of 4 and a tail) equals the single-query dot.
      {
        const size_t stride = (ops.query_bytes(hd) + 63) & ~size_t(63);
        std::vector<float> qs_buf(5 * stride / 4);
        auto* qs = reinterpret_cast<uint8_t*>(qs_buf.data());
        for (int r = 0; r < 5; ++r) {
          const auto qr = test::random_floats(size_t(hd), 30 + uint32_t(r));
          ops.prepare_query(qr.data(), qs + size_t(r) * stride, hd);
        }
        float out_fast[5], out_ref[5];
        fast.dot_n(row.data(), qs, stride, 5, out_fast, hd);
        ref.dot_n(row.data(), qs, stride, 5, out_ref, hd);
        for (int r = 0; r < 5; ++r) EXPECT_NEAR(out_fast[r], out_ref[r], 1e-4 * (1 + std::abs(out_ref[r]))) << what;
      }
      std::vector<float> dec_fast(static_cast<size_t>(hd)), dec_ref(static_cast<size_t>(hd));
      fast.decode(row.data(), dec_fast.data(), hd);
      ref.decode(row.data(), dec_ref.data(), hd);
      std::vector<float> acc_fast = q, acc_ref = q;
      fast.axpy(0.75f, row.data(), acc_fast.data(), hd);
      ref.axpy(0.75f, row.data(), acc_ref.data(), hd);
      for (int i = 0; i < hd; ++i) {
        EXPECT_NEAR(dec_fast[size_t(i)], dec_ref[size_t(i)], 1e-5 * (1 + std::abs(dec_ref[size_t(i)]))) << what;
        EXPECT_NEAR(acc_fast[size_t(i)], acc_ref[size_t(i)], 1e-5 * (1 + std::abs(acc_ref[size_t(i)]))) << what;
      }
      if (fast.f32_query) {  // decode-then-dot equals the row dot
        const float d2 = fast.dot_f32(dec_fast.data(), reinterpret_cast<const float*>(qp), hd);
        EXPECT_NEAR(d2, d_ref, 1e-4 * (1 + std::abs(d_ref))) << what;
      }
      // The type's basis decoded then finished equals the reference decoder (original basis).
      std::vector<float> orig(static_cast<size_t>(hd));
      ops.dequantize_head(row.data(), orig.data(), hd);
      ops.finish_output(dec_ref.data(), hd);
      for (int i = 0; i < hd; ++i) EXPECT_NEAR(dec_ref[size_t(i)], orig[size_t(i)], 1e-4) << what;
    }
}

}  // namespace
}  // namespace polykv
