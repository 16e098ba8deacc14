// The shared-memory staging of the mmq kernel (backend/cuda/matmul_cuda_mmq_stage.cuh) on the CPU (runs in CI):
// the cp.async pieces of a chunk stay inside the split row and their regions, are aligned to their size,
// and the staged bytes read back give Split<T>::load's words for every unit; the activation slots
// hold each value of a chunk exactly once at the positions the A fragments use; an emulation of the
// kernel's fragment pairing (staged units x staged activation slots) reproduces the reference dot
// product; the f16 dequantization of q4_0 / q8_0 (mma_fragments.cuh) gives the f16 weights; the split
// plan covers every chunk once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/matmul_cuda_mmq_stage.cuh"
#include "backend/cuda/mma_fragments.cuh"
#include "core/fp16.h"
#include "cuda/matmul_cuda_test_util.h"

namespace polykv {
namespace {

namespace hd = cuda::hd;

const DType kSplitTypes[] = {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// The chunk's staged A and B bytes of one split row, as the kernel's cp.async leave them.
template <class T>
void stage_row(const uint8_t* row, const hd::SplitGeom& g, int64_t c, std::vector<uint8_t>& a, std::vector<uint8_t>& b) {
  using G = hd::MmqStage<T>;
  a.assign(G::kPitchA, 0xEE);  // not zero: a piece that leaves a byte unwritten shows
  b.assign(G::kPitchB, 0xEE);
  for (int k = 0; k < G::kPieces; ++k) {
    const hd::MmqPiece p = G::piece(g, c, k);
    ASSERT_TRUE(p.bytes == 4 || p.bytes == 8 || p.bytes == 16) << "piece " << k;
    // The kernel copies the first kPiecesA pieces as 16 bytes of region A at 16 k, the rest as they say.
    ASSERT_EQ(k < G::kPiecesA, p.region == 0) << "piece " << k;
    if (k < G::kPiecesA) {
      ASSERT_EQ(p.bytes, 16) << "piece " << k;
      ASSERT_EQ(p.dst, 16 * k) << "piece " << k;
    }
    ASSERT_EQ(p.dst % p.bytes, 0) << "piece " << k;
    ASSERT_EQ(p.dst % 4, 0);
    std::vector<uint8_t>& r = p.region == 0 ? a : b;
    ASSERT_LE(p.dst + p.bytes, int(r.size())) << "piece " << k << " region " << p.region;
    if (!p.valid) {
      std::memset(r.data() + p.dst, 0, size_t(p.bytes));
      continue;
    }
    ASSERT_EQ(p.src % p.bytes, 0) << "piece " << k << " chunk " << c;
    ASSERT_GE(p.src, 0);
    ASSERT_LE(p.src + p.bytes, int64_t(g.row_bytes)) << "piece " << k << " chunk " << c << " reads past the row";
    std::memcpy(r.data() + p.dst, row + p.src, size_t(p.bytes));
  }
}

TEST(CudaMmqStage, StagedUnitsAreTheSplitLoads) {
  uint32_t seed = 41;
  for (DType t : kSplitTypes) {
    // n_in with a partial last chunk for the 32-value types (33 units), whole chunks for the k-quants.
    for (int64_t n_in : dtype_info(t).block_size == 256 ? std::vector<int64_t>{256, 1280} : std::vector<int64_t>{32, 1056, 4096}) {
      const int64_t n_out = 3;
      const auto w = cuda_test::make_weights(t, n_in, n_out, ++seed, false);
      const bool visited = hd::visit_split_decoder(t, [&](auto dec) {
        using T = decltype(dec);
        using S = hd::Split<T>;
        const hd::SplitGeom g = hd::split_geom<T>(n_in);
        std::vector<uint8_t> split(g.row_bytes * size_t(n_out));
        hd::split_pack_rows<T>(static_cast<const uint8_t*>(w.m.data), w.m.row_stride, n_in, n_out, split.data());
        const int64_t n_chunks = (g.n_units + 3) / 4;
        std::vector<uint8_t> a, b;
        for (int64_t o = 0; o < n_out; ++o) {
          const uint8_t* row = split.data() + size_t(o) * g.row_bytes;
          for (int64_t c = 0; c < n_chunks; ++c) {
            stage_row<T>(row, g, c, a, b);
            if (testing::Test::HasFatalFailure()) return;
            for (int tt = 0; tt < 4; ++tt) {
              const int64_t u = 4 * c + tt;
              EXPECT_EQ(hd::mmq_unit_valid(g, c, tt), u < g.n_units);
              if (u >= g.n_units) continue;
              uint32_t q[S::kUnitWords], h[S::kHeadWords], q2[S::kUnitWords], h2[S::kHeadWords];
              hd::split_load_unit<T>(row, g, u, q, h);
              hd::mmq_stage_unit<T>(a.data(), b.data(), c, tt, q2, h2);
              for (int k = 0; k < S::kUnitWords; ++k)
                ASSERT_EQ(q2[k], q[k]) << dtype_name(t) << " n_in " << n_in << " row " << o << " unit " << u << " word " << k;
              for (int k = 0; k < S::kHeadWords; ++k) {
                // 2-byte heads: only the low 16 bits are read (half_to_f32(uint16_t(h[0])).
                const uint32_t mask = S::kHeadBytes == 2 ? 0xFFFFu : 0xFFFFFFFFu;
                ASSERT_EQ(h2[k] & mask, h[k] & mask) << dtype_name(t) << " n_in " << n_in << " row " << o << " unit " << u
                                                     << " head word " << k;
              }
            }
          }
        }
      });
      ASSERT_TRUE(visited);
    }
  }
}

TEST(CudaMmqStage, ActivationSlotsHoldEachValueOnce) {
  for (DType t : kSplitTypes) {
    hd::visit_split_decoder(t, [&](auto dec) {
      using T = decltype(dec);
      const int64_t n_in = T::kBlockValues == 256 ? 1280 : 1056;
      const hd::SplitGeom g = hd::split_geom<T>(n_in);
      std::vector<int> hits(size_t(n_in), 0);
      for (int64_t c = 0; c < (g.n_units + 3) / 4; ++c) {
        for (int s = 0; s < hd::kMmq2XSlots; ++s) {
          const int jp = s / 4, tt = s % 4;
          const int64_t u = 4 * c + tt;
          if (!hd::mmq_unit_valid(g, c, tt)) continue;
          const int64_t pos = hd::mmq_x_slot_pos<T>(c, s);
          ASSERT_EQ(pos % 8, 0) << "16-byte aligned f16 slot";
          ASSERT_GE(pos, 128 * c);
          ASSERT_LE(pos + 8, 128 * (c + 1));
          // The 8 values are words 2 jp and 2 jp + 1 of unit u, in order.
          for (int e = 0; e < 8; ++e) {
            ASSERT_EQ(pos + e, hd::mmq_value_pos<T>(u / T::kParts, int(u % T::kParts), 2 * jp + e / 4, e % 4))
                << dtype_name(t) << " chunk " << c << " slot " << s << " value " << e;
            ++hits[size_t(pos + e)];
          }
        }
      }
      for (int64_t i = 0; i < n_in; ++i) ASSERT_EQ(hits[size_t(i)], 1) << dtype_name(t) << " value " << i;
    });
  }
}

// The kernel's pairing, emulated: thread t of a quad holds unit 4c + t (read from the staged bytes),
// k-step j's A slots are word j of it, its B slots the f16 activations at staged slot 4 (j / 2) + t,
// values 4 (j % 2) .. + 3. The sum over chunks, threads, steps and values of a row must be the dot of
// the dequantized row with x (both exact in double here; f32 weights are exact).
TEST(CudaMmqStage, EmulatedFragmentsGiveTheDot) {
  uint32_t seed = 77;
  for (DType t : kSplitTypes) {
    const int64_t n_in = dtype_info(t).block_size == 256 ? 1280 : 1056, n_out = 2;
    const auto w = cuda_test::make_weights(t, n_in, n_out, ++seed, true);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n_in));
    for (float& v : x) v = dist(rng);
    hd::visit_split_decoder(t, [&](auto dec) {
      using T = decltype(dec);
      using S = hd::Split<T>;
      const hd::SplitGeom g = hd::split_geom<T>(n_in);
      std::vector<uint8_t> split(g.row_bytes * size_t(n_out));
      hd::split_pack_rows<T>(static_cast<const uint8_t*>(w.m.data), w.m.row_stride, n_in, n_out, split.data());
      for (int64_t o = 0; o < n_out; ++o) {
        std::vector<float> ref(static_cast<size_t>(n_in));
        dequantize_row_ref(t, w.row(o), ref.data(), n_in);
        double want = 0, got = 0;
        for (int64_t i = 0; i < n_in; ++i) want += double(ref[size_t(i)]) * x[size_t(i)];
        const uint8_t* row = split.data() + size_t(o) * g.row_bytes;
        std::vector<uint8_t> a, b;
        for (int64_t c = 0; c < (g.n_units + 3) / 4; ++c) {
          stage_row<T>(row, g, c, a, b);
          // The staged activation column: slot s = 8 values from mmq_x_slot_pos (zeros for invalid units).
          float xs[hd::kMmq2XSlots][8] = {};
          for (int s = 0; s < hd::kMmq2XSlots; ++s)
            if (hd::mmq_unit_valid(g, c, s % 4))
              for (int e = 0; e < 8; ++e) xs[s][e] = x[size_t(hd::mmq_x_slot_pos<T>(c, s) + e)];
          for (int tt = 0; tt < 4; ++tt) {
            const int64_t u = 4 * c + tt;
            if (u >= g.n_units) continue;
            uint32_t q[S::kUnitWords], h[S::kHeadWords];
            hd::mmq_stage_unit<T>(a.data(), b.data(), c, tt, q, h);
            typename T::Unit unit;
            S::decode(q, h, int(u % T::kParts), unit);
            for (int j = 0; j < hd::kMmqStepsPerChunk; ++j) {
              float v[4];
              hd::unit_word_values(unit, j, v);
              for (int e = 0; e < 4; ++e) got += double(v[e]) * xs[4 * (j / 2) + tt][4 * (j % 2) + e];
            }
          }
        }
        EXPECT_NEAR(got, want, 1e-9 * (1 + std::fabs(want))) << dtype_name(t) << " row " << o;
      }
    });
  }
}

// The f16 dequantization of q4_0 / q8_0 (host emulation of PRMT, HSUB2, HMUL2) gives the f32 path's f16
// weights: f16(unit_word_values) for every byte and a spread of d (subnormal results, large d, both
// signs), up to the sign of a zero.
template <class T>
void check_half_pairs(uint32_t seed) {
  std::mt19937 rng(seed);
  const float ds[] = {1.0f, -1.0f, 5.96e-8f, -6.1e-5f, 3.1e-3f, 0.07f, -0.33f, 12.5f, 700.0f, 2.0e-6f};
  for (float dv : ds) {
    const uint16_t d16 = f32_to_fp16(dv);
    for (int rep = 0; rep < 64; ++rep) {
      typename T::Unit u;
      uint32_t q[hd::Split<T>::kUnitWords], h[hd::Split<T>::kHeadWords] = {d16};
      for (auto& w : q) w = uint32_t(rng());
      if (rep == 0)
        for (int k = 0; k < hd::Split<T>::kUnitWords; ++k) q[k] = 0x03020100u + 0x04040404u * uint32_t(k);  // every nibble
      hd::Split<T>::decode(q, h, 0, u);
      for (int w = 0; w < 8; ++w) {
        float v[4];
        hd::unit_word_values(u, w, v);
        for (int p = 0; p < 2; ++p) {
          const uint32_t got = hd::mmq_half_pair<T>(hd::mmq_half_bytes<T>(u, w), p, uint32_t(d16) * 0x10001u);
          for (int e = 0; e < 2; ++e) {
            const uint16_t want = f32_to_fp16(v[2 * p + e]), g16 = uint16_t(got >> (16 * e));
            if (want == g16 || ((want | g16) & 0x7FFF) == 0) continue;  // equal, or zeros of either sign
            FAIL() << (T::kBlockBytes == 18 ? "q4_0" : "q8_0") << " d " << dv << " word " << w << " value " << 2 * p + e
                   << ": f16 " << std::hex << g16 << ", want " << want << std::dec << " (" << v[2 * p + e] << ")";
          }
        }
      }
    }
  }
}

TEST(CudaMmqStage, HalfDequantIsTheF16Weight) {
  static_assert(hd::mmq_half_dequant<hd::DecQ4_0>() && hd::mmq_half_dequant<hd::DecQ8_0>());
  static_assert(!hd::mmq_half_dequant<hd::DecQ4_K>() && !hd::mmq_half_dequant<hd::DecQ6_K>());
  check_half_pairs<hd::DecQ4_0>(5);
  check_half_pairs<hd::DecQ8_0>(6);
}

TEST(CudaMmqStage, PlanCoversEveryChunkOnce) {
  for (int64_t n_out : {1, 255, 256, 257, 1024, 4096, 6144, 14336, 28672, 128256}) {
    for (int64_t n_units : {1, 3, 4, 5, 33, 128, 448, 1000}) {
      for (int sms : {1, 78, 132}) {
        for (int per_sm : {1, 2}) {
          for (int forced : {0, 1, 3, 8, 20}) {
            const hd::MmqPlan p = hd::mmq2_plan(n_out, n_units, sms, per_sm, forced);
            SCOPED_TRACE(testing::Message() << "n_out " << n_out << " units " << n_units << " SMs " << sms);
            ASSERT_GE(p.row_blocks * hd::kMmq2Rows, n_out);
            ASSERT_LT((p.row_blocks - 1) * hd::kMmq2Rows, n_out);
            ASSERT_EQ(p.n_chunks, (n_units + 3) / 4);
            ASSERT_GE(p.splits, 1);
            ASSERT_LE(p.splits, hd::kMmq2MaxSplits);
            ASSERT_GE(int64_t(p.splits) * p.chunks_per_split, p.n_chunks);
            ASSERT_LT(int64_t(p.splits - 1) * p.chunks_per_split, p.n_chunks);
            if (forced > 0) {
              EXPECT_LE(p.splits, forced);
            }
            // At most one wave of CTAs when split automatically.
            if (forced == 0 && p.splits > 1) {
              EXPECT_LE(p.row_blocks * p.splits, int64_t(sms) * per_sm);
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(hd::mmq2_plan(4096, 128, 132, 1, 0).splits, 8);   // 16 row blocks x 8 = 128 CTAs
  EXPECT_EQ(hd::mmq2_plan(6144, 128, 132, 1, 0).splits, 5);   // 24 x 5 = 120
  EXPECT_EQ(hd::mmq2_plan(28672, 128, 132, 1, 0).splits, 1);  // 112
  EXPECT_EQ(hd::mmq2_plan(14336, 128, 132, 1, 0).splits, 2);  // 56 x 2 = 112
  EXPECT_EQ(hd::mmq2_plan(1024, 128, 132, 1, 0).splits, 16);  // 4 x 16 = 64
}

TEST(CudaMmqStage, SharedMemoryFitsAnH200) {
  // 227 KB of shared memory per block on sm_90, every type and n tile count.
  for (int nt : {1, 2, 4, 8}) {
    EXPECT_LE(hd::mmq2_smem_bytes<hd::DecQ4_0>(nt), 227 * 1024) << nt;
    EXPECT_LE(hd::mmq2_smem_bytes<hd::DecQ8_0>(nt), 227 * 1024) << nt;
    EXPECT_LE(hd::mmq2_smem_bytes<hd::DecQ4_K>(nt), 227 * 1024) << nt;
    EXPECT_LE(hd::mmq2_smem_bytes<hd::DecQ6_K>(nt), 227 * 1024) << nt;
    EXPECT_GE(hd::mmq2_stages(nt), 3);  // the pipeline needs 2 chunks in flight at least
  }
  // Region offsets stay 16-byte aligned.
  EXPECT_EQ(hd::kMmq2Rows * hd::MmqStage<hd::DecQ4_0>::kPitchB % 16, 0);
  EXPECT_EQ(hd::kMmq2Rows * hd::MmqStage<hd::DecQ8_0>::kPitchA % 16, 0);
  EXPECT_EQ(hd::mmq2_stage_bytes<hd::DecQ6_K>(1) % 16, 0);
}

// The wgmma kernel's activations (matmul_cuda_mmq_stage.cuh, "wgmma"): the permuted x, copied into a
// stage as the kernel copies it (8 threads a core matrix: 16 bytes from mmq3_x_global_offset + 16 r to
// mmq3_x_stage_offset + 16 r), then read as wgmma reads a no-swizzle K-major B through the descriptor the
// kernel builds (start = k-step j's offset, LBO 128 between the two k halves, SBO 256 between column
// groups; element (k slot kk, column n) at start + (n / 8) SBO + (kk / 8) LBO + 16 (n % 8) + 2 (kk % 8)),
// must give, for every k-step j and slot kk, the f16 activation of the value the A fragment puts in that
// slot (word j of unit 4c + t, t = (kk % 8) / 2, value 2 (kk / 8) + kk % 2: mma.m16n8k16's A layout), zero
// for a unit past the row's last or a column past the call's; and every value of x once per column.
TEST(CudaMmqStage, WgmmaActivationsMatchTheAFragmentSlots) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (DType t : kSplitTypes) {
    hd::visit_split_decoder(t, [&](auto dec) {
      using T = decltype(dec);
      for (int ncols : {1, 9, 11, 40, 64}) {
        const int64_t n_in = T::kBlockValues == 256 ? 1280 : 1056;  // 1056: 33 units, a partial last chunk
        const hd::SplitGeom g = hd::split_geom<T>(n_in);
        const int64_t n_chunks = (g.n_units + 3) / 4;
        const int nt = hd::mmq_tiles(ncols);
        std::vector<float> x(size_t(ncols) * size_t(n_in));
        for (float& v : x) v = dist(rng);
        // The conversion kernel's output (mmq3_to_f16_kernel).
        const int64_t total = hd::mmq3_x_halves(g.n_units, ncols);
        std::vector<uint16_t> xw(static_cast<size_t>(total));
        for (int64_t i = 0; i < total; ++i) {
          int col = -1;
          const int64_t src = hd::mmq3_x_source<T>(g, ncols, i, col);
          ASSERT_GE(col, 0);
          ASSERT_LT(col, 8 * ((ncols + 7) / 8));
          xw[size_t(i)] = src < 0 ? f32_to_fp16(0.0f) : f32_to_fp16(x[size_t(col) * size_t(n_in) + size_t(src)]);
        }
        const int n_groups = (ncols + 7) / 8;
        std::vector<int> hits(size_t(ncols) * size_t(n_in), 0);
        std::vector<uint8_t> stage(size_t(nt) * 8 * 2 * hd::kMmq3CoreBytes);
        for (int64_t c = 0; c < n_chunks; ++c) {
          std::fill(stage.begin(), stage.end(), uint8_t(0xEE));
          for (int i = 0; i < nt * 16 * 8; ++i) {  // the kernel's copy loop
            const int r = i % 8, m = (i / 8) % 16, cg = i / 128;
            uint8_t* dst = stage.data() + hd::mmq3_x_stage_offset(nt, m / 2, cg, m % 2) + 16 * r;
            if (cg < n_groups)
              std::memcpy(dst, reinterpret_cast<const uint8_t*>(xw.data()) +
                                   hd::mmq3_x_global_offset(n_chunks, cg, c, m / 2, m % 2) + 16 * r, 16);
            else
              std::memset(dst, 0, 16);
          }
          for (int j = 0; j < hd::kMmqStepsPerChunk; ++j) {
            const int start = hd::mmq3_x_stage_offset(nt, j, 0, 0);
            for (int n = 0; n < 8 * nt; ++n) {
              for (int kk = 0; kk < 16; ++kk) {
                const size_t at = size_t(start + (n / 8) * 2 * hd::kMmq3CoreBytes + (kk / 8) * hd::kMmq3CoreBytes +
                                         16 * (n % 8) + 2 * (kk % 8));
                uint16_t got;
                std::memcpy(&got, stage.data() + at, 2);
                const int tt = (kk % 8) / 2, e = 2 * (kk / 8) + kk % 2;
                const int64_t u = 4 * c + tt;
                if (n >= ncols || u >= g.n_units) {
                  ASSERT_EQ(fp16_to_f32(got), 0.0f) << dtype_name(t) << " ncols " << ncols << " chunk " << c;
                  continue;
                }
                const int64_t pos = hd::mmq_value_pos<T>(u / T::kParts, int(u % T::kParts), j, e);
                const size_t xi = size_t(n) * size_t(n_in) + size_t(pos);
                ASSERT_EQ(got, f32_to_fp16(x[xi])) << dtype_name(t) << " ncols " << ncols << " chunk " << c
                                                   << " step " << j << " slot " << kk << " column " << n;
                ++hits[xi];
              }
            }
          }
        }
        for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << dtype_name(t) << " ncols " << ncols << " at " << i;
      }
    });
  }
}

TEST(CudaMmqStage, WgmmaSharedMemoryFitsAnH200) {
  for (int nt : {1, 2, 4, 8}) {
    EXPECT_LE(hd::mmq3_smem_bytes<hd::DecQ4_0>(nt), 227 * 1024) << nt;
    EXPECT_LE(hd::mmq3_smem_bytes<hd::DecQ8_0>(nt), 227 * 1024) << nt;
    EXPECT_LE(hd::mmq3_smem_bytes<hd::DecQ4_K>(nt), 227 * 1024) << nt;
    EXPECT_LE(hd::mmq3_smem_bytes<hd::DecQ6_K>(nt), 227 * 1024) << nt;
    // The x region (descriptor start addresses) stays 16-byte aligned.
    EXPECT_EQ(hd::mmq3_stage_bytes<hd::DecQ8_0>(nt) % 128, 0) << nt;
  }
}

}  // namespace
}  // namespace polykv
