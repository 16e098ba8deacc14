// The rotation H·S of turbo groups: seeded ±1 signs and the normalized fast Walsh–Hadamard transform.
#include <cmath>

#include "quant/turbo.h"
#include "quant/turbo_internal.h"

namespace polykv::turbo {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Signs for n = 32, 64, 128 (see turbo.h "Signs").
struct Signs {
  float s[3][128];
  Signs() {
    const int sizes[3] = {32, 64, 128};
    for (int k = 0; k < 3; ++k) {
      uint64_t state = kSignSeed ^ uint64_t(sizes[k]);
      uint64_t w = 0;
      for (int i = 0; i < sizes[k]; ++i) {
        if (i % 64 == 0) w = splitmix64(state);
        s[k][i] = ((w >> (i % 64)) & 1) ? -1.0f : 1.0f;
      }
    }
  }
};

// In place: x <- H·x for the normalized n-point Walsh–Hadamard matrix (n a power of two).
// Unnormalized butterflies (Sylvester ordering, H_ij = (-1)^popcount(i & j)), then one 1/sqrt(n).
void fwht(float* x, int n) {
  for (int h = 1; h < n; h *= 2)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
  const float scale = float(1.0 / std::sqrt(double(n)));
  for (int i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace

namespace detail {
const float* sign_table(int n) {
  static const Signs signs;
  return signs.s[n == 32 ? 0 : n == 64 ? 1 : 2];
}
}  // namespace detail

void rotate(float* x, int head_dim) {
  const int n = group_size(head_dim);
  const float* s = detail::sign_table(n);
  for (int g = 0; g < head_dim; g += n) {
    for (int i = 0; i < n; ++i) x[g + i] *= s[i];
    fwht(x + g, n);
  }
}

void unrotate(float* y, int head_dim) {
  const int n = group_size(head_dim);
  const float* s = detail::sign_table(n);
  for (int g = 0; g < head_dim; g += n) {
    fwht(y + g, n);
    for (int i = 0; i < n; ++i) y[g + i] *= s[i];
  }
}

}  // namespace polykv::turbo
