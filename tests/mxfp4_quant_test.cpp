// MXFP4 (quant/mxfp4.h): the type table, the E8M0 scale bits, dequantization of hand-built blocks whose
// values follow from the OCP E2M1 definition (not from polykv's table), agreement with an independent
// numpy model of the spec and of ggml's rules (tests/data/mxfp4, tools/make_mxfp4_refs.py), quantizer
// round trips, and the MXFP4_MOE file-type rule shared by quantize and synth.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "quant/mxfp4.h"
#include "quant/quant.h"
#include "test_util.h"

namespace polykv {
namespace {

std::vector<uint8_t> read_bytes(const std::string& name) {
  std::ifstream f(test::test_data_dir() + "/mxfp4/" + name, std::ios::binary);
  EXPECT_TRUE(f.good()) << name;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<float> read_floats(const std::string& name) {
  const auto b = read_bytes(name);
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), f.size() * 4);
  return f;
}

std::vector<float> dequantize(const void* blocks, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row_ref(DType::MXFP4, blocks, y.data(), n);
  return y;
}

// E2M1 from its bits (OCP MX v1.0): sign, exponent (2 bits, bias 1), mantissa (1 bit); exponent 0
// is subnormal (0.m * 2^0).
double e2m1(int code) {
  const double sign = (code & 8) ? -1.0 : 1.0;
  const int exp = (code >> 1) & 3, man = code & 1;
  return exp == 0 ? sign * 0.5 * man : sign * std::ldexp(1.0 + 0.5 * man, exp - 1);
}

TEST(Mxfp4Type, Table) {
  const DTypeInfo* info = dtype_info(39);
  ASSERT_NE(info, nullptr);
  EXPECT_STREQ(info->name, "mxfp4");
  EXPECT_EQ(info->block_size, 32);
  EXPECT_EQ(info->type_size, 17);
  EXPECT_TRUE(info->weight_type);
  EXPECT_TRUE(can_quantize(DType::MXFP4));
  EXPECT_EQ(dtype_from_name("MXFP4"), DType::MXFP4);
  EXPECT_EQ(ggml_file_type(DType::MXFP4), 38);  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
  EXPECT_EQ(row_bytes(DType::MXFP4, 2880), 90u * 17u);
  EXPECT_EQ(mxfp4_moe_type(true), DType::MXFP4);
  EXPECT_EQ(mxfp4_moe_type(false), DType::Q8_0);
}

// 2^(e - 128) for every e, subnormal ones included, against ldexp.
TEST(Mxfp4Type, ScaleEveryExponent) {
  for (int e = 0; e < 256; ++e) EXPECT_EQ(mxfp4_scale(uint8_t(e)), std::ldexp(1.0f, e - 128)) << e;
  EXPECT_GT(mxfp4_scale(0), 0.0f);
}

// Codes 0..15 in values 0..15 (low nibbles) and 15..0 in values 16..31 (high nibbles), scale 2^(e-127)
// with e = 130: value = E2M1(code) * 8.
TEST(Mxfp4Dequantize, HandBuiltBlock) {
  BlockMXFP4 b[2];
  b[0].e = 130;
  for (int j = 0; j < 16; ++j) b[0].qs[j] = uint8_t(j | ((15 - j) << 4));
  b[1].e = 120;  // second block: only value 5 (code 0xB = -1.5) and value 20 (high nibble of qs[4], code 0x7 = 6)
  std::memset(b[1].qs, 0, 16);
  b[1].qs[5] = 0x0B;
  b[1].qs[4] = 0x70;
  std::vector<float> want(64, 0.0f);
  for (int j = 0; j < 16; ++j) {
    want[size_t(j)] = float(e2m1(j) * 8.0);
    want[size_t(j + 16)] = float(e2m1(15 - j) * 8.0);
  }
  want[32 + 5] = float(-1.5 * std::ldexp(1.0, 120 - 127));
  want[32 + 20] = float(6.0 * std::ldexp(1.0, 120 - 127));
  const auto got = dequantize(b, 64);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
  EXPECT_EQ(got[8], 0.0f);  // code 8 is -0: reads as zero
}

// Bit-identical to the numpy model on random blocks, extreme exponents and quantized inputs; the
// quantizer writes the very same bytes as the model of ggml's rule.
TEST(Mxfp4Dequantize, MatchesNumpyModel) {
  for (const std::string kind : {"random", "extreme", "input"}) {
    SCOPED_TRACE(kind);
    const auto blocks = read_bytes(kind + ".bin");
    const auto want = read_floats(kind + ".deq.f32");
    ASSERT_EQ(row_bytes(DType::MXFP4, int64_t(want.size())), blocks.size());
    const auto got = dequantize(blocks.data(), int64_t(want.size()));
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_TRUE(got[i] == want[i] || (std::isinf(got[i]) && got[i] == want[i])) << i << ": " << got[i] << " vs " << want[i];
  }
  const auto input = read_floats("input.f32");
  ASSERT_EQ(input.size(), 1024u);
  std::vector<uint8_t> q(row_bytes(DType::MXFP4, 1024));
  quantize_row_ref(DType::MXFP4, input.data(), q.data(), 1024);
  const auto want = read_bytes("input.bin");
  ASSERT_EQ(q.size(), want.size());
  for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(q[i], want[i]) << "block " << i / 17 << " byte " << i % 17;
}

// Exact multiples of the block's scale come back unchanged; re-quantizing a dequantized row gives the
// same values; every value is within half a step of its input unless it saturated (|x| > 12 * scale/2).
TEST(Mxfp4Quantize, RoundTrip) {
  const int64_t n = 32 * 40;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[size_t(i)] = float(e2m1(int((i * 5 + i / 32) % 16)) * std::ldexp(1.0, int(i / 32) - 20));
  for (int64_t b = 0; b < n / 32; ++b) x[size_t(b * 32)] = float(6.0 * std::ldexp(1.0, int(b) - 20));  // amax = 6 * 2^k
  std::vector<uint8_t> q(row_bytes(DType::MXFP4, n)), q2(q.size());
  quantize_row_ref(DType::MXFP4, x.data(), q.data(), n);
  EXPECT_EQ(dequantize(q.data(), n), x);

  const auto r = test::random_floats(size_t(n), 11);
  quantize_row_ref(DType::MXFP4, r.data(), q.data(), n);
  const auto y = dequantize(q.data(), n);
  quantize_row_ref(DType::MXFP4, y.data(), q2.data(), n);
  EXPECT_EQ(dequantize(q2.data(), n), y);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float scale = mxfp4_scale(q[size_t(b * 17)]) * 2.0f;  // of the E2M1 values
    for (int i = 0; i < 32; ++i) {
      const float xi = r[size_t(b * 32 + i)], v = y[size_t(b * 32 + i)];
      if (std::fabs(xi) >= 6.0f * scale) {
        ASSERT_EQ(v, std::copysign(6.0f * scale, xi)) << b << " " << i;  // saturated
      } else {
        ASSERT_LE(std::fabs(xi - v), std::fabs(xi) < 2 * scale ? 0.25f * scale : std::fabs(xi) < 4 * scale ? 0.5f * scale : scale)
            << b << " " << i;
      }
    }
  }
}

TEST(Mxfp4Quantize, ZeroBlockAndRowErrors) {
  std::vector<float> x(32, 0.0f);
  std::vector<uint8_t> q(17, 0xAB);
  quantize_row_ref(DType::MXFP4, x.data(), q.data(), 32);
  EXPECT_EQ(q, std::vector<uint8_t>(17, 0));
  EXPECT_EQ(dequantize(q.data(), 32), x);
  x.assign(32, 1e-40f);  // amax below 2^-125: the exponent clamps to 0 (ggml's uint8 cast would wrap)
  quantize_row_ref(DType::MXFP4, x.data(), q.data(), 32);
  EXPECT_EQ(q[0], 0);
  EXPECT_THROW(quantize_row_ref(DType::MXFP4, x.data(), q.data(), 16), Error);
  EXPECT_THROW(dequantize_row_ref(DType::MXFP4, q.data(), x.data(), 48), Error);
}

}  // namespace
}  // namespace polykv
