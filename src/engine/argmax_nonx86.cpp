// Not x86: no AVX kernels (CMake compiles this file instead of argmax_avx2.cpp / argmax_avx512.cpp).
#include "engine/argmax.h"

namespace polykv {

ArgmaxFn argmax_avx2() { return nullptr; }
ArgmaxFn argmax_avx512() { return nullptr; }

}  // namespace polykv
