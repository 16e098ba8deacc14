// Test helper: Q8_K activations of n_tok tokens (what matmul makes for k-quant and ternary weights) with their
// ActRows, for tests that call kernels directly.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cpu/matmul_kernels.h"

namespace polykv::test {

struct Q8KActs {
  std::vector<int8_t> qs;
  std::vector<float> d;
  std::vector<int16_t> bsums;
  std::vector<cpu::ActRow> rows;
  Q8KActs(const std::vector<float>& x, int64_t n_in, int n_tok)
      : qs(size_t(n_in * n_tok)), d(size_t(n_in / 256 * n_tok)), bsums(size_t(n_in / 16 * n_tok)), rows(size_t(n_tok)) {
    for (int t = 0; t < n_tok; ++t) {
      cpu::quantize_act_q8_K(x.data() + t * n_in, n_in, qs.data() + t * n_in, d.data() + t * (n_in / 256),
                             bsums.data() + t * (n_in / 16));
      rows[size_t(t)].qs = qs.data() + t * n_in;
      rows[size_t(t)].d = d.data() + t * (n_in / 256);
      rows[size_t(t)].bsums = bsums.data() + t * (n_in / 16);
    }
  }
};

}  // namespace polykv::test
