// MTP drafting: the target's own next-token-prediction block (model/mtp_head.h). The MTP helper's
// branch provides the implementation; this header is the declaration fixed in the shared API.
#pragma once
#include <memory>

#include "engine/spec/drafter.h"
#include "model/model.h"

namespace polykv {

// throws Error "this model has no MTP (nextn) layers" when it has none
std::unique_ptr<Drafter> make_mtp_drafter(Model& target, int max_tokens);

}  // namespace polykv
