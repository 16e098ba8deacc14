// ARM64 NEON form of the chunked Gated DeltaNet recurrence: gdn_rule_chunked's bytes, 4 values a vector
// (gated_delta_chunked.h). Contraction is off, as in the reference's TU (gated_delta_chunked_ref.cpp).
#include "core/fp_contract_off.h"  // first: contraction off for this TU
#include "backend/cpu/gated_delta_chunked.h"
#include "backend/cpu/gated_delta_net.h"
#include "core/simd_f32_neon.h"

namespace polykv {
namespace {

void rule_chunked_neon(const GdnParams& p, const GdnInputs& in, float* S, float* out, int h0, int h1, int chunk) {
  gdn_chunked::rule_chunked<gdn_chunked::VectorChunkOps<simd_neon::F32x4>>(p, in, S, out, h0, h1, chunk);
}

}  // namespace

GdnChunkedFn gdn_rule_chunked_neon() { return &rule_chunked_neon; }

}  // namespace polykv
