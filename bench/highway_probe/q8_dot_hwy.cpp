// q8_0 x q8_0 row dot written once with Google Highway (Debian libhwy-dev 1.0.3), compiled per target
// by the build script (-DHWY_COMPILE_ONLY_STATIC: the static target of the compiler flags). Not part
// of polykv: the probe of docs/ISA.md "Highway or per-ISA kernels".
// Per 32-value block: Σ w_q * a_q in int32 (int8 promoted to int16, ReorderWidenMulAccumulate: Highway
// 1.0.3 has no int8 dot op, so no VNNI vpdpbusd / SDOT), then + d_w * d_a * s in float, block order.
#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "q8_dot_hwy.h"

namespace hn = hwy::HWY_NAMESPACE;

static inline float fp16_to_f32_bits(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    const float v = float(man) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  bits = exp == 31 ? (sign | 0x7f800000u | (man << 13)) : (sign | ((exp + 112) << 23) | (man << 13));
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

const char* PROBE_TARGET() { return hwy::TargetName(HWY_STATIC_TARGET); }

// w: n_blocks records of 34 bytes (fp16 d, 32 x int8); a_qs: [n_blocks * 32]; a_d: [n_blocks].
float PROBE_DOT(const uint8_t* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks) {
  const hn::CappedTag<int16_t, 32> d16;  // full vectors of int16, at most one block (AVX-512: 32 lanes)
  const hn::Rebind<int8_t, decltype(d16)> d8;  // the int8 half-width loads they are promoted from
  const hn::Repartition<int32_t, decltype(d16)> d32;
  constexpr size_t kStep = hn::MaxLanes(d8);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* blk = w + b * 34;
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    const int8_t* wq = reinterpret_cast<const int8_t*>(blk + 2);
    const int8_t* aq = a_qs + b * 32;
    auto s0 = hn::Zero(d32), s1 = hn::Zero(d32);
    for (size_t i = 0; i < 32; i += kStep) {
      const auto vw = hn::PromoteTo(d16, hn::LoadU(d8, wq + i));
      const auto va = hn::PromoteTo(d16, hn::LoadU(d8, aq + i));
      s0 = hn::ReorderWidenMulAccumulate(d32, vw, va, s0, s1);
    }
    const int32_t s = hn::GetLane(hn::SumOfLanes(d32, hn::Add(s0, s1)));
    acc += fp16_to_f32_bits(dh) * a_d[b] * float(s);
  }
  return acc;
}
