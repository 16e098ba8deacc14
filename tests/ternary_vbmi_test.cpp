// The VBMI TQ1_0 kernel (backend/cpu/ternary_kernels_avx512vbmi.cpp): codes come out of byte lookups in
// byte order, so the activations are permuted once per matmul (tq1_0_vbmi_act). Checked here: the
// permuted layout gives Σ t q exactly on random blocks (scalar, every machine), and on a CPU with
// AVX512_VBMI the kernel against the VNNI kernel and the scalar reference, 1..8 tokens, batch invariance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/ternary_kernels.h"
#include "core/fp16.h"
#include "quant/ternary.h"

namespace polykv {
namespace {

// Σ over a block of digit n of weight byte m (qs[48], qh[4]) times tq1p[64 n + m], plus the int32 at
// byte 320: what the kernel's five vpdpbusd compute.
int32_t permuted_dot(const BlockTQ1_0& w, const int8_t* p) {
  uint8_t bytes[52];
  std::memcpy(bytes, w.qs, 48);
  std::memcpy(bytes + 48, w.qh, 4);
  int32_t s;
  std::memcpy(&s, p + 320, 4);
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 64; ++m) s += (m < 52 ? base3_digit(bytes[m], n) : 0) * int32_t(p[64 * n + m]);
  return s;
}

TEST(TernaryVbmi, PermutedActivationsGiveExactBlockSums) {
  std::mt19937 rng(11);
  const int64_t n_in = 256 * 6;
  std::vector<BlockTQ1_0> w(static_cast<size_t>(n_in / 256));
  std::vector<int8_t> qs(static_cast<size_t>(n_in));
  std::vector<int16_t> bsums(static_cast<size_t>(n_in / 16));
  std::vector<int8_t> perm(cpu::tq1p_bytes(n_in));
  for (int rep = 0; rep < 50; ++rep) {
    for (BlockTQ1_0& b : w)
      for (size_t i = 0; i < 54; ++i) reinterpret_cast<uint8_t*>(&b)[i] = uint8_t(rng() & 255);
    const int bound = rep % 2 ? 127 : 3;
    for (int8_t& q : qs) q = int8_t(int(rng() % uint32_t(2 * bound + 1)) - bound);
    for (size_t j = 0; j < bsums.size(); ++j) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += qs[16 * j + size_t(i)];
      bsums[j] = int16_t(s);
    }
    cpu::tq1_0_vbmi_act(qs.data(), bsums.data(), n_in, perm.data());
    for (size_t b = 0; b < w.size(); ++b) {
      int8_t t[256];
      ternary_block_values(DType::TQ1_0, &w[b], t);
      int32_t ref = 0;
      for (int i = 0; i < 256; ++i) ref += int32_t(t[i]) * qs[256 * b + size_t(i)];
      ASSERT_EQ(permuted_dot(w[b], perm.data() + 384 * b), ref) << "rep " << rep << " block " << b;
      for (int k = 324; k < 384; ++k) ASSERT_EQ(perm[384 * b + size_t(k)], 0) << "byte " << k;
    }
  }
}

// One token's activations as matmul lays them out (64-byte aligned parts).
struct Act {
  std::vector<float> d;
  std::vector<int8_t> qs;
  std::vector<int16_t> bsums;
  int8_t* perm = nullptr;
  std::vector<int8_t> storage;
  cpu::ActRow row;
  Act(const float* x, int64_t n) : d(size_t(n / 256)), qs(size_t(n)), bsums(size_t(n / 16)), storage(cpu::tq1p_bytes(n) + 64) {
    cpu::quantize_act_q8_K(x, n, qs.data(), d.data(), bsums.data());
    perm = reinterpret_cast<int8_t*>((reinterpret_cast<uintptr_t>(storage.data()) + 63) & ~uintptr_t(63));
    cpu::tq1_0_vbmi_act(qs.data(), bsums.data(), n, perm);
    row.qs = qs.data();
    row.d = d.data();
    row.bsums = bsums.data();
    row.tq1p = perm;
  }
};

TEST(TernaryVbmi, KernelMatchesVnniAndScalar) {
  const cpu::RowDotFn vbmi = cpu::ternary_row_dot_avx512vbmi(DType::TQ1_0);
  if (!vbmi) GTEST_SKIP() << "no AVX512_VBMI on this CPU (or POLYKV_TERNARY_VBMI=0)";
  const cpu::RowDotFn vnni = cpu::ternary_row_dot_avx512(DType::TQ1_0);
  const cpu::RowDotFn scalar = cpu::ternary_row_dot_scalar(DType::TQ1_0);
  ASSERT_NE(vnni, nullptr);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n_in = 256 * 9;
  for (int pattern = 0; pattern < 3; ++pattern) {
    std::vector<BlockTQ1_0> w(static_cast<size_t>(n_in / 256));
    for (BlockTQ1_0& b : w) {
      for (size_t i = 0; i < 52; ++i)
        reinterpret_cast<uint8_t*>(&b)[i] = pattern == 0 ? uint8_t(rng() & 255) : pattern == 1 ? 0xFF : 0x80;
      b.d = f32_to_fp16(pattern == 0 ? 0.01f + 0.1f * float(rng() % 100) / 100.0f : 1.0f);
    }
    std::vector<Act> acts;
    acts.reserve(8);
    for (int t = 0; t < 8; ++t) {
      std::vector<float> x(static_cast<size_t>(n_in));
      for (float& v : x) v = pattern == 0 ? nd(rng) : (t % 2 ? 1.0f : -1.0f);
      acts.emplace_back(x.data(), n_in);
    }
    std::vector<cpu::ActRow> rows;
    for (const Act& a : acts) rows.push_back(a.row);
    float all[8], ref_vnni[8], ref_scalar[8];
    vbmi(w.data(), rows.data(), 8, n_in, all);
    vnni(w.data(), rows.data(), 8, n_in, ref_vnni);
    scalar(w.data(), rows.data(), 8, n_in, ref_scalar);
    for (int t = 0; t < 8; ++t) {
      const float tol = 1e-5f * (1.0f + std::fabs(ref_scalar[t]));
      EXPECT_NEAR(all[t], ref_vnni[t], tol) << "pattern " << pattern << " token " << t;
      EXPECT_NEAR(all[t], ref_scalar[t], tol) << "pattern " << pattern << " token " << t;
    }
    // Batch invariance: every call width and position gives the same bits.
    for (int nt = 1; nt <= 8; ++nt)
      for (int t0 = 0; t0 + nt <= 8; ++t0) {
        float part[8];
        vbmi(w.data(), rows.data() + t0, nt, n_in, part);
        for (int k = 0; k < nt; ++k)
          ASSERT_EQ(std::memcmp(&part[k], &all[t0 + k], 4), 0) << "nt " << nt << " t0 " << t0 << " k " << k;
      }
  }
}

}  // namespace
}  // namespace polykv
