// AVX2 form of the chunked Gated DeltaNet recurrence: gdn_rule_chunked's bytes, 8 values a vector
// (gated_delta_chunked.h). Compiled with -mfma (CMakeLists.txt): contraction is off so that every multiply-add
// keeps the reference's two roundings.
#include "core/fp_contract_off.h"  // first: contraction off for this TU
#include "backend/cpu/gated_delta_chunked.h"
#include "backend/cpu/gated_delta_net.h"
#include "core/simd_f32_x86.h"

namespace polykv {
namespace {

void rule_chunked_avx2(const GdnParams& p, const GdnInputs& in, float* S, float* out, int h0, int h1, int chunk) {
  gdn_chunked::rule_chunked<gdn_chunked::VectorChunkOps<simd_x86::F32x8>>(p, in, S, out, h0, h1, chunk);
}

}  // namespace

GdnChunkedFn gdn_rule_chunked_avx2() { return &rule_chunked_avx2; }

}  // namespace polykv
