// gdn_rule_chunked (gated_delta_net.h), the chunked recurrence's reference: gated_delta_chunked.h's body over the
// scalar policy, in a TU of its own with floating-point contraction off, as in the vector policy's TUs
// (*_avx2, *_avx512, *_neon), so that both give the same bits on every target (GCC contracts a * b + c into an
// FMA by default on ARM64).
#include "core/fp_contract_off.h"  // first: contraction off for this TU
#include "backend/cpu/gated_delta_chunked.h"
#include "backend/cpu/gated_delta_net.h"

namespace polykv {

void gdn_rule_chunked(const GdnParams& p, const GdnInputs& in, float* S, float* out, int h0, int h1, int chunk) {
  gdn_chunked::rule_chunked<gdn_chunked::ScalarChunkOps>(p, in, S, out, h0, h1, chunk);
}

}  // namespace polykv
