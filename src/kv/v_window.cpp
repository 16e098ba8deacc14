#include "kv/v_window.h"

#include "core/error.h"

namespace polykv {

VCacheSpec parse_v_cache_spec(const std::string& name) {
  VCacheSpec spec;
  if (name.size() > 1 && (name.back() == 'w' || name.back() == 'W')) {
    try {
      spec.type = parse_kv_type(name.substr(0, name.size() - 1));
      spec.window = VPrecisionWindow{kDefaultSinks, kDefaultRecent, KvType::Q8_0};
      return spec;
    } catch (const Error&) {
      fail("unknown V cache type '", name, "' (valid: ", kv_type_names(), ", each optionally followed by 'w')");
    }
  }
  spec.type = parse_kv_type(name);
  return spec;
}

}  // namespace polykv
