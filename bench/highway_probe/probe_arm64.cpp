// The Highway probe's kernel cross-compiled for aarch64 (NEON static target) and run under qemu:
// against a plain scalar q8_0 dot on random blocks (correctness only; qemu says nothing about speed).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "q8_dot_hwy.h"

static float fp16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) return (sign ? -1.0f : 1.0f) * float(man) / 16777216.0f;
  const uint32_t bits = exp == 31 ? (sign | 0x7f800000u | (man << 13)) : (sign | ((exp + 112) << 23) | (man << 13));
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

int main() {
  std::mt19937 rng(7);
  int bad = 0;
  for (int64_t n_blocks : {1, 3, 7, 128}) {
    std::vector<uint8_t> w(size_t(n_blocks) * 34);
    for (auto& b : w) b = uint8_t(rng());
    std::vector<int8_t> a(size_t(n_blocks) * 32);
    for (auto& v : a) v = int8_t(rng());  // every value, -128 included
    std::vector<float> ad(static_cast<size_t>(n_blocks));
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint16_t h = uint16_t(0x2000 + rng() % 0x1000);  // small positive scales
      std::memcpy(&w[size_t(b) * 34], &h, 2);
      ad[size_t(b)] = 0.01f * float(1 + rng() % 100);
    }
    double ref = 0;
    float ref_f = 0;
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint16_t h;
      std::memcpy(&h, &w[size_t(b) * 34], 2);
      int32_t s = 0;
      for (int i = 0; i < 32; ++i) s += int32_t(int8_t(w[size_t(b) * 34 + 2 + size_t(i)])) * a[size_t(b * 32 + i)];
      ref_f += fp16(h) * ad[size_t(b)] * float(s);
      ref += double(fp16(h)) * ad[size_t(b)] * s;
    }
    const float got = hwy_q8_0_dot_neon(w.data(), a.data(), ad.data(), n_blocks);
    const bool ok = got == ref_f;
    bad += !ok;
    std::printf("%s blocks %ld: hwy %.6g scalar %.6g (%s)\n", hwy_probe_target_neon(), long(n_blocks), got, ref_f,
                ok ? "bit-identical" : "DIFFERS");
  }
  return bad ? 1 : 0;
}
