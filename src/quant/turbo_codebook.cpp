// Lloyd–Max codebooks of N(0, 1) for 4, 8 and 16 levels, and their N(0, 1/group) scalings.
#include <cmath>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/turbo.h"
#include "quant/turbo_internal.h"

namespace polykv::turbo {
namespace {

// Produced by tools/lloyd_max.py (Lloyd's iteration on the standard normal density with exact
// integrals via erf and the normal pdf, run until no level moves by more than 1e-15):
//   4 levels (2 bits):   64 iterations, MSE = 0.117481847829
//   8 levels (3 bits):  235 iterations, MSE = 0.034547760789
//  16 levels (4 bits):  947 iterations, MSE = 0.009501008008
// tests/turbo_test.cpp re-runs the iteration in C++ and checks these values and MSEs.
constexpr double kGauss2[4] = {-1.5104176084990966, -0.45278003463649247, 0.45278003463649247,
                               1.5104176084990966};
constexpr double kGauss3[8] = {-2.1519457045369919, -1.3439092785050044,  -0.75600528120588106,
                               -0.24509417894422306, 0.24509417894422306,  0.75600528120588106,
                               1.3439092785050044,  2.1519457045369919};
constexpr double kGauss4[16] = {
    -2.7325895709951595, -2.0690172265313853, -1.6180463860218839, -1.2562311973471774,
    -0.94234045648696152, -0.65675911853246505, -0.38804829949029135, -0.12839502985114737,
    0.12839502985114737,  0.38804829949029135,  0.65675911853246505,  0.94234045648696152,
    1.2562311973471774,   1.6180463860218839,   2.0690172265313853,   2.7325895709951595};

const double* gauss_f64(int bits) { return bits == 2 ? kGauss2 : bits == 3 ? kGauss3 : kGauss4; }

// All float tables, built once: [bits - 2][scale] with scale 0 = N(0,1), 1..3 = groups 32, 64, 128.
struct Tables {
  float t[3][4][16];
  Tables() {
    const double inv_sqrt[4] = {1.0, 1.0 / std::sqrt(32.0), 1.0 / std::sqrt(64.0), 1.0 / std::sqrt(128.0)};
    for (int b = 2; b <= 4; ++b)
      for (int s = 0; s < 4; ++s)
        for (int i = 0; i < (1 << b); ++i) {
          const float x = float(gauss_f64(b)[i] * inv_sqrt[s]);
          t[b - 2][s][i] = s == 0 ? x : fp16_exact(x);  // group levels: f16-exact (turbo.h)
        }
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

int scale_slot(int group) { return group == 32 ? 1 : group == 64 ? 2 : 3; }

void check_bits(int bits) { check(bits >= 2 && bits <= 4, "turbo: bits must be 2, 3 or 4, got ", bits); }

}  // namespace

const double* gaussian_codebook_f64(int bits) {
  check_bits(bits);
  return gauss_f64(bits);
}

const float* gaussian_codebook(int bits) {
  check_bits(bits);
  return tables().t[bits - 2][0];
}

const float* levels(int bits, int group) {
  check_bits(bits);
  check(group == 32 || group == 64 || group == 128, "turbo: group must be 32, 64 or 128, got ", group);
  return tables().t[bits - 2][scale_slot(group)];
}

namespace detail {
const float* level_table(int bits, int group) { return tables().t[bits - 2][scale_slot(group)]; }
}  // namespace detail

}  // namespace polykv::turbo
