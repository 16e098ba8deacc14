// Tests of the scalar quantize/dequantize reference (quant/quant.h) against gguf-py's numpy
// implementation (tests/data/quant, made by tools/make_quant_refs.py), plus error bounds and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kquant_scales.h"
#include "quant/quant.h"
#include "test_util.h"

namespace polykv {
namespace {

std::string quant_data(const std::string& name) { return test::test_data_dir() + "/quant/" + name; }

// Distance in units in the last place between two finite floats (0 when bit-identical, or +0/-0).
int64_t ulp_distance(float a, float b) {
  auto ordered = [](float f) {
    const int32_t i = int32_t(bits_from_f32(f));
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  return std::llabs(ordered(a) - ordered(b));
}

// Largest ulp distance between our dequantization of `bytes` and gguf-py's floats.
int64_t max_ulps_vs_expected(DType type, const std::vector<uint8_t>& bytes,
                             const std::vector<float>& expected) {
  const int64_t n = int64_t(expected.size());
  EXPECT_EQ(row_bytes(type, n), bytes.size());
  std::vector<float> ours(expected.size());
  dequantize_row_ref(type, bytes.data(), ours.data(), n);
  int64_t worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = ulp_distance(ours[i], expected[i]);
    if (d > worst) {
      worst = d;
      ADD_FAILURE() << dtype_name(type) << " value " << i << ": ours " << ours[i] << " gguf-py "
                    << expected[i];
    }
  }
  return worst;
}

const DType kLegacyTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0};
const DType kBlockTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                             DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};
const DType kQuantizedByGgufPy[] = {DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1,
                                    DType::Q5_0, DType::Q5_1, DType::Q8_0};
const char* const kRows[] = {"a", "b"};

// Tolerance: exact. Our dequantization does ggml's float operations in ggml's order, and numpy does
// the same float32 operations, so every value must be bit-identical (0 ulp).
TEST(QuantDequant, RandomBlocksMatchGgufPy) {
  for (DType type : kBlockTypes) {
    const std::string name = dtype_name(type);
    SCOPED_TRACE(name);
    const auto bytes = test::read_file(quant_data(name + "_random.bin"));
    const auto expected = test::read_f32(quant_data(name + "_random.deq.f32"));
    ASSERT_FALSE(expected.empty());
    EXPECT_EQ(max_ulps_vs_expected(type, bytes, expected), 0);
  }
}

TEST(QuantDequant, QuantizedRowsMatchGgufPy) {
  for (DType type : kQuantizedByGgufPy) {
    for (const char* row : kRows) {
      const std::string stem = std::string(dtype_name(type)) + "_" + row;
      SCOPED_TRACE(stem);
      const auto bytes = test::read_file(quant_data(stem + ".bin"));
      const auto expected = test::read_f32(quant_data(stem + ".deq.f32"));
      ASSERT_FALSE(expected.empty());
      EXPECT_EQ(max_ulps_vs_expected(type, bytes, expected), 0);
    }
  }
}

// gguf-py's quantizers are ports of ggml's quantize_row_*_ref; ours must give the same bytes.
TEST(QuantQuantize, MatchesGgufPyBytes) {
  for (DType type : kQuantizedByGgufPy) {
    for (const char* row : kRows) {
      const std::string stem = std::string(dtype_name(type)) + "_" + row;
      SCOPED_TRACE(stem);
      const auto input = test::read_f32(quant_data(std::string("input_") + row + ".f32"));
      const auto expected = test::read_file(quant_data(stem + ".bin"));
      ASSERT_EQ(row_bytes(type, int64_t(input.size())), expected.size());
      std::vector<uint8_t> ours(expected.size());
      quantize_row_ref(type, input.data(), ours.data(), int64_t(input.size()));
      const int block_bytes = dtype_info(type).type_size;
      for (size_t i = 0; i < ours.size(); ++i)
        EXPECT_EQ(int(ours[i]), int(expected[i])) << "byte " << i << " (block " << i / block_bytes << ")";
    }
  }
}

// gguf-py has no k-quant quantizer: these bytes come from ggml's C quantize_row_*_ref built without
// FMA (tools/ggml_quant_oracle/make_refs.sh).
TEST(QuantQuantize, KQuantsMatchGgmlBytes) {
  for (DType type : {DType::Q6_K}) {
    for (const char* row : kRows) {
      const std::string stem = std::string(dtype_name(type)) + "_" + row;
      SCOPED_TRACE(stem);
      const auto input = test::read_f32(quant_data(std::string("input_") + row + ".f32"));
      const auto expected = test::read_file(quant_data(stem + ".ggml.bin"));
      ASSERT_EQ(row_bytes(type, int64_t(input.size())), expected.size());
      std::vector<uint8_t> ours(expected.size());
      quantize_row_ref(type, input.data(), ours.data(), int64_t(input.size()));
      for (size_t i = 0; i < ours.size(); ++i) EXPECT_EQ(int(ours[i]), int(expected[i])) << "byte " << i;
    }
  }
}

TEST(QuantRoundTrip, Q6KErrorBounded) {
  // Each value is rounded against its group's rounded scale d*s (|d*s| <= ~max|x|/31 of the group
  // with the largest scale); bound: half that step plus the scale's own rounding, relative to the
  // block's max |x|.
  auto x = test::random_floats(1024, 5, 1.5f);
  for (size_t i = 0; i < x.size(); i += 61) x[i] *= 8.0f;
  std::vector<BlockQ6_K> q(4);
  std::vector<float> back(1024);
  quantize_row_ref(DType::Q6_K, x.data(), q.data(), 1024);
  dequantize_row_ref(DType::Q6_K, q.data(), back.data(), 1024);
  double err2 = 0, x2 = 0;
  for (int b = 0; b < 4; ++b) {
    float amax = 0;
    for (int j = 0; j < kQK_K; ++j) amax = std::max(amax, std::fabs(x[size_t(256 * b + j)]));
    for (int j = 0; j < kQK_K; ++j) {
      const size_t i = size_t(256 * b + j);
      ASSERT_LE(std::fabs(back[i] - x[i]), amax / 32.0f) << "value " << i;
      err2 += double(back[i] - x[i]) * (back[i] - x[i]);
      x2 += double(x[i]) * x[i];
    }
  }
  EXPECT_LT(std::sqrt(err2 / x2), 0.04);  // measured 0.026 on this data (outliers included)
}

TEST(QuantQuantize, F32IsACopy) {
  const auto x = test::random_floats(64, 1);
  std::vector<float> q(64), back(64);
  quantize_row_ref(DType::F32, x.data(), q.data(), 64);
  dequantize_row_ref(DType::F32, q.data(), back.data(), 64);
  EXPECT_EQ(x, back);
}

// Round trip |x - dequantize(quantize(x))| per block, bounded by half a quantization step plus the
// error of storing the scale (and min) as fp16 (relative 2^-11; bounded here by 2^-10 of the block's
// largest magnitude times the largest quant).
struct RoundTripBound {
  DType type;
  // bound for one block, given its max |x| and its range (max - min)
  double (*bound)(double amax, double range);
};

const RoundTripBound kRoundTripBounds[] = {
    // q4_0/q5_0: the extreme value sits one step past the clamped end of the range: error <= |d|.
    {DType::Q4_0, [](double amax, double) { return amax / 8 * (1 + 8 * 0x1p-10); }},
    {DType::Q5_0, [](double amax, double) { return amax / 16 * (1 + 16 * 0x1p-10); }},
    {DType::Q4_1, [](double amax, double range) { return range / 15 * 0.5 + 2 * amax * 0x1p-10; }},
    {DType::Q5_1, [](double amax, double range) { return range / 31 * 0.5 + 2 * amax * 0x1p-10; }},
    {DType::Q8_0, [](double amax, double) { return amax / 127 * (0.5 + 127 * 0x1p-10); }},
    {DType::Q8_K, [](double amax, double) { return amax / 127 * 0.5 * (1 + 1e-5); }},
};

TEST(QuantRoundTrip, ErrorWithinHalfStep) {
  for (const auto& rt : kRoundTripBounds) {
    const DTypeInfo& info = dtype_info(rt.type);
    SCOPED_TRACE(info.name);
    const int64_t n = 4 * 256;
    auto x = test::random_floats(size_t(n), 7, 2.0f);
    for (int64_t i = 0; i < n; i += 97) x[size_t(i)] *= 10.0f;  // outliers
    std::vector<uint8_t> q(row_bytes(rt.type, n));
    std::vector<float> back(static_cast<size_t>(n));
    quantize_row_ref(rt.type, x.data(), q.data(), n);
    dequantize_row_ref(rt.type, q.data(), back.data(), n);
    for (int64_t b = 0; b < n / info.block_size; ++b) {
      const float* xb = x.data() + b * info.block_size;
      double amax = 0, lo = xb[0], hi = xb[0];
      for (int j = 0; j < info.block_size; ++j) {
        amax = std::max(amax, double(std::fabs(xb[j])));
        lo = std::min(lo, double(xb[j]));
        hi = std::max(hi, double(xb[j]));
      }
      const double bound = rt.bound(amax, hi - lo);
      for (int j = 0; j < info.block_size; ++j) {
        const int64_t i = b * info.block_size + j;
        ASSERT_LE(std::fabs(double(back[size_t(i)]) - double(x[size_t(i)])), bound) << "value " << i;
      }
    }
  }
}

TEST(QuantRoundTrip, HalfTypesRelativeError) {
  const auto x = test::random_floats(256, 3, 5.0f);
  for (auto [type, rel] : {std::pair{DType::F16, 0x1p-11}, std::pair{DType::BF16, 0x1p-8}}) {
    std::vector<uint16_t> q(256);
    std::vector<float> back(256);
    quantize_row_ref(type, x.data(), q.data(), 256);
    dequantize_row_ref(type, q.data(), back.data(), 256);
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_LE(std::fabs(back[i] - x[i]), std::fabs(x[i]) * rel) << dtype_name(type) << " " << i;
  }
}

TEST(QuantRoundTrip, ZeroBlocksStayZero) {
  const std::vector<float> zeros(256, 0.0f);
  for (DType type : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_K}) {
    std::vector<uint8_t> q(row_bytes(type, 256), 0xAB);
    std::vector<float> back(256, 1.0f);
    quantize_row_ref(type, zeros.data(), q.data(), 256);
    dequantize_row_ref(type, q.data(), back.data(), 256);
    EXPECT_EQ(back, zeros) << dtype_name(type);
  }
}

TEST(QuantQ8K, ScaleSignAndBsums) {
  auto x = test::random_floats(512, 11);
  x[37] = -9.0f;   // block 0's largest magnitude is negative
  x[300] = 7.5f;   // block 1's is positive
  std::vector<BlockQ8_K> q(2);
  quantize_row_ref(DType::Q8_K, x.data(), q.data(), 512);
  // The largest magnitude maps to exactly -127, so d has the opposite sign of that value.
  EXPECT_EQ(q[0].qs[37], -127);
  EXPECT_GT(q[0].d, 0.0f);
  EXPECT_FLOAT_EQ(q[0].d * -127.0f, -9.0f);
  EXPECT_EQ(q[1].qs[300 - 256], -127);
  EXPECT_LT(q[1].d, 0.0f);
  EXPECT_FLOAT_EQ(q[1].d * -127.0f, 7.5f);
  for (const BlockQ8_K& b : q) {
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b.qs[16 * g + j];
      EXPECT_EQ(b.bsums[g], sum) << "group " << g;
    }
  }
}

TEST(QuantQ8K, RoundsHalfToEven) {
  // Largest magnitude -127 -> iscale = -127 / -127 = 1: quants are the inputs rounded half to even.
  std::vector<float> x(256, 0.0f);
  x[0] = -127.0f;
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -0.5f;
  x[4] = 126.5f;
  BlockQ8_K b;
  quantize_row_ref(DType::Q8_K, x.data(), &b, 256);
  EXPECT_EQ(b.d, 1.0f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 2);
  EXPECT_EQ(b.qs[2], 4);
  EXPECT_EQ(b.qs[3], 0);
  EXPECT_EQ(b.qs[4], 126);
}

TEST(QuantQ8_0, RoundsHalfAwayFromZero) {
  // max |x| = 127 -> d = 1, quants are roundf(x).
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.49f;
  BlockQ8_0 b;
  quantize_row_ref(DType::Q8_0, x.data(), &b, 32);
  EXPECT_EQ(fp16_to_f32(b.d), 1.0f);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], 0);
}

TEST(QuantErrors, UnsupportedTypesThrowNamingTheType) {
  std::vector<uint8_t> buf(4096);
  std::vector<float> f(256);
  for (DType type : {DType::Q8_1, DType::I8, DType::I32, DType::F64}) {
    try {
      dequantize_row_ref(type, buf.data(), f.data(), 256);
      ADD_FAILURE() << "no error for " << dtype_name(type);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(dtype_name(type)), std::string::npos) << e.what();
    }
  }
  for (DType type : {DType::Q8_1, DType::I32}) {
    EXPECT_FALSE(can_quantize(type)) << dtype_name(type);
    try {
      quantize_row_ref(type, f.data(), buf.data(), 256);
      ADD_FAILURE() << "no error for " << dtype_name(type);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(dtype_name(type)), std::string::npos) << e.what();
    }
  }
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                     DType::Q5_1, DType::Q8_0, DType::Q8_K, DType::Q2_K, DType::Q3_K, DType::Q4_K,
                     DType::Q5_K, DType::Q6_K})
    EXPECT_TRUE(can_quantize(type)) << dtype_name(type);
}

TEST(QuantErrors, PartialBlockThrows) {
  std::vector<uint8_t> buf(4096);
  std::vector<float> f(300);
  EXPECT_THROW(dequantize_row_ref(DType::Q4_0, buf.data(), f.data(), 33), Error);
  EXPECT_THROW(dequantize_row_ref(DType::Q4_K, buf.data(), f.data(), 288), Error);
  EXPECT_THROW(quantize_row_ref(DType::Q8_0, f.data(), buf.data(), 40), Error);
}

TEST(QuantKScales, ScaleMinUnpacksSixBitFields) {
  // Pack 8 known (scale, min) pairs by the documented layout and read them back.
  const uint8_t scale[8] = {0, 63, 17, 42, 5, 60, 33, 48};
  const uint8_t min[8] = {63, 1, 40, 22, 59, 7, 31, 16};
  uint8_t packed[kKScaleBytes] = {};
  for (int j = 0; j < 4; ++j) {
    packed[j] = uint8_t((scale[j] & 63) | ((scale[j + 4] >> 4) << 6));
    packed[j + 4] = uint8_t((min[j] & 63) | ((min[j + 4] >> 4) << 6));
    packed[j + 8] = uint8_t((scale[j + 4] & 15) | ((min[j + 4] & 15) << 4));
  }
  for (int j = 0; j < 8; ++j) {
    const ScaleMin sm = kquant_scale_min(j, packed);
    EXPECT_EQ(sm.scale, scale[j]) << j;
    EXPECT_EQ(sm.min, min[j]) << j;
  }
}

TEST(QuantKScales, Q3KScalesUnpack) {
  int8_t expected[16];
  uint8_t packed[kKScaleBytes] = {};
  for (int j = 0; j < 16; ++j) {
    const int raw = (j * 37 + 5) % 64;
    expected[j] = int8_t(raw - 32);
    packed[j % 8] |= uint8_t((raw & 15) << (j < 8 ? 0 : 4));
    packed[8 + j % 4] |= uint8_t((raw >> 4) << (2 * (j / 4)));
  }
  int8_t got[16];
  q3k_scales(packed, got);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(got[j], expected[j]) << j;
}

}  // namespace
}  // namespace polykv
