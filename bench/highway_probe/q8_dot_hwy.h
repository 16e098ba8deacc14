// The Highway probe's kernels, one object per target (build.sh names them by -DPROBE_DOT=...).
#pragma once
#include <cstdint>
#define PROBE_DECL(sfx)                                                                        \
  const char* hwy_probe_target_##sfx();                                                        \
  float hwy_q8_0_dot_##sfx(const uint8_t* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks);
PROBE_DECL(avx2)
PROBE_DECL(avx512)
PROBE_DECL(neon)
