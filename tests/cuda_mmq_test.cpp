// The host side of the quantized mat-mul on tensor cores (backend/cuda/matmul_cuda_mmq.cuh) on the CPU
// (runs in CI): the values a thread puts in its A fragments (word j of its decoded unit, via
// hd::unit_word_values) are dequantize_row_ref's values at hd::mmq_value_pos, every value of a row
// exactly once, for every split type (so the B fragments, loaded at the same positions, pair each
// weight with its activation); and hd::mmq_plan cuts K into non-empty splits that cover every chunk
// once, independently of the column count.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cuda/matmul_cuda_mmq.cuh"
#include "cuda/matmul_cuda_test_util.h"

namespace polykv {
namespace {

const DType kSplitTypes[] = {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K};

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

TEST(CudaMmqHost, PlanCoversEveryChunkOnce) {
  for (int64_t n_out : {1, 127, 128, 129, 1000, 4096, 4097, 14336, 28672, 128256}) {
    for (int64_t n_units : {1, 3, 4, 5, 33, 128, 448, 1000}) {
      for (int sms : {1, 78, 132}) {
        for (int forced : {0, 1, 3, 8, 20}) {
          const cuda::hd::MmqPlan p = cuda::hd::mmq_plan(n_out, n_units, sms, forced);
          SCOPED_TRACE(testing::Message() << "n_out " << n_out << " units " << n_units << " SMs " << sms << " forced "
                                          << forced);
          ASSERT_EQ(p.row_blocks * cuda::hd::kMmqRows >= n_out, true);
          ASSERT_LT((p.row_blocks - 1) * cuda::hd::kMmqRows, n_out);
          ASSERT_EQ(p.n_chunks, (n_units + 3) / 4);
          ASSERT_GE(p.splits, 1);
          ASSERT_LE(p.splits, cuda::hd::kMmqMaxSplits);
          // Splits [s cps, min((s + 1) cps, n_chunks)) cover [0, n_chunks), none empty.
          ASSERT_GE(int64_t(p.splits) * p.chunks_per_split, p.n_chunks);
          ASSERT_LT(int64_t(p.splits - 1) * p.chunks_per_split, p.n_chunks);
          if (forced > 0) EXPECT_LE(p.splits, forced);
        }
      }
    }
  }
  // Small matrices split K so that ~one block per SM runs; large ones do not.
  EXPECT_EQ(cuda::hd::mmq_plan(4096, 128, 132, 0).splits, 5);
  EXPECT_EQ(cuda::hd::mmq_plan(28672, 128, 132, 0).splits, 1);
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
