// The warp forms of kv_store's encoders (backend/cuda/kv_encode.cuh: the register forms of the turbo and
// trellis encoders, viterbi_warp) compiled as plain C++ and run on the CPU as one warp of 32 fibers,
// against quant/'s quantize_head, byte for byte. No GPU needed: this checks the lane arithmetic (value
// i = lane + 32 k in registers, the shuffled butterflies, the LaneOrder trees, the traceback's suffix
// scan of maps) wherever the CUDA build is compiled; tests/cuda/kv_store_cuda_test.cpp checks the same
// bytes on the device.
//
// Emulation: one warp of 32 fibers (fiber_emulator.h); __syncwarp is the warp's barrier, a shuffle an exchange
// between two of them (the encoders shuffle only in warp-uniform code). The warp's Scratch is one object all
// fibers share. Not covered: device-only behaviour (the intrinsics' rounding is the host's
// IEEE arithmetic, as kv_encode_scalar.cuh's CPU branch; memory-model races between barriers).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fiber_emulator.h"

namespace kvemu {
// Runs f(lane) as the 32 lanes of one warp (fiber_emulator.h).
inline void run_warp(const std::function<void(int)>& f) { fiberemu::run(32, f); }
}  // namespace kvemu

// The CUDA built-ins the warp forms use, for the host compiler.
struct float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
#define __device__
#define __shfl_xor_sync(mask, v, o) ::fiberemu::exchange(v, ::fiberemu::current ^ (o))
#define __shfl_sync(mask, v, src) ::fiberemu::exchange(v, src)
#define __shfl_down_sync(mask, v, d) ::fiberemu::exchange(v, ::fiberemu::current + (d))
#define __syncwarp() ::fiberemu::warp_sync()
#define POLYKV_KV_WARP_EMULATION 1
#include "backend/cuda/kv_encode.cuh"
#undef __device__

#include "kv/kv_type.h"

namespace polykv::cuda::enc {
namespace {

// kv_store_cuda.cu's WarpExec, on the fibers.
struct EmuWarpExec {
  static constexpr bool kWarpShuffles = true;
  int lane;
  template <class F>
  void each(F&& f) {
    f(lane);
    __syncwarp();
  }
  template <class F>
  void one(F&& f) {
    if (lane == 0) f();
    __syncwarp();
  }
};

// One (row, head) through the warp forms: x [head_dim] -> dst [p.head_bytes].
void encode_head_warp(const SideParams& p, const float* x, uint8_t* dst) {
  static Scratch sh;  // the warp's shared memory
  std::memset(&sh, 0x7f, sizeof sh);  // stale values must not matter
  for (int u = 0; u < p.units; ++u) {
    kvemu::run_warp([&](int lane) {
      EmuWarpExec ex{lane};
      encode_unit(ex, sh, p, x + size_t(u) * size_t(p.unit_values), dst + size_t(u) * p.unit_bytes);
    });
  }
}

std::vector<float> make_row(int kind, int hd, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> pos(0, hd - 1);
  std::vector<float> x(static_cast<size_t>(hd));
  for (auto& v : x) v = nd(rng);
  switch (kind) {
    case 0: break;                                                  // Gaussian
    case 1: for (int k = 0; k < 4; ++k) x[size_t(pos(rng))] *= (k % 2 ? -300.0f : 80.0f); break;  // outliers
    case 2: std::fill(x.begin(), x.end(), 0.0f); break;             // all zero: zero records
    case 3: std::fill(x.begin(), x.begin() + std::min(hd, 128), 0.0f); break;  // a zero first group
    case 4: for (auto& v : x) v *= 1e-41f; break;                   // subnormal inputs
    case 5: for (auto& v : x) v *= 3e4f; break;                     // huge: the f16 norm may overflow
    case 6: std::fill(x.begin(), x.end(), nd(rng)); break;          // constant
    case 7: std::fill(x.begin(), x.end(), 0.0f); x[size_t(pos(rng))] = nd(rng); break;  // one-hot
    default: for (auto& v : x) v = float(int(v * 4.0f)); break;     // small integers: ties in the metrics
  }
  return x;
}
constexpr int kKinds = 9;

class KvEncodeWarpEmulation : public ::testing::TestWithParam<KvType> {};

TEST_P(KvEncodeWarpEmulation, BytesEqualQuantizeHead) {
  const KvType t = GetParam();
  const KvTypeOps& ops = kv_type_ops(t);
  int rows = 0;
  // The register forms whatever POLYKV_CUDA_KV_VITERBI says, both Viterbi chains (radix 4, one step a round).
  const EncoderForm forms[] = {EncoderForm::Registers, EncoderForm::RegistersRadix2};
  for (int hd : {32, 64, 128, 256}) {
    for (EncoderForm form : forms) {
      SideParams p = make_side_params(t, hd);
      p.tab.form = form;
      const size_t bytes = kv_head_bytes(t, hd);
      std::mt19937 rng(uint32_t(100 * hd + int(t)));
      for (int kind = 0; kind < kKinds; ++kind)
        for (int trial = 0; trial < 6; ++trial) {
          const std::vector<float> x = make_row(kind, hd, rng);
          std::vector<uint8_t> want(bytes, 0xCD), got(bytes, 0x5A);
          ops.quantize_head(x.data(), want.data(), hd);
          encode_head_warp(p, x.data(), got.data());
          for (size_t b = 0; b < bytes; ++b)
            ASSERT_EQ(int(got[b]), int(want[b])) << kv_type_name(t) << " head_dim " << hd << " form " << int(form)
                                                 << " kind " << kind << " trial " << trial << " byte " << b << " of "
                                                 << bytes;
          ++rows;
        }
    }
  }
  EXPECT_EQ(rows, 4 * 2 * kKinds * 6);
}

// q8_0 and q4_0: the register forms (a lane per value) and the array forms (a lane per block), head sizes 32-512
// (1-16 blocks: the register forms take 4 blocks a pass, so 160 has a short last pass).
TEST(KvEncodeWarpEmulationBlocks, BytesEqualQuantizeHead) {
  for (KvType t : {KvType::Q8_0, KvType::Q4_0}) {
    const KvTypeOps& ops = kv_type_ops(t);
    for (int hd : {32, 64, 96, 128, 160, 256, 512}) {
      for (EncoderForm form : {EncoderForm::Registers, EncoderForm::Array}) {
        SideParams p = make_side_params(t, hd);
        p.tab.form = form;
        const size_t bytes = kv_head_bytes(t, hd);
        std::mt19937 rng(uint32_t(7 * hd + int(t)));
        for (int kind = 0; kind < kKinds; ++kind)
          for (int trial = 0; trial < 4; ++trial) {
            std::vector<float> x = make_row(kind, hd, rng);
            if (trial == 3)  // ties of |x| with both signs: q4_0 keeps the first one's sign
              for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 3 == 0 ? -1.0f : 1.0f) * float(1 + (i * 7) % 5);
            std::vector<uint8_t> want(bytes, 0xCD), got(bytes, 0x5A);
            ops.quantize_head(x.data(), want.data(), hd);
            encode_head_warp(p, x.data(), got.data());
            for (size_t b = 0; b < bytes; ++b)
              ASSERT_EQ(int(got[b]), int(want[b])) << kv_type_name(t) << " head_dim " << hd << " form " << int(form)
                                                   << " kind " << kind << " trial " << trial << " byte " << b;
          }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RotatedKvTypes, KvEncodeWarpEmulation,
                         ::testing::Values(KvType::Turbo2, KvType::Turbo3, KvType::Turbo4, KvType::Turbo2T,
                                           KvType::Turbo3T, KvType::Turbo4T),
                         [](const auto& info) { return std::string(kv_type_name(info.param)); });

}  // namespace
}  // namespace polykv::cuda::enc
