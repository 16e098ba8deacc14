// The default MoE ops of Backend (backend.h): a backend without them refuses with a clear Error
// (model loading checks first, model/moe_ffn.h, so these are a last line).
#include "backend/backend.h"
#include "core/error.h"

namespace polykv {

std::vector<WeightMatrix> Backend::upload_experts(std::span<const WeightMatrix> host) {
  std::vector<WeightMatrix> out;
  out.reserve(host.size());
  for (const WeightMatrix& m : host) out.push_back(upload_matrix(m));
  return out;
}

void Backend::moe_route(const float*, int, const MoeRouting&, int32_t*, float*) {
  fail("the ", describe(), " backend does not run mixture-of-experts models yet (use --device cpu)");
}

void Backend::moe_experts(const MoeExperts&, const float*, const int32_t*, const float*, int, int, float*) {
  fail("the ", describe(), " backend does not run mixture-of-experts models yet (use --device cpu)");
}

void Backend::moe_route_experts(const MoeExperts& w, const float* x, const float* logits, const MoeRouting& r, int n,
                                int32_t* ids, float* weights, float* out) {
  moe_route(logits, n, r, ids, weights);
  moe_experts(w, x, ids, weights, n, r.n_used, out);
}

void Backend::add_sigmoid_gated(float*, const float*, const float*, int, int) {
  fail("the ", describe(), " backend does not run mixture-of-experts models yet (use --device cpu)");
}

}  // namespace polykv
