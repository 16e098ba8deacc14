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

bool device_argmax(DeviceKind kind) {
  if (engine_step_old()) return false;
  const char* v = std::getenv("POLYKV_ENGINE_ARGMAX");
  if (v != nullptr && *v != 0) return std::strcmp(v, "device") == 0;
  return kind != DeviceKind::Cpu;
}

bool pipelined_greedy() {
  const char* v = std::getenv("POLYKV_GREEDY_PIPELINE");
  return !(v != nullptr && std::strcmp(v, "0") == 0);
}

}  // namespace polykv
