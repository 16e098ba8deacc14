// The host/device arithmetic of the CUDA MoE ops (backend/cuda/moe_cuda_hd.cuh) and of the CUDA
// MXFP4 decoder (backend/cuda/matmul_cuda_decode.cuh DecMXFP4), run on the CPU (g++; CI) against the
// CPU backend's references: the warp routing emulated lane by lane = moe_route_cpu, the block routing by ranks
// emulated thread by thread = moe_route_cpu's picks, the activation =
// moe_activation bit for bit, the work-item bound, and DecMXFP4's units = dequantize_mxfp4_row bit
// for bit at every byte alignment, its lane dot = the exact sum within f32 rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/moe_cpu.h"
#include "backend/cuda/matmul_cuda_dot.cuh"
#include "backend/cuda/moe_cuda_hd.cuh"
#include "quant/mxfp4.h"

namespace polykv {
namespace {

using namespace cuda::hd;

// The routing kernel of moe_cuda.cu, one row, its 32 lanes emulated (the warp's butterfly is replaced
// by a plain scan: the order is strict and total, so any combining order has the same winner).
void route_row_emulated(const float* l, int ne, int k, MoeGating gating, int32_t* ids, float* w) {
  float pv = 0.0f;
  int pi = -1;
  double mx = 0.0, sum_chosen = 0.0;
  std::vector<float> vs(static_cast<size_t>(k));
  for (int j = 0; j < k; ++j) {
    float bv = 0.0f;
    int bi = -1;
    for (int lane = 0; lane < 32; ++lane) {
      float v;
      const int i = route_lane_best(l, ne, lane, pv, pi, v);
      if (route_before(v, i, bv, bi)) {
        bv = v;
        bi = i;
      }
    }
    if (j == 0) mx = double(bv);
    sum_chosen += route_exp(bv, mx);
    ids[j] = bi;
    vs[size_t(j)] = bv;
    pv = bv;
    pi = bi;
  }
  double sum = sum_chosen;
  if (gating == MoeGating::SoftmaxTopK) {
    double lanes[32] = {};
    for (int lane = 0; lane < 32; ++lane)
      for (int e = lane; e < ne; e += 32) lanes[lane] += route_exp(l[e], mx);
    for (int off = 16; off > 0; off /= 2) {  // the butterfly: every lane adds its partner's value
      double nx[32];
      for (int lane = 0; lane < 32; ++lane) nx[lane] = lanes[lane] + lanes[lane ^ off];
      std::copy(nx, nx + 32, lanes);
    }
    sum = lanes[0];
  }
  for (int j = 0; j < k; ++j) w[j] = route_weight(vs[size_t(j)], mx, sum);
}

TEST(MoeCudaHd, WarpRoutingMatchesTheCpu) {
  std::mt19937 rng(7);
  int checked = 0;
  for (int ne : {1, 2, 8, 31, 32, 33, 100, 128, 256}) {
    for (int k : {1, 2, 4, 8}) {
      if (k > ne) continue;
      for (MoeGating g : {MoeGating::SoftmaxTopK, MoeGating::SoftmaxTopKRenorm, MoeGating::TopKSoftmax}) {
        const int n = 9;
        std::vector<float> logits(size_t(n) * size_t(ne));
        std::normal_distribution<float> d(0.0f, 2.0f);
        for (auto& v : logits) v = d(rng);
        // Ties: row 1 all equal, row 2 a few repeated values (ties go to the lower index).
        std::fill(logits.begin() + ne, logits.begin() + 2 * ne, 0.5f);
        for (int e = 0; e < ne; ++e) logits[size_t(2 * ne + e)] = float(e % 3);
        std::vector<int32_t> ids_cpu(size_t(n) * k), ids_emu(ids_cpu.size());
        std::vector<float> w_cpu(ids_cpu.size()), w_emu(ids_cpu.size());
        moe_route_cpu(logits.data(), n, {ne, k, g}, ids_cpu.data(), w_cpu.data());
        for (int t = 0; t < n; ++t)
          route_row_emulated(logits.data() + size_t(t) * ne, ne, k, g, ids_emu.data() + size_t(t) * k,
                             w_emu.data() + size_t(t) * k);
        for (size_t i = 0; i < ids_cpu.size(); ++i) {
          ASSERT_EQ(ids_emu[i], ids_cpu[i]) << "ne " << ne << " k " << k << " gating " << int(g) << " slot " << i;
          // Renormalised gatings: the same double operations in the same order, so the same bits;
          // SoftmaxTopK sums all experts in another order (lanes, then a butterfly): within 2 ulp.
          if (g == MoeGating::SoftmaxTopK)
            ASSERT_NEAR(w_emu[i], w_cpu[i], 2.5e-7f * std::fabs(w_cpu[i])) << "ne " << ne << " k " << k;
          else
            ASSERT_EQ(w_emu[i], w_cpu[i]) << "ne " << ne << " k " << k << " gating " << int(g) << " slot " << i;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

// route_block_picks (the CUDA routing by ranks) emulated thread by thread on a block of `threads`: P adjacent
// threads count one expert's rank over their shares (route_rank_parts / route_rank_chunk / route_rank_share, the
// device's own functions), and the expert of rank j < k is pick j. Returns false when the ranks are not a
// permutation (what a NaN logit can do; the device then takes the rounds).
bool block_picks_emulated(const float* l, int ne, int k, int threads, int32_t* ids) {
  const int parts = route_rank_parts(ne, threads), chunk = route_rank_chunk(ne, parts);
  std::vector<int> seen(size_t(ne), 0);
  for (int i = 0; i < ne; ++i) {
    int rank = 0;
    for (int part = 0; part < parts; ++part) {
      const int lo = std::min(part * chunk, ne), hi = std::min(lo + chunk, ne);
      rank += route_rank_share(l, lo, hi, i, l[i]);
    }
    if (rank < 0 || rank >= ne || seen[size_t(rank)]++) return false;
    if (rank < k) ids[rank] = i;
  }
  return true;
}

TEST(MoeCudaHd, BlockRankPicksMatchTheCpu) {
  std::mt19937 rng(11);
  int checked = 0;
  for (int threads : {128, 256}) {
    for (int ne : {1, 2, 4, 8, 31, 32, 33, 100, 127, 128, 129, 256}) {
      if (ne > threads) continue;
      for (int k : {1, 2, 4, 8}) {
        if (k > ne) continue;
        const int n = 8;
        std::vector<float> logits(size_t(n) * size_t(ne));
        std::normal_distribution<float> d(0.0f, 2.0f);
        for (auto& v : logits) v = d(rng);
        float* row = logits.data();
        std::fill(row + ne, row + 2 * ne, 0.5f);                                       // row 1: all equal
        for (int e = 0; e < ne; ++e) row[2 * ne + e] = float(e % 3);                   // row 2: ties
        for (int e = 0; e < ne; ++e) row[3 * ne + e] = e % 2 ? -0.0f : 0.0f;           // row 3: signed zeros
        row[4 * ne] = INFINITY;                                                        // row 4: infinities
        row[4 * ne + ne - 1] = -INFINITY;
        for (int e = 0; e < ne; ++e) row[5 * ne + e] = float((e * 7) % 5) * 0.25f;     // row 5: spread ties
        for (int e = 0; e < ne; ++e) row[6 * ne + e] = -INFINITY;                      // row 6: all -inf
        std::vector<int32_t> ids_cpu(size_t(n) * k), ids_emu(ids_cpu.size(), -2);
        std::vector<float> w_cpu(ids_cpu.size());
        moe_route_cpu(logits.data(), n, {ne, k, MoeGating::SoftmaxTopKRenorm}, ids_cpu.data(), w_cpu.data());
        for (int t = 0; t < n; ++t) {
          ASSERT_TRUE(block_picks_emulated(row + size_t(t) * ne, ne, k, threads, ids_emu.data() + size_t(t) * k))
              << "ne " << ne << " row " << t << ": the ranks are not a permutation";
          for (int j = 0; j < k; ++j, ++checked)
            ASSERT_EQ(ids_emu[size_t(t * k + j)], ids_cpu[size_t(t * k + j)])
                << "threads " << threads << " ne " << ne << " k " << k << " row " << t << " pick " << j;
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
  // A NaN breaks the order: some rank repeats or goes missing, which the device sees (its vote) and routes by rounds.
  std::vector<float> l = {1.0f, std::nanf(""), 0.5f, 2.0f};
  int32_t ids[4];
  EXPECT_FALSE(block_picks_emulated(l.data(), 4, 2, 256, ids));
}

TEST(MoeCudaHd, ActivationIsTheCpusBitForBit) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 6.0f);
  const int n = 4096;
  std::vector<float> g(n), u(n);
  for (int i = 0; i < n; ++i) {
    g[size_t(i)] = d(rng);
    u[size_t(i)] = d(rng);
  }
  g[0] = 7.0f, u[0] = -7.5f;  // at and past the clamp
  for (MoeActivation act : {MoeActivation::SwiGLU, MoeActivation::SwiGLUClamped}) {
    std::vector<float> ref = g;
    moe_activation(ref.data(), u.data(), n, act, 1.702f, 7.0f);
    for (int i = 0; i < n; ++i) {
      const float got = moe_act(g[size_t(i)], u[size_t(i)], act == MoeActivation::SwiGLUClamped, 1.702f, 7.0f);
      ASSERT_EQ(std::memcmp(&got, &ref[size_t(i)], 4), 0)
          << "act " << int(act) << " i " << i << " g " << g[size_t(i)] << " u " << u[size_t(i)] << ": " << got
          << " vs " << ref[size_t(i)];
    }
  }
}

TEST(MoeCudaHd, SlotSumRunsInSlotOrder) {
  const float w[3] = {0.5f, 0.25f, 0.125f}, y[3] = {3.0f, 1e8f, -1e8f};
  float o = 0.0f;
  for (int j = 0; j < 3; ++j) o = slot_sum_step(o, w[j], y[j], j);
  EXPECT_EQ(o, ((0.5f * 3.0f) + 0.25f * 1e8f) + 0.125f * -1e8f);
}

TEST(MoeCudaHd, ItemBoundHoldsForAnyRouting) {
  std::mt19937 rng(11);
  for (int ne : {1, 8, 128}) {
    for (int chunk : {1, 2, 4, 8}) {
      for (int n_slots : {1, 3, 8, 64, 300, 2400}) {
        for (int rep = 0; rep < 20; ++rep) {
          std::vector<int> cnt(size_t(ne), 0);
          const int hot = int(rng() % unsigned(ne));
          for (int s = 0; s < n_slots; ++s) ++cnt[size_t(rep % 2 ? hot : int(rng() % unsigned(ne)))];
          int64_t items = 0;  // what moe_group_kernel makes
          for (int c : cnt) items += (c + chunk - 1) / chunk;
          ASSERT_LE(items, moe_items_bound(n_slots, ne, chunk)) << ne << " " << chunk << " " << n_slots;
        }
      }
    }
  }
}

TEST(MxfpCudaDecode, ScaleAndNibblesAreTheReference) {
  for (int e = 0; e < 256; ++e) {
    const float a = mxfp4_scale_hd(uint32_t(e)), b = mxfp4_scale(uint8_t(e));
    ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << "e " << e;
  }
  for (uint32_t v = 0; v < 65536; ++v) {  // every combination of 4 nibbles (16^4)
    const uint32_t word = (v & 0xF) | ((v >> 4) & 0xF) << 8 | ((v >> 8) & 0xF) << 16 | ((v >> 12) & 0xF) << 24;
    const uint32_t got = mxfp4_nibbles_to_s8(word);
    for (int k = 0; k < 4; ++k)
      ASSERT_EQ(int8_t(got >> (8 * k)), kMxfp4Values[(word >> (8 * k)) & 0xF]) << std::hex << word << " byte " << k;
  }
}

// Random mxfp4 rows (random bytes, exponents spread over 0..255 in some rows, near 128 in others)
// at byte offsets 0..3 of a buffer: every unit value = dequantize_mxfp4_row's, bit for bit.
TEST(MxfpCudaDecode, UnitsMatchDequantizeBitExactAtEveryAlignment) {
  std::mt19937 rng(5);
  for (int offset = 0; offset < 4; ++offset) {
    for (int n_blocks : {1, 3, 90}) {
      std::vector<uint8_t> buf(size_t(offset) + size_t(n_blocks) * 17 + 16);
      for (auto& b : buf) b = uint8_t(rng());
      uint8_t* row = buf.data() + offset;
      for (int b = 0; b < n_blocks; ++b) row[b * 17] = uint8_t(n_blocks == 90 ? 118 + rng() % 20 : rng() % 256);
      std::vector<float> ref(size_t(n_blocks) * 32);
      dequantize_mxfp4_row(row, ref.data(), int64_t(n_blocks) * 32);
      for (int b = 0; b < n_blocks; ++b) {
        DecMXFP4::Unit u;
        DecMXFP4::load<2>(row + b * 17, 0, u);
        for (int w = 0; w < 8; ++w)
          for (int j = 0; j < 4; ++j) {
            const float got = unit_value(u, w, j), want = ref[size_t(b * 32 + 4 * w + j)];
            ASSERT_TRUE((got == want && std::signbit(got) == std::signbit(want)) || (got == 0 && want == 0))
                << "offset " << offset << " block " << b << " value " << 4 * w + j << ": " << got << " vs " << want;
          }
      }
    }
  }
}

// One warp's dot of an mxfp4 row with 8-bit activations (lane_dot_q emulated for 32 lanes, then the
// warp butterfly) against the exact sum of the same quantized values: only f32 rounding apart.
TEST(MxfpCudaDecode, LaneDotMatchesTheExactSum) {
  std::mt19937 rng(9);
  for (int n_blocks : {1, 5, 90, 64}) {
    const int64_t n_in = int64_t(n_blocks) * 32;
    std::vector<float> w(static_cast<size_t>(n_in)), x(static_cast<size_t>(n_in));
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (auto& v : w) v = d(rng);
    for (auto& v : x) v = d(rng);
    std::vector<uint8_t> row(size_t(n_blocks) * 17 + 16);
    quantize_mxfp4_row(w.data(), row.data(), n_in);
    std::vector<float> wd(w.size());
    dequantize_mxfp4_row(row.data(), wd.data(), n_in);
    std::vector<int8_t> xq(x.size());
    std::vector<ActScale> xs(static_cast<size_t>(n_blocks));
    for (int b = 0; b < n_blocks; ++b) quantize_act_block(x.data() + b * 32, xq.data() + b * 32, xs[size_t(b)]);
    double exact = 0, mag = 0;
    for (int64_t i = 0; i < n_in; ++i) {
      const double xv = double(xs[size_t(i / 32)].d) * xq[size_t(i)];
      exact += double(wd[size_t(i)]) * xv;
      mag += std::fabs(double(wd[size_t(i)]) * xv);
    }
    float lanes[32];
    for (int lane = 0; lane < 32; ++lane) {
      const uint8_t* rows[1] = {row.data()};
      float acc[1][1] = {{0.0f}};
      lane_dot_q<DecMXFP4, 1, 1, 2>(rows, xq.data(), xs.data(), n_in, 1, lane, acc);
      lanes[lane] = acc[0][0];
    }
    const float got = warp_sum_emulated(lanes);
    EXPECT_NEAR(got, exact, 1e-6 * mag + 1e-30) << n_blocks << " blocks";
  }
}

}  // namespace
}  // namespace polykv
