// The GPU's KV encoders (backend/cuda/kv_encode.cuh) built for the CPU and checked byte for byte
// against the scalar references kv_type_ops(type).quantize_head: every KV type, every head size the
// type takes, rows with outliers, zeros, tiny and huge norms, ties. The lanes of each phase also run
// in shuffled orders, which must not change a byte (the phases' lanes must be independent, as the
// warp's are on the device). Runs without a GPU (CI).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kv_encode.cuh"
#include "core/fp16.h"
#include "kv/kv_block_store.h"
#include "kv/kv_type.h"
#include "quant/turbo.h"
#include "quant/turbo_internal.h"

namespace polykv::cuda::enc {
namespace {

TEST(CudaKvEncodeScalar, HalfAndBf16MatchCoreFp16) {
  std::vector<uint32_t> patterns;
  // Around every half: its value, the midpoints to its neighbour and one float ulp either side.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const uint32_t a = bits_from_f32(fp16_to_f32(uint16_t(h)));
    const uint32_t mid = bits_from_f32(0.5f * (fp16_to_f32(uint16_t(h)) + fp16_to_f32(uint16_t(h + 1))));
    for (uint32_t u : {a, a + 1, a - 1, mid, mid + 1, mid - 1}) {
      patterns.push_back(u);
      patterns.push_back(u | 0x80000000u);
    }
  }
  for (uint32_t u : {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0x477ff000u, 0x477fefffu, 0x38800000u,
                     0x387fffffu, 0x33000000u, 0x33000001u, 0x32ffffffu, 0x00000001u, 0x7f7fffffu})
    patterns.push_back(u);
  std::mt19937 rng(7);
  for (int i = 0; i < (1 << 20); ++i) patterns.push_back(uint32_t(rng()));
  for (uint32_t u : patterns) {
    const float f = f32_from_bits(u);
    ASSERT_EQ(half_bits(f), f32_to_fp16(f)) << std::hex << "f32 bits 0x" << u;
    ASSERT_EQ(bf16_bits(f), f32_to_bf16(f)) << std::hex << "f32 bits 0x" << u;
  }
}

TEST(CudaKvEncodeScalar, StreamBytesAreTheDocumentedBitStream) {
  std::mt19937 rng(11);
  for (int w = 1; w <= 4; ++w)
    for (int count : {32, 64, 128}) {
      std::vector<uint8_t> v(static_cast<size_t>(count)), ref(static_cast<size_t>(count * w / 8), 0);
      for (auto& x : v) x = uint8_t(rng() & ((1u << w) - 1));
      for (int i = 0; i < count; ++i)  // bit b of value i is stream bit w*i + b
        for (int b = 0; b < w; ++b)
          if ((v[size_t(i)] >> b) & 1) ref[size_t(w * i + b) / 8] |= uint8_t(1u << ((w * i + b) % 8));
      for (int k = 0; k < count * w / 8; ++k)
        ASSERT_EQ(stream_byte(v.data(), w, count, k), ref[size_t(k)])
            << "w " << w << " count " << count << " byte " << k;
    }
}

// The rotation of the GPU's turbo encoders (signs, butterflies, 1/sqrt(n)) equals turbo::rotate bit
// for bit, and r² equals the reference's double sum (its LaneOrder tree).
TEST(CudaKvEncodeScalar, RotationAndNormAreBitIdentical) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (int n : {32, 64, 128})
    for (int trial = 0; trial < 50; ++trial) {
      const SideParams p = make_side_params(KvType::Turbo3, n);
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = nd(rng) * (trial % 5 == 0 ? 1000.0f : 1.0f);
      std::vector<float> ref = x;
      turbo::rotate(ref.data(), n);
      const double r2 = turbo::detail::group_norm2(x.data(), n);
      for (bool legacy : {false, true}) {  // pair indices by masks / by integer division
        HostExec ex{uint32_t(trial)};
        Scratch sh;
        load_signed_and_norm(ex, sh, p.tab, x.data(), n);
        butterflies(ex, sh, n, legacy);
        ASSERT_EQ(sh.r2, r2) << "n " << n;
        for (int i = 0; i < n; ++i)
          ASSERT_EQ(bits_from_f32(mul_rn(sh.y[i], p.tab.scale)), bits_from_f32(ref[size_t(i)]))
              << "n " << n << " trial " << trial << " i " << i << " legacy " << legacy;
      }
    }
}

TEST(CudaKvEncodeScalar, TablesAreTheCpuTables) {
  for (KvType t : {KvType::Turbo2, KvType::Turbo3, KvType::Turbo4, KvType::Turbo2T, KvType::Turbo3T, KvType::Turbo4T})
    for (int hd : {32, 64, 128, 256}) {
      const SideParams p = make_side_params(t, hd);
      const int n = turbo::group_size(hd);
      EXPECT_EQ(p.unit_values, n);
      EXPECT_EQ(p.units, hd / n);
      EXPECT_EQ(size_t(p.head_bytes), kv_head_bytes(t, hd));
      EXPECT_EQ(0, std::memcmp(p.tab.sign, turbo::detail::sign_table(n), sizeof(float) * size_t(n)));
      const bool trellis = p.codec == Codec::Trellis;
      const float* lv = trellis ? turbo::trellis::levels(p.bits, n) : turbo::levels(p.bits, n);
      EXPECT_EQ(0, std::memcmp(p.tab.lv, lv, sizeof(float) * size_t((trellis ? 2 : 1) << p.bits))) << kv_type_name(t);
    }
}

// ---- whole rows against quantize_head ----

enum class Kind { Gaussian, Outliers, Zero, ZeroFirstGroup, Tiny, Denormal, Huge, Constant, OneHot, TwoHot,
                  Integers, HalfSteps, GridQ4, GridQ8, Count };
const char* kind_name(Kind k) {
  static const char* names[] = {"gaussian", "outliers", "zero", "zero-first-group", "tiny", "denormal", "huge",
                                "constant", "one-hot", "two-hot", "integers", "half-steps", "grid-q4", "grid-q8"};
  return names[int(k)];
}

std::vector<float> make_row(Kind kind, int hd, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> pos(0, hd - 1);
  std::vector<float> x(static_cast<size_t>(hd));
  for (auto& v : x) v = nd(rng);
  switch (kind) {
    case Kind::Gaussian: break;
    case Kind::Outliers:
      for (int k = 0; k < 4; ++k) x[size_t(pos(rng))] *= (k % 2 ? -300.0f : 80.0f);
      break;
    case Kind::Zero: std::fill(x.begin(), x.end(), 0.0f); break;
    case Kind::ZeroFirstGroup: std::fill(x.begin(), x.begin() + std::min(hd, 128), 0.0f); break;
    case Kind::Tiny: for (auto& v : x) v *= 1e-19f; break;
    case Kind::Denormal: for (auto& v : x) v *= 1e-41f; break;  // subnormal floats, norm ~1e-40
    case Kind::Huge: for (auto& v : x) v *= 3e4f; break;        // f16 overflows to inf on some values
    case Kind::Constant: std::fill(x.begin(), x.end(), nd(rng)); break;
    case Kind::OneHot:
      std::fill(x.begin(), x.end(), 0.0f);
      x[size_t(pos(rng))] = nd(rng);
      break;
    case Kind::TwoHot: {
      std::fill(x.begin(), x.end(), 0.0f);
      const float a = nd(rng);
      x[size_t(pos(rng))] = a;
      x[size_t(pos(rng))] = -a;
      break;
    }
    case Kind::Integers: for (auto& v : x) v = float(int(v * 4.0f)); break;
    case Kind::HalfSteps:
      // q8_0: 127 in each block makes d = 1 and x * id = x, so the k + 0.5 values are rounding ties;
      // q4_0: -8 makes d = 1 and x + 8.5 lands on integers.
      for (int i = 0; i < hd; ++i) {
        x[size_t(i)] = float(int(nd(rng) * 20.0f)) + 0.5f;
        if (i % 32 == 0) x[size_t(i)] = (i / 32) % 2 ? 127.0f : -8.0f;
      }
      break;
    case Kind::GridQ4:
    case Kind::GridQ8: {
      // Values a few ulps from the rounding boundaries of x * id (q4_0: x * id + 8.5 near an
      // integer; q8_0: x * id near k + 0.5) with a scale d that is not a power of two, so that
      // rounding x * id before the add (not fusing it) decides some quants.
      std::uniform_real_distribution<float> ud(1.0f, 2.0f);
      std::uniform_int_distribution<int> kd(kind == Kind::GridQ4 ? -8 : -127, kind == Kind::GridQ4 ? 7 : 126);
      for (int b = 0; b < hd; b += 32) {
        const float m = ud(rng);
        const double d = kind == Kind::GridQ4 ? double(-m / -8.0f) : double(m / 127.0f);
        for (int j = b; j < std::min(hd, b + 32); ++j) x[size_t(j)] = float(d * (kd(rng) + 0.5));
        x[size_t(b)] = kind == Kind::GridQ4 ? -m : m;
      }
      break;
    }
    case Kind::Count: break;
  }
  return x;
}

std::vector<int> head_dims_of(KvType t) {
  if (kv_type_rotated(t)) return {32, 64, 128, 256, 512};
  if (t == KvType::Q8_0 || t == KvType::Q4_0) return {32, 64, 96, 128, 256, 512};
  return {1, 40, 64, 100, 128, 256};
}

// Compares the GPU algorithm on the CPU with quantize_head on many rows; returns the number of rows
// compared and fails with the first differing byte (and, for the rotated types, how far the decoded
// values are apart).
int compare_rows(KvType t, int hd, Kind kind, int trials, uint32_t seed, int legacy = 0) {
  const KvTypeOps& ops = kv_type_ops(t);
  SideParams p = make_side_params(t, hd);
  p.tab.form = legacy ? EncoderForm::Legacy : EncoderForm::Registers;  // HostExec: the array forms either way
  const size_t bytes = kv_head_bytes(t, hd);
  std::mt19937 rng(seed);
  int rows = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const std::vector<float> x = make_row(kind, hd, rng);
    std::vector<uint8_t> want(bytes, 0xCD), got(bytes, 0x5A);
    ops.quantize_head(x.data(), want.data(), hd);
    encode_head_host(p, x.data(), got.data(), trial % 2 ? seed + uint32_t(trial) : 0);
    for (size_t b = 0; b < bytes; ++b) {
      if (got[b] == want[b]) continue;
      std::vector<float> dw(static_cast<size_t>(hd)), dg(static_cast<size_t>(hd));
      ops.dequantize_head(want.data(), dw.data(), hd);
      ops.dequantize_head(got.data(), dg.data(), hd);
      double max_diff = 0;
      for (int i = 0; i < hd; ++i) max_diff = std::max(max_diff, std::fabs(double(dw[size_t(i)]) - dg[size_t(i)]));
      ADD_FAILURE() << kv_type_name(t) << (legacy ? " (legacy encoder)" : "") << " head_dim " << hd << " rows '" << kind_name(kind) << "' trial " << trial
                    << ": byte " << b << " of " << bytes << " got 0x" << std::hex << int(got[b]) << " want 0x"
                    << int(want[b]) << std::dec << "; decoded max |diff| " << max_diff;
      return rows;
    }
    ++rows;
  }
  return rows;
}

class CudaKvEncodeRows : public ::testing::TestWithParam<KvType> {};

TEST_P(CudaKvEncodeRows, BytesEqualQuantizeHead) {
  const KvType t = GetParam();
  int rows = 0;
  for (int hd : head_dims_of(t))
    for (int k = 0; k < int(Kind::Count); ++k)
      rows += compare_rows(t, hd, Kind(k), kv_type_rotated(t) ? 24 : 40, uint32_t(1000 * hd + k));
  EXPECT_GT(rows, 0);
}

// The legacy encoder (POLYKV_CUDA_KV_VITERBI=old, kept for A/B benchmarks) writes the same bytes.
TEST_P(CudaKvEncodeRows, LegacyEncoderBytesEqualQuantizeHead) {
  const KvType t = GetParam();
  if (!kv_type_rotated(t)) GTEST_SKIP() << "only the rotated types have a legacy path";
  int rows = 0;
  for (int hd : head_dims_of(t))
    for (int k = 0; k < int(Kind::Count); ++k) rows += compare_rows(t, hd, Kind(k), 6, uint32_t(7000 * hd + k), 1);
  EXPECT_GT(rows, 0);
}

INSTANTIATE_TEST_SUITE_P(AllKvTypes, CudaKvEncodeRows, ::testing::ValuesIn(kAllKvTypes),
                         [](const auto& info) { return std::string(kv_type_name(info.param)); });

// kv_store's addressing (StoreArgs / locate_unit, the device's own code) against the store's: rows
// scattered into layer 1 of a two-layer pool land where KvBlockStore::k_part / v_part say, padding
// rows (slot -1) and untouched rows keep their poison.
TEST(CudaKvEncodeStore, HostRunOfTheKernelWritesTheStoreLayout) {
  std::mt19937 rng(17);
  const int n_types = int(std::size(kAllKvTypes));
  for (int ti = 0; ti < n_types; ++ti)
    for (int hd : {64, 128, 256})
      for (int n_head : {1, 3, 4}) {
        const KvType kt = kAllKvTypes[ti], vt = kAllKvTypes[(ti + 5) % n_types];
        const int hd_v = ti % 2 ? hd : 64, n_blocks = 4, block_tokens = 16, layer = 1;
        SCOPED_TRACE(std::string("K ") + kv_type_name(kt) + " V " + kv_type_name(vt) + " head_dim " +
                     std::to_string(hd) + "/" + std::to_string(hd_v) + " n_head " + std::to_string(n_head));
        KvShape shape;
        shape.n_layer = 2;
        shape.n_head_kv = n_head;
        shape.head_dim = hd;
        shape.head_dim_v = hd_v;
        KvBlockStore got(shape, kt, vt, n_blocks, block_tokens), want(shape, kt, vt, n_blocks, block_tokens);
        const size_t pool = got.block_bytes() * size_t(n_blocks);
        std::memset(got.k_part(0, 0), 0xA5, pool);
        std::memset(want.k_part(0, 0), 0xA5, pool);
        std::vector<int32_t> slots(static_cast<size_t>(n_blocks * block_tokens));
        std::iota(slots.begin(), slots.end(), 0);
        std::shuffle(slots.begin(), slots.end(), rng);
        slots.resize(23);
        slots[9] = -1;
        const int n = int(slots.size());
        std::vector<float> k(size_t(n) * size_t(n_head) * size_t(hd)), v(size_t(n) * size_t(n_head) * size_t(hd_v));
        std::normal_distribution<float> nd;
        for (auto& x : k) x = nd(rng);
        for (auto& x : v) x = nd(rng);
        for (int r = 0; r < n; ++r) {
          if (slots[size_t(r)] < 0) continue;
          const int b = slots[size_t(r)] / block_tokens, i = slots[size_t(r)] % block_tokens;
          for (int g = 0; g < n_head; ++g) {
            const size_t rh = size_t(r) * size_t(n_head) + size_t(g), slot_row = size_t(g * block_tokens + i);
            kv_type_ops(kt).quantize_head(k.data() + rh * size_t(hd),
                                          want.k_part(b, layer) + slot_row * want.k_head_bytes(), hd);
            kv_type_ops(vt).quantize_head(v.data() + rh * size_t(hd_v),
                                          want.v_part(b, layer) + slot_row * want.v_head_bytes(), hd_v);
          }
        }
        const StoreArgs a = make_store_args(kt, hd, vt, hd_v, n_head, block_tokens, got.k_part(0, layer),
                                            got.block_bytes(), got.k_part_bytes(), slots.data(), n, k.data(), v.data());
        kv_store_host(a, uint32_t(ti + 1));
        const uint8_t *g = got.k_part(0, 0), *w = want.k_part(0, 0);
        size_t first = pool;
        for (size_t i = 0; i < pool && first == pool; ++i)
          if (g[i] != w[i]) first = i;
        ASSERT_EQ(first, pool) << "first differing byte " << first << " (block " << first / got.block_bytes()
                               << ", byte in block " << first % got.block_bytes() << ")";
      }
}

}  // namespace
}  // namespace polykv::cuda::enc
