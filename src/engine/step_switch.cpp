#include "engine/step_switch.h"

#include <cstdlib>
#include <cstring>

namespace polykv {

bool engine_step_old() {
  static const bool old = [] {
    const char* v = std::getenv("POLYKV_ENGINE_STEP");
    return v != nullptr && std::strcmp(v, "old") == 0;
  }();
  return old;
}

}  // namespace polykv
