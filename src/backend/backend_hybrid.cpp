// The default hybrid-model ops of Backend (backend.h): a backend without them says so instead of crashing.
#include "backend/backend.h"
#include "core/error.h"

namespace polykv {
namespace {

[[noreturn]] void unsupported(const Backend& b, const char* op) {
  fail("the ", b.describe(), " backend does not run hybrid (Gated DeltaNet) models yet (op ", op,
       "): use --device cpu");
}

}  // namespace

void Backend::deinterleave(const float*, int, int, int, int, float*, float*) { unsupported(*this, "deinterleave"); }
void Backend::sigmoid_mul(float*, const float*, int64_t) { unsupported(*this, "sigmoid_mul"); }
void Backend::ssm_conv(int, const float*, int, const float*, float*, int) { unsupported(*this, "ssm_conv"); }
void Backend::gated_delta_rule(int, const GdnParams&, const float*, const float*, const float*, const float*,
                               const float*, float*) {
  unsupported(*this, "gated_delta_rule");
}

}  // namespace polykv
