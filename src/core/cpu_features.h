// CPU features for choosing SIMD kernels at run time: x86 from CPUID, with the OS's register-state
// support (XGETBV) taken into account; ARM64 from the kernel's hwcaps (getauxval(AT_HWCAP)).
// Works with gcc and clang alike.
#pragma once

namespace polykv {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx_vnni = false;  // VEX-encoded vpdpbusd on ymm (Alder Lake, Zen 5, Sapphire Rapids); not part of any set
  bool avx512vbmi = false;  // vpermb / vpermi2b (Ice Lake+, Zen 4+); not part of any set (ternary_kernels.h)
  bool gfni = false;        // gf2p8affineqb (Ice Lake+, Zen 4+): bit matrices on bytes; not part of any set
  // AMD family 0x1A or later (Zen 5): 512-bit datapaths, where vpermi2b zmm runs at full rate (on Sapphire
  // Rapids it is 2 uops and 512-bit code loses port 1). Picks the VBMI TQ1_0 kernel (docs/TERNARY.md).
  bool amd_zen5_or_later = false;
  // ARM64. ASIMD (NEON) itself is part of every AArch64 CPU; these are the extras inside the neon set.
  bool asimd_dot = false;  // SDOT/UDOT (FEAT_DotProd, HWCAP_ASIMDDP): Cortex-A55/A76+, Apple M1+, Graviton 2+

  bool has_avx2_set() const { return avx2 && fma && f16c; }
  bool has_avx512_set() const { return has_avx2_set() && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni; }
};

const CpuFeatures& cpu_features();

}  // namespace polykv
