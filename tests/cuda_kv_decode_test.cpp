// The CUDA attention's row decoders (backend/cuda/kv_decode.cuh, __host__ __device__ code compiled
// here by g++) against the CPU's scalar references (kv/kv_type.h, quant/turbo*.h), for every KV type
// and every head size the type allows among 32, 64, 128, 256, 512, on random rows encoded by
// quantize_head and stored at an address that is 2 but not 4 mod 4 (the pool's rows are only
// 2-byte aligned).
//
//  - decode8 over all pieces, in the stored basis, is bit-identical to dequantize_head (unrotated
//    types) or to the CPU's decode_rotated (turbo types); unrotate_head of it then matches
//    dequantize_head to float rounding;
//  - rotate_head / unrotate_head are bit-identical to turbo::rotate / turbo::unrotate and so is the
//    decode table made from the CPU (signs, levels, FWHT scale, trellis subset word);
//  - row_dot with the f32 prepared query matches a double dot of q with the dequantized row to
//    1e-5 relative (|q|·|k| scale), and kv_type_ops(t).dot (for q8_0/q4_0 K the CPU's dot rounds the
//    query to q8_0, so there the bound is the q8_0 query's rounding, 2e-2);
//  - row_axpy matches kv_type_ops(t).axpy to 1e-6 relative.
// The bounds: both sides use the same decoded floats; only f32 summation order differs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kv_decode.cuh"
#include "core/error.h"
#include "kv/kv_type.h"
#include "quant/turbo.h"
#include "quant/turbo_trellis.h"
#include "test_util.h"

namespace polykv {
namespace {

using cuda::KvDecodeTables;

bool head_dim_ok(KvType t, int hd) {
  try {
    check_kv_head_dim(t, hd);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// A row of x encoded by quantize_head, stored at offset 2 of an 8-aligned buffer (2 mod 4).
struct Row {
  std::vector<uint8_t> buf;
  const uint8_t* p() const { return buf.data() + 2; }
};
Row encode(KvType t, const std::vector<float>& x) {
  const int hd = int(x.size());
  Row r;
  r.buf.assign(kv_head_bytes(t, hd) + 16, 0xEE);
  kv_type_ops(t).quantize_head(x.data(), r.buf.data() + 2, hd);
  return r;
}

// Random values with a few loud channels (as keys have), so blocks have different scales.
std::vector<float> random_row(int hd, uint32_t seed) {
  auto x = test::random_floats(size_t(hd), seed);
  std::mt19937 rng(seed * 7 + 1);
  for (int k = 0; k < 3; ++k) x[rng() % unsigned(hd)] *= 8.0f;
  return x;
}

std::vector<float> decode_all(KvType t, const uint8_t* row, int hd, const KvDecodeTables& tab) {
  std::vector<float> y(static_cast<size_t>(hd));
  cuda::kv_type_dispatch(t, [&](auto tag) {
    for (int c = 0; c < hd / 8; ++c)
      cuda::decode8<decltype(tag)::value>(row, c, hd, cuda::kv_levels(tab, t, hd), tab.subset_word, y.data() + 8 * c);
  });
  return y;
}

// The CPU's rotated-basis decode of a turbo row (the reference for decode8 of turbo types).
std::vector<float> cpu_decode_rotated(KvType t, const uint8_t* row, int hd) {
  std::vector<float> y(static_cast<size_t>(hd));
  if (cuda::kv_turbo_bits(t)) turbo::decode_rotated(cuda::kv_turbo_bits(t), row, y.data(), hd);
  else turbo::trellis::decode_rotated(cuda::kv_trellis_bits(t), row, y.data(), hd);
  return y;
}

constexpr int kHeadDims[] = {32, 64, 128, 256, 512};

TEST(CudaKvDecode, TablesComeFromTheCpu) {
  const KvDecodeTables tab = cuda::make_kv_decode_tables();
  for (int n : {32, 64, 128}) {
    const int s = cuda::group_slot(n);
    for (int b = 2; b <= 4; ++b) {
      for (int k = 0; k < (1 << b); ++k) EXPECT_EQ(tab.turbo[b - 2][s][k], turbo::levels(b, n)[k]);
      for (int k = 0; k < (2 << b); ++k) EXPECT_EQ(tab.trellis[b - 2][s][k], turbo::trellis::levels(b, n)[k]);
    }
    // Signs are ±1 with both signs present (a seeded random diagonal).
    int neg = 0;
    for (int i = 0; i < n; ++i) {
      EXPECT_TRUE(tab.signs[s][i] == 1.0f || tab.signs[s][i] == -1.0f);
      neg += tab.signs[s][i] < 0;
    }
    EXPECT_GT(neg, 0);
    EXPECT_LT(neg, n);
  }
  EXPECT_EQ(tab.subset_word, turbo::trellis::kSubsetWord);
}

TEST(CudaKvDecode, RotationIsTheCpus) {
  const KvDecodeTables tab = cuda::make_kv_decode_tables();
  for (int hd : kHeadDims) {
    const auto x = random_row(hd, 100 + uint32_t(hd));
    auto a = x, b = x;
    cuda::rotate_head(a.data(), hd, tab);
    turbo::rotate(b.data(), hd);
    for (int i = 0; i < hd; ++i) ASSERT_EQ(a[size_t(i)], b[size_t(i)]) << "rotate hd " << hd << " i " << i;
    cuda::unrotate_head(a.data(), hd, tab);
    turbo::unrotate(b.data(), hd);
    for (int i = 0; i < hd; ++i) {
      ASSERT_EQ(a[size_t(i)], b[size_t(i)]) << "unrotate hd " << hd << " i " << i;
      ASSERT_NEAR(a[size_t(i)], x[size_t(i)], 1e-5f * (1.0f + std::abs(x[size_t(i)])));
    }
  }
}

TEST(CudaKvDecode, PiecesMatchTheReferenceDecoders) {
  const KvDecodeTables tab = cuda::make_kv_decode_tables();
  int checked = 0;
  for (KvType t : kAllKvTypes)
    for (int hd : kHeadDims) {
      if (!head_dim_ok(t, hd)) continue;
      for (uint32_t seed = 1; seed <= 6; ++seed) {
        const auto x = random_row(hd, seed * 1000 + uint32_t(hd) + 37 * uint32_t(t));
        const Row row = encode(t, x);
        const auto y = decode_all(t, row.p(), hd, tab);
        std::vector<float> ref(static_cast<size_t>(hd));
        kv_type_ops(t).dequantize_head(row.p(), ref.data(), hd);
        const std::string what = std::string(kv_type_name(t)) + " hd " + std::to_string(hd);
        if (!cuda::kv_rotated(t)) {
          for (int i = 0; i < hd; ++i) ASSERT_EQ(y[size_t(i)], ref[size_t(i)]) << what << " value " << i;
        } else {
          const auto rot = cpu_decode_rotated(t, row.p(), hd);
          for (int i = 0; i < hd; ++i) ASSERT_EQ(y[size_t(i)], rot[size_t(i)]) << what << " rotated value " << i;
          auto back = y;
          cuda::unrotate_head(back.data(), hd, tab);
          double norm = 0;
          for (float v : ref) norm = std::max(norm, double(std::abs(v)));
          for (int i = 0; i < hd; ++i)
            ASSERT_NEAR(back[size_t(i)], ref[size_t(i)], 1e-6 * norm) << what << " original basis value " << i;
        }
        ++checked;
      }
    }
  // 11 types: f32/f16/bf16 x 5 head sizes, q8_0/q4_0 x 5, 6 turbo types x 5 (32, 64, 128, 256, 512).
  EXPECT_EQ(checked, 6 * 11 * 5);
}

TEST(CudaKvDecode, DotAndAxpyMatchTheCpuOps) {
  const KvDecodeTables tab = cuda::make_kv_decode_tables();
  for (KvType t : kAllKvTypes)
    for (int hd : kHeadDims) {
      if (!head_dim_ok(t, hd)) continue;
      const KvTypeOps& ops = kv_type_ops(t);
      const float* lv = cuda::kv_levels(tab, t, hd);
      for (uint32_t seed = 1; seed <= 4; ++seed) {
        const std::string what = std::string(kv_type_name(t)) + " hd " + std::to_string(hd);
        const auto x = random_row(hd, seed * 31 + uint32_t(hd));
        const auto q = test::random_floats(size_t(hd), seed * 77 + uint32_t(hd));
        const Row row = encode(t, x);
        std::vector<float> kref(static_cast<size_t>(hd));
        ops.dequantize_head(row.p(), kref.data(), hd);
        double exact = 0, qn = 0, kn = 0;
        for (int i = 0; i < hd; ++i) {
          exact += double(q[size_t(i)]) * kref[size_t(i)];
          qn += double(q[size_t(i)]) * q[size_t(i)];
          kn += double(kref[size_t(i)]) * kref[size_t(i)];
        }
        const double mag = std::sqrt(qn * kn);
        auto qp = q;
        if (cuda::kv_rotated(t)) cuda::rotate_head(qp.data(), hd, tab);
        float got = 0;
        cuda::kv_type_dispatch(t, [&](auto tag) {
          got = cuda::row_dot<decltype(tag)::value>(row.p(), qp.data(), hd, lv, tab.subset_word);
        });
        EXPECT_NEAR(got, exact, 1e-5 * mag) << what << " dot vs double dot of the dequantized row";
        std::vector<uint8_t> cpu_qp(ops.query_bytes(hd) + 64);
        ops.prepare_query(q.data(), cpu_qp.data(), hd);
        const float cpu = ops.dot(row.p(), cpu_qp.data(), hd);
        const double bound = kv_type_f32_query(t) ? 1e-5 : 2e-2;  // q8_0 query on the CPU
        EXPECT_NEAR(got, cpu, bound * mag) << what << " dot vs kv_type_ops dot";

        const float a = 0.37f + 0.1f * float(seed);
        auto acc = test::random_floats(size_t(hd), seed + 5);
        auto acc_cpu = acc;
        cuda::kv_type_dispatch(t, [&](auto tag) {
          cuda::row_axpy<decltype(tag)::value>(a, row.p(), acc.data(), hd, lv, tab.subset_word);
        });
        ops.axpy(a, row.p(), acc_cpu.data(), hd);
        double an = 0;
        for (float v : acc_cpu) an = std::max(an, double(std::abs(v)));
        for (int i = 0; i < hd; ++i) ASSERT_NEAR(acc[size_t(i)], acc_cpu[size_t(i)], 1e-6 * an) << what << " axpy " << i;
      }
    }
}

// A decoder reading one byte too far or too early shows up as a changed value when the bytes
// around the row change: decode the same row with 0x00 and 0xFF guard bytes.
TEST(CudaKvDecode, ReadsOnlyTheRowsBytes) {
  const KvDecodeTables tab = cuda::make_kv_decode_tables();
  for (KvType t : kAllKvTypes)
    for (int hd : {64, 128}) {
      const auto x = random_row(hd, 9 + uint32_t(hd));
      const size_t bytes = kv_head_bytes(t, hd);
      std::vector<uint8_t> a(bytes + 8, 0x00), b(bytes + 8, 0xFF);
      kv_type_ops(t).quantize_head(x.data(), a.data() + 2, hd);
      std::copy(a.begin() + 2, a.begin() + 2 + long(bytes), b.begin() + 2);
      const auto ya = decode_all(t, a.data() + 2, hd, tab), yb = decode_all(t, b.data() + 2, hd, tab);
      for (int i = 0; i < hd; ++i) ASSERT_EQ(ya[size_t(i)], yb[size_t(i)]) << kv_type_name(t) << " hd " << hd << " i " << i;
    }
}

}  // namespace
}  // namespace polykv
