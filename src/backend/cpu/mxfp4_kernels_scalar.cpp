// Scalar MXFP4 dot kernel (the definition the SIMD kernels agree with up to float rounding: the
// integer block sums are the same, exactly), and the ISA dispatch.
#include "backend/cpu/mxfp4_kernels.h"
#include "quant/mxfp4.h"

namespace polykv::cpu {
namespace {

struct Mxfp4Q8_32 {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const BlockMXFP4* w = static_cast<const BlockMXFP4*>(w_row);
    float acc[NT] = {};
    int8_t k[kQK_MXFP4];
    for (int64_t b = 0; b < n / kQK_MXFP4; ++b) {
      for (int j = 0; j < 16; ++j) {
        k[j] = kMxfp4Values[w[b].qs[j] & 0x0F];
        k[j + 16] = kMxfp4Values[w[b].qs[j] >> 4];
      }
      const float dw = mxfp4_scale(w[b].e);
      for (int t = 0; t < NT; ++t) {
        const int8_t* q = a[t].qs + b * kQK_MXFP4;
        int32_t s = 0;
        for (int i = 0; i < kQK_MXFP4; ++i) s += int32_t(k[i]) * q[i];
        acc[t] += dw * a[t].d[b] * float(s);
      }
    }
    for (int t = 0; t < NT; ++t) out[t] = acc[t];
  }
};

}  // namespace

RowDotFn mxfp4_row_dot_scalar(DType type) { return type == DType::MXFP4 ? by_tokens<Mxfp4Q8_32> : nullptr; }

RowDotFn mxfp4_row_dot(Isa isa, DType type) {
  if (type != DType::MXFP4) return nullptr;
  RowDotFn f = nullptr;
  if (isa == Isa::Avx512) f = mxfp4_row_dot_avx512(type);
  if (!f && isa_has_avx2(isa)) f = mxfp4_row_dot_avx2(type);
#if defined(__aarch64__)
  if (!f && isa == Isa::Neon) f = row_dot_neon(type);  // legacy_kernels_neon.h (SDOT where present)
#endif
  return f ? f : mxfp4_row_dot_scalar(type);
}

}  // namespace polykv::cpu
