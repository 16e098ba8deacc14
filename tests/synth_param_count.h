// Parameters of a synth shape, counted from its tensor layout (the product of each tensor's dims).
#pragma once
#include <cstdint>

#include "model/synth_layout.h"

namespace polykv::test {

inline double synth_parameter_count(const char* shape_name) {
  double n = 0;
  for (const auto& t : synth_tensor_layout(find_model_shape(shape_name))) {
    double e = 1;
    for (int64_t d : t.ne) e *= double(d);
    n += e;
  }
  return n;
}

}  // namespace polykv::test
