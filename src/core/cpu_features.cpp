#include "core/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace polykv {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool fma = c & (1u << 12), f16c = c & (1u << 29), avx = c & (1u << 28);
  {
    const unsigned base_family = (a >> 8) & 0xF, ext_family = (a >> 20) & 0xFF;
    const unsigned family = base_family == 0xF ? base_family + ext_family : base_family;
    unsigned v0 = 0, vb = 0, vc = 0, vd = 0;
    __get_cpuid(0, &v0, &vb, &vc, &vd);  // vendor "AuthenticAMD" = EBX "Auth", EDX "enti", ECX "cAMD"
    f.amd_zen5_or_later = vb == 0x68747541u && vd == 0x69746e65u && vc == 0x444d4163u && family >= 0x1A;
  }
  if (!osxsave || !avx) return f;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool ymm_state = (xcr0_lo & 0x6) == 0x6;     // SSE and AVX registers saved by the OS
  const bool zmm_state = (xcr0_lo & 0xe6) == 0xe6;   // plus opmask and upper ZMM state
  if (!ymm_state) return f;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.fma = fma;
  f.f16c = f16c;
  f.avx2 = b & (1u << 5);
  if (zmm_state) {
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    f.avx512vnni = c & (1u << 11);
    f.avx512vbmi = c & (1u << 1);
  }
  f.gfni = c & (1u << 8);
  // Leaf 7 subleaf 1 (EAX of subleaf 0 is the highest subleaf), EAX bit 4: AVX-VNNI (VEX vpdpbusd).
  if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx_vnni = a & (1u << 4);
#elif defined(__aarch64__) && defined(__linux__)
  f.asimd_dot = getauxval(AT_HWCAP) & (1ul << 20);  // HWCAP_ASIMDDP (asm/hwcap.h)
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

}  // namespace polykv
