// Ternary weight types (quant/ternary.h): dequantization of hand-built blocks whose values follow
// from the layouts, agreement with an independent numpy model of gguf-py's / the PrismML fork's rules
// (tests/data/ternary, tools/make_ternary_refs.py), and quantization round trips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/quant.h"
#include "quant/ternary.h"
#include "test_util.h"

namespace polykv {
namespace {

const DType kTernary[] = {DType::TQ1_0, DType::TQ2_0, DType::PTQ1_0};

std::vector<uint8_t> read_bytes(const std::string& name) {
  std::ifstream f(test::test_data_dir() + "/ternary/" + name, std::ios::binary);
  EXPECT_TRUE(f.good()) << name;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<float> read_floats(const std::string& name) {
  const auto b = read_bytes(name);
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), f.size() * 4);
  return f;
}

// A packed base-3 byte from its digits, most significant (digit 0) first: ceil(q * 256 / 243).
uint8_t base3_byte(std::vector<int> digits) {
  int q = 0;
  for (int d : digits) q = q * 3 + d;
  if (digits.size() == 4) q *= 3;
  return uint8_t((q * 256 + 242) / 243);
}

std::vector<float> dequantize(DType t, const void* blocks, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row_ref(t, blocks, y.data(), n);
  return y;
}

TEST(TernaryTypes, Table) {
  EXPECT_EQ(dtype_info(34)->block_size, 256);
  EXPECT_EQ(dtype_info(34)->type_size, 54);
  EXPECT_EQ(dtype_info(35)->type_size, 66);
  ASSERT_NE(dtype_info(143), nullptr);
  EXPECT_STREQ(dtype_info(143)->name, "ptq1_0");
  EXPECT_EQ(dtype_info(143)->block_size, 128);
  EXPECT_EQ(dtype_info(143)->type_size, 28);
  EXPECT_EQ(dtype_from_name("PTQ1_0"), DType::PTQ1_0);
  for (DType t : kTernary) EXPECT_TRUE(dtype_info(t).weight_type && can_quantize(t)) << dtype_name(t);
  EXPECT_EQ(ggml_file_type(DType::TQ1_0), 36);
  EXPECT_EQ(ggml_file_type(DType::TQ2_0), 37);
}

// Every code 1 (value 0) except a few bytes set to known digits; the scale is 2.
TEST(TernaryDequantize, HandBuiltTq1_0) {
  BlockTQ1_0 b;
  std::memset(b.qs, base3_byte({1, 1, 1, 1, 1}), sizeof(b.qs));
  std::memset(b.qh, base3_byte({1, 1, 1, 1}), sizeof(b.qh));
  b.d = f32_to_fp16(2.0f);
  b.qs[0] = base3_byte({2, 0, 1, 1, 0});   // 32-byte stage, byte 0: values 0, 32, 64, 96, 128
  b.qs[40] = base3_byte({0, 0, 0, 0, 2});  // 16-byte stage, byte 8: values 168, 184, 200, 216, 232
  b.qh[2] = base3_byte({0, 2, 1, 1});      // qh byte 2: values 242, 246, 250, 254
  std::vector<float> want(256, 0.0f);
  want[0] = 2, want[32] = -2, want[128] = -2;
  want[168] = want[184] = want[200] = want[216] = -2, want[232] = 2;
  want[242] = -2, want[246] = 2;
  EXPECT_EQ(dequantize(DType::TQ1_0, &b, 256), want);
}

TEST(TernaryDequantize, HandBuiltPtq1_0) {
  BlockPTQ1_0 b;
  std::memset(b.qs, base3_byte({1, 1, 1, 1, 1}), sizeof(b.qs));
  std::memset(b.qh, base3_byte({1, 1, 1, 1}), sizeof(b.qh));
  b.d = f32_to_fp16(0.5f);
  b.qs[5] = base3_byte({2, 1, 1, 1, 0});   // 16-byte stage, byte 5: values 5, 21, 37, 53, 69
  b.qs[19] = base3_byte({1, 1, 1, 1, 2});  // 8-byte stage, byte 3: values 83, 91, 99, 107, 115
  b.qh[1] = base3_byte({2, 2, 0, 1});      // qh byte 1: values 121, 123, 125, 127
  std::vector<float> want(128, 0.0f);
  want[5] = 0.5f, want[69] = -0.5f, want[115] = 0.5f, want[121] = want[123] = 0.5f, want[125] = -0.5f;
  EXPECT_EQ(dequantize(DType::PTQ1_0, &b, 128), want);
}

TEST(TernaryDequantize, HandBuiltTq2_0) {
  BlockTQ2_0 b;
  std::memset(b.qs, 0x55, sizeof(b.qs));  // every code 1: value 0
  b.d = f32_to_fp16(-1.5f);
  b.qs[0] = 0b10'01'00'10;   // codes 2, 0, 1, 2 for values 0, 32, 64, 96
  b.qs[33] = 0b11'01'01'00;  // codes 0, 1, 1, 3 for values 129, 161, 193, 225 (code 3 decodes as +2)
  std::vector<float> want(256, 0.0f);
  want[0] = -1.5f, want[32] = 1.5f, want[96] = -1.5f, want[129] = 1.5f, want[225] = -3.0f;
  EXPECT_EQ(dequantize(DType::TQ2_0, &b, 256), want);
}

// Bit-identical to the numpy model on random blocks (every byte pattern) and on quantized inputs;
// our quantizer writes the very same bytes.
TEST(TernaryDequantize, MatchesNumpyModel) {
  const auto input = read_floats("input.f32");
  ASSERT_EQ(input.size(), 1024u);
  for (DType t : kTernary) {
    SCOPED_TRACE(dtype_name(t));
    const std::string name = dtype_name(t);
    for (const std::string kind : {"random", "input"}) {
      const auto blocks = read_bytes(name + "_" + kind + ".bin");
      const auto want = read_floats(name + "_" + kind + ".deq.f32");
      ASSERT_EQ(row_bytes(t, int64_t(want.size())), blocks.size()) << kind;
      const auto got = dequantize(t, blocks.data(), int64_t(want.size()));
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * 4)) << kind;
    }
    std::vector<uint8_t> q(row_bytes(t, 1024));
    quantize_row_ref(t, input.data(), q.data(), 1024);
    EXPECT_EQ(q, read_bytes(name + "_input.bin"));
  }
}

// Inputs that are exactly d * t (d a power of two, each block with a nonzero) come back unchanged;
// re-quantizing a dequantized row gives the same bytes; every value is d*t with |x - d*t| <= d/2
// (up to the fp16 rounding of d).
TEST(TernaryQuantize, RoundTrip) {
  std::mt19937 rng(5);
  for (DType t : kTernary) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t n = 1536;  // 6 / 12 blocks
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = 0.25f * float(int(rng() % 3) - 1);
    for (int64_t i = 0; i < n; i += 128) x[size_t(i)] = -0.25f;
    std::vector<uint8_t> q(row_bytes(t, n)), q2(q.size());
    quantize_row_ref(t, x.data(), q.data(), n);
    EXPECT_EQ(dequantize(t, q.data(), n), x);

    const auto r = test::random_floats(size_t(n), 11);
    quantize_row_ref(t, r.data(), q.data(), n);
    const auto y = dequantize(t, q.data(), n);
    quantize_row_ref(t, y.data(), q2.data(), n);
    EXPECT_EQ(q, q2);
    const int bs = dtype_info(t).block_size;
    for (int64_t b = 0; b < n / bs; ++b) {
      float amax = 0;
      for (int i = 0; i < bs; ++i) amax = std::max(amax, std::fabs(r[size_t(b * bs + i)]));
      const float d = fp16_to_f32(f32_to_fp16(amax));
      for (int i = 0; i < bs; ++i) {
        const float v = y[size_t(b * bs + i)], xi = r[size_t(b * bs + i)];
        ASSERT_TRUE(v == 0 || v == d || v == -d) << b << " " << i;
        ASSERT_LE(std::fabs(xi - v), 0.5f * amax + std::fabs(amax - d) + 1e-7f);
      }
    }
  }
}

TEST(TernaryQuantize, ZeroBlockAndRowErrors) {
  for (DType t : kTernary) {
    const int bs = dtype_info(t).block_size;
    std::vector<float> x(size_t(bs), 0.0f);
    std::vector<uint8_t> q(row_bytes(t, bs), 0xAB);
    quantize_row_ref(t, x.data(), q.data(), bs);
    EXPECT_EQ(dequantize(t, q.data(), bs), x);
    EXPECT_THROW(quantize_row_ref(t, x.data(), q.data(), bs / 2), Error) << dtype_name(t);
    EXPECT_THROW(dequantize_row_ref(t, q.data(), x.data(), bs + 32), Error) << dtype_name(t);
  }
}

}  // namespace
}  // namespace polykv
