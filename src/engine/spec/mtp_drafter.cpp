// Placeholder until the MTP branch lands (it replaces this file): --spec mtp is refused.
#include "engine/spec/mtp_drafter.h"

#include "core/error.h"

namespace polykv {

std::unique_ptr<Drafter> make_mtp_drafter(Model& target, int max_tokens) {
  (void)target;
  (void)max_tokens;
  fail("--spec mtp: MTP drafting is not in this build");
}

}  // namespace polykv
