// x86 CPU features from CPUID, with the OS's register-state support (XGETBV) taken into account.
// Used to choose SIMD kernels at run time; works with gcc and clang alike.
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

  bool has_avx2_set() const { return avx2 && fma && f16c; }
  bool has_avx512_set() const { return has_avx2_set() && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni; }
};

const CpuFeatures& cpu_features();

}  // namespace polykv
