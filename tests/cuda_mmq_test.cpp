// The host side of the quantized mat-mul on tensor cores (backend/cuda/matmul_cuda_mmq.cuh) on the CPU
// (runs in CI): the values a thread puts in its A fragments (word j of its decoded unit, via
// hd::unit_word_values) are dequantize_row_ref's values at hd::mmq_value_pos, every value of a row
// exactly once, for every split type (so the B fragments, loaded at the same positions, pair each
// weight with its activation); and the A fragment builders of mma_fragments.cuh put those values, as
// f16, in the registers the mma expects.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cuda/matmul_cuda_mmq.cuh"
#include "backend/cuda/mma_fragments.cuh"
#include "core/fp16.h"
#include "cuda/matmul_cuda_test_util.h"

namespace polykv {
namespace {

const DType kSplitTypes[] = {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

TEST(CudaMmqHost, FragmentValuesAreTheDequantizedRow) {
  uint32_t seed = 11;
  for (DType t : kSplitTypes) {
    for (bool quantized : {false, true}) {
      const int64_t n_in = dtype_info(t).block_size == 256 ? 1280 : 1056, n_out = 3;
      const auto w = cuda_test::make_weights(t, n_in, n_out, ++seed, quantized);
      const bool visited = cuda::hd::visit_split_decoder(t, [&](auto dec) {
        using T = decltype(dec);
        using S = cuda::hd::Split<T>;
        ASSERT_TRUE(cuda::hd::mmq_type<T>()) << dtype_name(t);
        const cuda::hd::SplitGeom g = cuda::hd::split_geom<T>(n_in);
        std::vector<uint8_t> split(g.row_bytes * size_t(n_out));
        cuda::hd::split_pack_rows<T>(static_cast<const uint8_t*>(w.m.data), w.m.row_stride, n_in, n_out, split.data());
        ASSERT_EQ(g.n_units * 32, n_in);
        for (int64_t o = 0; o < n_out; ++o) {
          std::vector<float> ref(static_cast<size_t>(n_in));
          dequantize_row_ref(t, w.row(o), ref.data(), n_in);
          std::vector<int> hits(static_cast<size_t>(n_in), 0);
          for (int64_t u = 0; u < g.n_units; ++u) {
            uint32_t q[S::kUnitWords], h[S::kHeadWords];
            cuda::hd::split_load_unit<T>(split.data() + size_t(o) * g.row_bytes, g, u, q, h);
            typename T::Unit unit;
            const int part = int(u % T::kParts);
            S::decode(q, h, part, unit);
            for (int j = 0; j < cuda::hd::kMmqStepsPerChunk; ++j) {
              float v[4];
              cuda::hd::unit_word_values(unit, j, v);
              for (int e = 0; e < 4; ++e) {
                const int64_t pos = cuda::hd::mmq_value_pos<T>(u / T::kParts, part, j, e);
                ASSERT_TRUE(pos >= 0 && pos < n_in) << dtype_name(t) << " unit " << u << " word " << j;
                ++hits[size_t(pos)];
                // Equal values (a zero may have the other sign, as everywhere in matmul_cuda_decode.cuh).
                ASSERT_EQ(v[e], ref[size_t(pos)]) << dtype_name(t) << (quantized ? " quantized" : " random bytes")
                                                  << " row " << o << " unit " << u << " word " << j << " byte " << e
                                                  << " (value " << pos << ")";
                // And the f32 value is unit_value's, so the f16 weight is the cuBLAS tiles' one.
                ASSERT_EQ(v[e], cuda::hd::unit_value(unit, j, e));
              }
            }
          }
          for (int64_t i = 0; i < n_in; ++i)
            ASSERT_EQ(hits[size_t(i)], 1) << dtype_name(t) << ": value " << i << " of the row taken " << hits[size_t(i)]
                                          << " times";
        }
      });
      ASSERT_TRUE(visited) << dtype_name(t);
    }
  }
}

// The A fragment builders (mma_fragments.cuh) on the CPU: register r of k-step j holds the f16 of word j's
// values of row g (lo) for r = 0, 2 and of row g + 8 (hi) for r = 1, 3, values (0, 1) in registers 0 and 1
// and (2, 3) in 2 and 3, the lower value in the low half; a unit past the row's end gives zeros; the f16
// arithmetic of q4_0 / q8_0 gives the same registers (up to the sign of a zero).
TEST(CudaMmqHost, AFragmentsHoldTheF16WeightsInMmaOrder) {
  uint32_t seed = 21;
  for (DType t : kSplitTypes) {
    const int64_t n_in = dtype_info(t).block_size == 256 ? 512 : 256, n_out = 2;
    const auto w = cuda_test::make_weights(t, n_in, n_out, ++seed, true);
    cuda::hd::visit_split_decoder(t, [&](auto dec) {
      using T = decltype(dec);
      using S = cuda::hd::Split<T>;
      const cuda::hd::SplitGeom g = cuda::hd::split_geom<T>(n_in);
      std::vector<uint8_t> split(g.row_bytes * size_t(n_out));
      cuda::hd::split_pack_rows<T>(static_cast<const uint8_t*>(w.m.data), w.m.row_stride, n_in, n_out, split.data());
      for (int64_t u = 0; u < g.n_units; ++u) {
        const int part = int(u % T::kParts);
        cuda::hd::RowUnits<T, 2> ru;
        const uint8_t* rows[2] = {split.data(), split.data() + g.row_bytes};
        cuda::hd::load_row_units<T, 2>(rows, g, u, ru);
        typename T::Unit lo, hi;
        S::decode(ru.q[0], ru.h[0], part, lo);
        S::decode(ru.q[1], ru.h[1], part, hi);
        for (int j = 0; j < cuda::hd::kMmqStepsPerChunk; ++j) {
          float vl[4], vh[4];
          cuda::hd::unit_word_values(lo, j, vl);
          cuda::hd::unit_word_values(hi, j, vh);
          const uint16_t want[4][2] = {{f32_to_fp16(vl[0]), f32_to_fp16(vl[1])}, {f32_to_fp16(vh[0]), f32_to_fp16(vh[1])},
                                       {f32_to_fp16(vl[2]), f32_to_fp16(vl[3])}, {f32_to_fp16(vh[2]), f32_to_fp16(vh[3])}};
          uint32_t af[4], none[4];
          cuda::hd::mmq_a_fragment(lo, hi, j, true, af);
          cuda::hd::mmq_a_fragment(lo, hi, j, false, none);
          for (int r = 0; r < 4; ++r) {
            EXPECT_EQ(none[r], 0u) << dtype_name(t) << ": a unit past the row's end gives zeros";
            for (int e = 0; e < 2; ++e)
              ASSERT_EQ(uint16_t(af[r] >> (16 * e)), want[r][e])
                  << dtype_name(t) << " unit " << u << " step " << j << " register " << r << " half " << e;
          }
          if constexpr (cuda::hd::mmq_half_dequant<T>()) {
            const uint32_t dl = (ru.h[0][0] & 0xFFFFu) * 0x10001u, dh = (ru.h[1][0] & 0xFFFFu) * 0x10001u;
            uint32_t hf[4];
            cuda::hd::mmq_a_fragment_half<T>(lo, hi, j, dl, dh, hf);
            for (int r = 0; r < 4; ++r)
              for (int e = 0; e < 2; ++e) {
                const uint16_t a = uint16_t(hf[r] >> (16 * e)), b = want[r][e];
                ASSERT_TRUE(a == b || ((a | b) & 0x7FFF) == 0)
                    << dtype_name(t) << " (f16 arithmetic) unit " << u << " step " << j << " register " << r;
              }
          }
        }
      }
    });
  }
}

TEST(CudaMmqHost, TilesHoldTheColumns) {
  for (int n = 1; n <= cuda::hd::kMmqMaxCols; ++n) {
    const int nt = cuda::hd::mmq_tiles(n);
    EXPECT_GE(8 * nt, n);
    EXPECT_TRUE(nt == 1 || 8 * nt / 2 < n) << n << " columns in " << nt << " tiles";
  }
}

}  // namespace
}  // namespace polykv
